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
	"go.yaml.in/yaml/v4"
)

// exampleYAML is keyheat.example.yaml: every key with its default and a
// comment saying what it does, grouped by the commands that read it.
//
//go:embed keyheat.example.yaml
var exampleYAML []byte

// Example returns the commented example configuration, every key at its
// default. Commands print it for users to start a file from.
func Example() []byte { return append([]byte(nil), exampleYAML...) }

// AddFlags registers on fs the --config flag and one flag per key cmd
// reads, named as the key (--kafka.brokers, --ingest.format), with the
// key's default and, as help, the comment above the key in the example
// file. Load applies the flags the user set; unset flags never override
// the environment or the file.
func AddFlags(fs *pflag.FlagSet, cmd Command) {
	fs.StringP("config", "c", os.Getenv("KEYHEAT_CONFIG"), "YAML config file (env KEYHEAT_CONFIG)")
	def := Defaults()
	help := keyHelp()
	for _, key := range cmd.Keys() {
		usage := help[key]
		switch v := valueOf(&def, key).(type) {
		case time.Duration:
			fs.Duration(key, v, usage)
		case string:
			fs.String(key, v, usage)
		case []string:
			fs.StringSlice(key, v, usage)
		case bool:
			fs.Bool(key, v, usage)
		case int:
			fs.Int(key, v, usage)
		case int64:
			fs.Int64(key, v, usage)
		case float64:
			fs.Float64(key, v, usage)
		default:
			if isList(reflect.TypeOf(v)) {
				// A list of sections (rules, slot ranges): YAML text,
				// as the file would hold it.
				fs.String(key, flowYAML(v), usage+" (YAML, as in the file: [{…}, …])")
				continue
			}
			// A new field type needs a case here; TestEveryKeyHasAFlag
			// fails until it has one.
			panic(fmt.Sprintf("config: no flag type for %s (%s)", key, reflect.TypeOf(v)))
		}
	}
}

// readByPrefix starts the comment line that says which commands read a
// section or key; it is for the file's reader, not repeated in flag help.
const readByPrefix = "Read by:"

// keyHelp maps every key of the example file to the comment above it,
// folded onto one line. The embedded file never changes, so it is parsed
// once.
var keyHelp = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	walkExample(func(key string, k *yaml.Node) { out[key] = foldComment(k.HeadComment) })
	return out
})

// walkExample calls fn for every node of the example file, sections
// included, with its dotted key.
func walkExample(fn func(key string, k *yaml.Node)) {
	var doc yaml.Node
	if err := yaml.Unmarshal(exampleYAML, &doc); err != nil || len(doc.Content) == 0 {
		panic(fmt.Sprintf("config: embedded example does not parse: %v", err)) // caught by the tests
	}
	var rec func(prefix string, m *yaml.Node)
	rec = func(prefix string, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := joinKey(prefix, k.Value)
			fn(key, k)
			if v.Kind == yaml.MappingNode {
				rec(key, v)
			}
		}
	}
	rec("", doc.Content[0])
}

// foldComment turns "# a\n# b" into "a b", leaving out the Read by line
// and section rulers.
func foldComment(c string) string {
	var words []string
	for line := range strings.SplitSeq(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" && !strings.HasPrefix(line, readByPrefix) && strings.Trim(line, "-") != "" {
			words = append(words, line)
		}
	}
	return strings.Join(words, " ")
}

// isList reports whether t is a list of sections: a key whose value is
// YAML text in flags and the environment.
func isList(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct
}

// flowYAML writes v, a list of sections, as one line of YAML with the
// config file's key names (mapstructure tags) and durations as text.
func flowYAML(v any) string {
	var n yaml.Node
	if err := n.Encode(plainValue(reflect.ValueOf(v))); err != nil {
		return fmt.Sprint(v)
	}
	var setFlow func(*yaml.Node)
	setFlow = func(n *yaml.Node) {
		n.Style |= yaml.FlowStyle
		for _, c := range n.Content {
			setFlow(c)
		}
	}
	setFlow(&n)
	b, err := yaml.Marshal(&n)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

// plainValue turns v into maps, lists and scalars keyed as the config file
// names them.
func plainValue(v reflect.Value) any {
	switch {
	case v.Type() == durationType:
		return v.Interface().(time.Duration).String()
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return plainValue(v.Elem())
	case v.Kind() == reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = plainValue(v.Index(i))
		}
		return out
	case v.Kind() == reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			if fv := v.Field(i); !fv.IsZero() {
				out[name] = plainValue(fv)
			}
		}
		return out
	}
	return v.Interface()
}
