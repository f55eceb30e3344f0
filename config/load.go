package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v4"
)

// EnvPrefix is the prefix of every environment variable keyheat reads:
// kafka.brokers is KEYHEAT_KAFKA_BROKERS.
const EnvPrefix = "KEYHEAT"

// EnvName returns the environment variable that sets key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Source says where Load reads from. The zero value reads only defaults and
// the environment.
type Source struct {
	// File is a YAML config file; empty means none. A file that is named
	// but missing is an error.
	File string
	// Flags are parsed command-line flags whose names are config keys
	// (kafka.brokers, log.level, …). Only flags the user set override
	// other sources; flags with other names are ignored.
	Flags *pflag.FlagSet
	// Environ is the environment as KEY=VALUE pairs; nil means os.Environ.
	// Tests set it so they do not depend on, or change, the process's.
	Environ []string
	// Args are values a command takes from its arguments for a key (ingest
	// topic's raw topics for ingest.topic.topics), above every other
	// source, so they are validated like the rest.
	Args map[string]any
}

// Load builds a Config from defaults, src.File, the environment, src.Flags
// and src.Args, in increasing precedence, then validates the keys cmd
// reads (see Command). Keys of other commands may be set (one file serves
// every command) and are decoded, not validated; a key of no command is an
// error. Every problem found is returned, joined, each naming its key (or
// variable); a YAML syntax error or an unknown key in the file also names
// its line. Last it reads the secret files of the keys cmd reads
// (kafka.sasl.password_file, clickhouse.password_file) into the passwords
// they stand for, and builds clickhouse.Options.TLS from clickhouse.tls
// when it is enabled (reading its CA and certificate files); no error
// quotes a secret.
func Load(cmd Command, src Source) (*Config, error) {
	def := Defaults()
	v := viper.NewWithOptions(viper.KeyDelimiter("."))
	keys := AllKeys()
	for _, k := range keys {
		v.SetDefault(k, valueOf(&def, k))
	}

	if src.File != "" {
		m, err := readFile(src.File)
		if err != nil {
			return nil, err
		}
		if err := v.MergeConfigMap(m); err != nil {
			return nil, fmt.Errorf("config file %s: %w", src.File, err)
		}
	}

	// Environment: every known key explicitly rather than AutomaticEnv,
	// so the variables read are exactly EnvName(key) and an injected
	// Environ works.
	env := src.Environ
	if env == nil {
		env = os.Environ()
	}
	envMap := make(map[string]string, len(env))
	for _, kv := range env {
		if name, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, EnvPrefix+"_") {
			envMap[name] = val
		}
	}
	for _, k := range keys {
		if val, ok := envMap[EnvName(k)]; ok {
			v.Set(k, val)
			delete(envMap, EnvName(k))
		}
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(envMap)) {
		if !nonConfigEnv(name) {
			errs = append(errs, fmt.Errorf("environment variable %s: no such config key (see keyheat.example.yaml)", name))
		}
	}

	if src.Flags != nil {
		src.Flags.Visit(func(f *pflag.Flag) {
			if slices.Contains(keys, f.Name) {
				v.Set(f.Name, flagValue(f))
			}
		})
	}
	for k, val := range src.Args {
		if !slices.Contains(keys, k) {
			return nil, fmt.Errorf("config: argument for %s, which is not a config key", k)
		}
		v.Set(k, val)
	}

	var cfg Config
	if err := decode(v.AllSettings(), &cfg); err != nil {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, j.Unwrap()...) // one flat list of problems
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := cfg.Validate(cmd); err != nil {
		return nil, err
	}
	if err := cfg.readSecretFiles(cmd); err != nil {
		return nil, err
	}
	if cfg.ClickHouse.TLS.Enabled && cmd.Reads("clickhouse.tls") {
		tc, err := cfg.ClickHouse.TLS.config("clickhouse.tls")
		if err != nil {
			return nil, err
		}
		cfg.ClickHouse.Options.TLS = tc
	}
	return &cfg, nil
}

// readFile parses a YAML config file and checks that every key in it is a
// config key of some command, naming the line of each that is not.
func readFile(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, yamlProblem(err, b))
	}
	if len(doc.Content) == 0 {
		return nil, nil // empty file: nothing set
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s, line %d: want sections (log:, kafka:, …), not a %s", path, root.Line, root.ShortTag())
	}
	var bad []error
	def := Defaults()
	var check func(prefix string, m *yaml.Node)
	check = func(prefix string, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, val := m.Content[i], m.Content[i+1]
			key := joinKey(prefix, k.Value)
			switch {
			case isSection(key) && val.Kind == yaml.MappingNode:
				check(key, val)
			case isSection(key):
				bad = append(bad, fmt.Errorf("config file %s, line %d: %s is a section; its keys go indented below it", path, k.Line, key))
			case readers(key) == nil:
				bad = append(bad, fmt.Errorf("config file %s, line %d: %s is not a config key (see keyheat.example.yaml)", path, k.Line, key))
			default:
				keepText(val, valueOf(&def, key))
			}
		}
	}
	check("", root)
	if len(bad) > 0 {
		return nil, errors.Join(bad...)
	}
	var m map[string]any
	if err := root.Decode(&m); err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, yamlProblem(err, b))
	}
	return m, nil
}

// keepText makes a plain scalar given for a text key (a password, a
// token, a name) the text it is written as: YAML would read 012345 as
// the number 5349, 1e3 as 1000 and True as true, and the key would get
// a different secret or name than the file shows.
func keepText(val *yaml.Node, def any) {
	if _, text := def.(string); !text || val.Kind != yaml.ScalarNode || val.Style != 0 {
		return
	}
	switch val.ShortTag() {
	case "!!int", "!!float", "!!bool":
		val.Tag = "!!str"
	}
}

// yamlProblem says where and what a YAML error in src is: the line and
// column of the problem itself, and the construct it was found in.
func yamlProblem(err error, src []byte) string {
	var le *yaml.LoadError
	if !errors.As(err, &le) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	what := le.Message
	if i := le.Mark.Index; i >= 0 && i < len(src) && src[i] == '\t' {
		// The scanner's words for it ("cannot start any token") do not
		// say what to do.
		return fmt.Sprintf("line %d, column %d: a tab; YAML indents with spaces only", le.Mark.Line, le.Mark.Column)
	}
	msg := fmt.Sprintf("line %d, column %d: %s", le.Mark.Line, le.Mark.Column, what)
	if le.ContextMsg != "" && le.ContextMark.Line > 0 {
		msg += fmt.Sprintf(" (%s at line %d)", le.ContextMsg, le.ContextMark.Line)
	}
	return msg
}

// nonConfigEnv are KEYHEAT_ variables that are not config keys, and so are
// not reported as unknown: the config file's path, and the variables of the
// services script and the tests (KEYHEAT_SERVICES_*, KEYHEAT_TEST_*).
func nonConfigEnv(name string) bool {
	return name == "KEYHEAT_CONFIG" || name == "KEYHEAT_CACHE" ||
		strings.HasPrefix(name, "KEYHEAT_SERVICES_") || strings.HasPrefix(name, "KEYHEAT_TEST_")
}

// flagValue returns a flag's value in a form the decoder understands:
// slice flags as []string, everything else as its string form.
func flagValue(f *pflag.Flag) any {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return sv.GetSlice()
	}
	return f.Value.String()
}

// decode maps the merged settings onto cfg. Strings (from the environment
// and flags) are parsed here, with errors that say what a key wants
// instead of what strconv saw; an unknown key is an error.
func decode(settings map[string]any, cfg *Config) error {
	d, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:      cfg,
		ErrorUnused: true,
		DecodeHook:  mapstructure.ComposeDecodeHookFunc(listTextHook, stringListHook, scalarHook),
	})
	if err != nil {
		return err
	}
	err = d.Decode(settings)
	if err == nil {
		return nil
	}
	// Rebuild mapstructure's errors as one FieldError per key.
	var p problems
	var walk func(error)
	walk = func(err error) {
		var inner *mapstructure.DecodeError
		switch de, ok := err.(*mapstructure.DecodeError); {
		case isJoined(err):
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				walk(e)
			}
		case ok && de.Name() != "" && !isJoined(de.Unwrap()) && !errors.As(de.Unwrap(), &inner):
			p.add(de.Name(), "%v", de.Unwrap())
		case errors.Unwrap(err) != nil:
			walk(errors.Unwrap(err))
		default:
			p = append(p, fmt.Errorf("config: %w", err))
		}
	}
	walk(err)
	return p.err()
}

func isJoined(err error) bool {
	_, ok := err.(interface{ Unwrap() []error })
	return ok
}

var stringSliceType = reflect.TypeFor[[]string]()

// listTextHook reads a list of sections (see isList) given as YAML text,
// from a flag or the environment, and makes an empty list nil, as the
// defaults have it.
func listTextHook(from, to reflect.Type, data any) (any, error) {
	if !isList(to) {
		return data, nil
	}
	if s, ok := data.(string); ok && from.Kind() == reflect.String {
		var v any
		if err := yaml.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("%q is not YAML like [{key: value, …}, …]: %s", s, yamlProblem(err, []byte(s)))
		}
		if _, ok := v.([]any); !ok && v != nil {
			return nil, fmt.Errorf("%q is not a list; want YAML like [{key: value, …}, …]", s)
		}
		data = v
	}
	if l, ok := data.([]any); ok && len(l) == 0 {
		return reflect.Zero(to).Interface(), nil
	}
	return data, nil
}

// stringListHook makes a []string from a comma-separated string (an env
// var or flag) or a list, trimming each entry and dropping empty ones: a
// stray comma adds nothing, so "a:1," is one broker and "," is none.
func stringListHook(from, to reflect.Type, data any) (any, error) {
	if to != stringSliceType {
		return data, nil
	}
	var parts []string
	switch d := data.(type) {
	case string:
		parts = strings.Split(d, ",")
	case []string:
		parts = d
	case []any:
		for _, e := range d {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%v is not a string; quote it", e)
			}
			parts = append(parts, s)
		}
	case nil:
		return data, nil
	default:
		return nil, fmt.Errorf("want a list, e.g. [\"a\", \"b\"], or a comma-separated string, not %v", data)
	}
	var out []string
	for _, s := range parts {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// scalarHook parses a string into the number, boolean or duration a key
// wants, saying what a good value looks like when it cannot. It refuses a
// bare number for a duration (YAML's 5 would otherwise be 5ns) and a list
// or section where one value belongs.
func scalarHook(from, to reflect.Type, data any) (any, error) {
	switch from.Kind() {
	case reflect.Slice, reflect.Map:
		if to.Kind() != reflect.Slice && to.Kind() != reflect.Struct && to.Kind() != reflect.Map {
			return nil, fmt.Errorf("want one value, not a list or section")
		}
		return data, nil
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64, reflect.Bool:
		switch {
		case from == durationType || from == to:
			return data, nil
		case to == durationType && reflect.ValueOf(data).IsZero():
			return time.Duration(0), nil
		case to == durationType:
			return nil, fmt.Errorf("%v is not a duration like 500ms, 5s or 1h30m: give the unit", data)
		case to.Kind() == reflect.String:
			// YAML reads password: 12345 as a number; the key wants its text.
			return fmt.Sprint(data), nil
		case to.Kind() == reflect.Bool:
			return nil, fmt.Errorf("%v is not true or false", data)
		case (to.Kind() == reflect.Int || to.Kind() == reflect.Int64) && from.Kind() == reflect.Bool:
			return nil, fmt.Errorf("%v is not a whole number", data)
		case (to.Kind() == reflect.Int || to.Kind() == reflect.Int64) && from.Kind() == reflect.Float64:
			if f := data.(float64); f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return nil, fmt.Errorf("%v is not a whole number", data)
			}
		}
		return data, nil
	}
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	s = strings.TrimSpace(s)
	switch {
	case to == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration like 500ms, 5s or 1h30m", s)
		}
		return d, nil
	case to.Kind() == reflect.Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < math.MinInt || n > math.MaxInt {
			return nil, fmt.Errorf("%q is not a whole number", s)
		}
		return int(n), nil
	case to.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", s)
		}
		return n, nil
	case to.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", s)
		}
		return b, nil
	case to.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	}
	return data, nil
}
