package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix is the prefix of every environment variable keyheat reads:
// kafka.brokers is KEYHEAT_KAFKA_BROKERS.
const EnvPrefix = "KEYHEAT"

// EnvName returns the environment variable that sets key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(key))
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
}

// Load builds a Config from defaults, src.File, the environment and
// src.Flags, then validates it. Errors name the key and the source.
func Load(src Source) (*Config, error) {
	def := Defaults()
	v := viper.NewWithOptions(viper.KeyDelimiter("."))
	keys := Keys()
	for _, k := range keys {
		v.SetDefault(k, lookupDefault(&def, k))
	}

	if src.File != "" {
		v.SetConfigFile(src.File)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read config file %s: %w", src.File, err)
		}
	}

	// Environment: bind every known key explicitly rather than relying on
	// AutomaticEnv, so the variables read are exactly EnvName(key) and an
	// injected Environ works.
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
	for _, name := range sortedKeys(envMap) {
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

	var cfg Config
	err := v.UnmarshalExact(&cfg, func(dc *mapstructure.DecoderConfig) {
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			splitCommaHook,
		)
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
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

// splitCommaHook turns "a,b" (from an env var or flag) into []string{"a","b"}.
func splitCommaHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	if s == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, nil
}

// Keys returns every config key, dotted, in the order the struct declares
// them. Each has a default, an env var (EnvName) and may have a flag.
func Keys() []string {
	var keys []string
	walk(reflect.TypeOf(Config{}), "", func(key string, _ []int) { keys = append(keys, key) })
	return keys
}

var durationType = reflect.TypeOf(time.Duration(0))

// walk calls fn for every leaf field of t with its dotted key and index path.
func walk(t reflect.Type, prefix string, fn func(key string, index []int)) {
	var rec func(t reflect.Type, prefix string, index []int)
	rec = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("mapstructure")
			if tag == "" || tag == "-" {
				continue
			}
			key := tag
			if prefix != "" {
				key = prefix + "." + tag
			}
			idx := append(slices.Clone(index), i)
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				rec(f.Type, key, idx)
				continue
			}
			fn(key, idx)
		}
	}
	rec(t, prefix, nil)
}

// lookupDefault returns the value of key in def.
func lookupDefault(def *Config, key string) any {
	var out any
	walk(reflect.TypeOf(*def), "", func(k string, index []int) {
		if k == key {
			out = reflect.ValueOf(*def).FieldByIndex(index).Interface()
		}
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
