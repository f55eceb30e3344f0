package config

import (
	_ "embed"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// exampleYAML is keyheat.example.yaml: every key with its default and a
// comment saying what it does.
//
//go:embed keyheat.example.yaml
var exampleYAML []byte

// Example returns the commented example configuration, every key at its
// default. Commands print it for users to start a file from.
func Example() []byte { return append([]byte(nil), exampleYAML...) }

// AddFlags registers on fs the --config flag and one flag per config key,
// named as the key (--kafka.brokers, --ingest.format), with the key's
// default and, as help, the comment above the key in the example file.
// Load applies the flags the user set; unset flags never override the
// environment or the file.
func AddFlags(fs *pflag.FlagSet) {
	fs.StringP("config", "c", os.Getenv("KEYHEAT_CONFIG"), "YAML config file (env KEYHEAT_CONFIG)")
	def := reflect.ValueOf(Defaults())
	help := keyHelp()
	walk(def.Type(), "", func(key string, index []int) {
		v := def.FieldByIndex(index)
		usage := help[key]
		switch v.Interface().(type) {
		case time.Duration:
			fs.Duration(key, v.Interface().(time.Duration), usage)
		case string:
			fs.String(key, v.String(), usage)
		case []string:
			fs.StringSlice(key, v.Interface().([]string), usage)
		case bool:
			fs.Bool(key, v.Bool(), usage)
		case int:
			fs.Int(key, int(v.Int()), usage)
		case float64:
			fs.Float64(key, v.Float(), usage)
		default:
			// A new field type needs a case here; TestEveryKeyHasAFlag
			// fails until it has one.
			panic(fmt.Sprintf("config: no flag type for %s (%s)", key, v.Type()))
		}
	})
}

// keyHelp maps every key of the example file to the comment above it,
// folded onto one line.
var keyHelp = sync.OnceValue(func() map[string]string {
	var doc yaml.Node
	if err := yaml.Unmarshal(exampleYAML, &doc); err != nil || len(doc.Content) == 0 {
		panic(fmt.Sprintf("config: embedded example does not parse: %v", err)) // caught by the tests
	}
	out := map[string]string{}
	var rec func(prefix string, m *yaml.Node)
	rec = func(prefix string, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := k.Value
			if prefix != "" {
				key = prefix + "." + key
			}
			if v.Kind == yaml.MappingNode {
				rec(key, v)
				continue
			}
			out[key] = foldComment(k.HeadComment)
		}
	}
	rec("", doc.Content[0])
	return out
})

// foldComment turns "# a\n# b" into "a b".
func foldComment(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.Join(words, " ")
}
