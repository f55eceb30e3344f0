package config

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// Command is a keyheat command: it selects the config keys that command
// reads, and so its flags, its --help and what Load validates. A key is
// read by every command unless a cmd tag on it, or on a section around it,
// names the commands that read it:
//
//	ClickHouse ClickHouse `mapstructure:"clickhouse" cmd:"detect"`
//
// A new command adds its constant to Commands, tags the sections only it
// reads, and calls AddFlags and Load with its name. Keys of other commands
// in a shared file or environment are accepted (and decoded) but neither
// validated nor offered as flags. The zero Command reads every key, as a
// tool that checks a whole file would.
type Command string

// The commands.
const (
	CmdIngest Command = "ingest"
	// CmdDetect is the detection command (cmd/detect).
	CmdDetect Command = "detect"
)

// Commands returns every command, in the order the example file groups
// their sections.
func Commands() []Command { return []Command{CmdIngest, CmdDetect} }

// keyInfo is one config key: its dotted name, where it sits in Config, and
// the commands that read it (nil: every command).
type keyInfo struct {
	key   string
	index []int
	cmds  []Command
}

var durationType = reflect.TypeFor[time.Duration]()

// keyInfos lists every key of Config in declaration order. Config's type
// never changes at run time, so the walk is done once.
var keyInfos = sync.OnceValue(func() []keyInfo {
	var out []keyInfo
	var rec func(t reflect.Type, prefix string, index []int, cmds []Command)
	rec = func(t reflect.Type, prefix string, index []int, cmds []Command) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			squash := slices.Contains(strings.Split(opts, ","), "squash")
			if name == "-" || name == "" && !squash || !f.IsExported() {
				continue
			}
			key := prefix
			if !squash {
				key = joinKey(prefix, name)
			}
			fcmds := cmds
			if tag, ok := f.Tag.Lookup("cmd"); ok {
				fcmds = nil
				for c := range strings.SplitSeq(tag, ",") {
					if cmds == nil || slices.Contains(cmds, Command(c)) {
						fcmds = append(fcmds, Command(c))
					}
				}
			}
			idx := append(slices.Clone(index), i)
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				rec(f.Type, key, idx, fcmds)
				continue
			}
			out = append(out, keyInfo{key: key, index: idx, cmds: fcmds})
		}
	}
	rec(reflect.TypeFor[Config](), "", nil, nil)
	return out
})

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// AllKeys returns every config key, dotted, in the order Config declares
// them: what a file or the environment may set. Each has a default and an
// environment variable (EnvName).
func AllKeys() []string {
	infos := keyInfos()
	keys := make([]string, len(infos))
	for i, k := range infos {
		keys[i] = k.key
	}
	return keys
}

// Keys returns the keys c reads, in declaration order: its flags.
func (c Command) Keys() []string {
	var keys []string
	for _, k := range keyInfos() {
		if c.readsInfo(k) {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// Reads reports whether c reads key, or, for a section such as "ingest"
// or "kafka.tls", any key in it.
func (c Command) Reads(key string) bool {
	for _, k := range keyInfos() {
		if (k.key == key || strings.HasPrefix(k.key, key+".")) && c.readsInfo(k) {
			return true
		}
	}
	return false
}

func (c Command) readsInfo(k keyInfo) bool {
	return c == "" || k.cmds == nil || slices.Contains(k.cmds, c)
}

// readers returns the commands that read key (every command for an
// untagged key).
func readers(key string) []Command {
	for _, k := range keyInfos() {
		if k.key == key {
			if k.cmds == nil {
				return Commands()
			}
			return k.cmds
		}
	}
	return nil
}

// isSection reports whether key names a section (a prefix of keys) rather
// than a key.
func isSection(key string) bool {
	for _, k := range keyInfos() {
		if strings.HasPrefix(k.key, key+".") {
			return true
		}
	}
	return false
}

// valueOf returns the value of key in c, nil when there is no such key.
func valueOf(c *Config, key string) any {
	for _, k := range keyInfos() {
		if k.key == key {
			return reflect.ValueOf(c).Elem().FieldByIndex(k.index).Interface()
		}
	}
	return nil
}
