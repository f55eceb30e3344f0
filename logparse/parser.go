package logparse

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/keyheat/keyheat/schemas"
)

// Parser turns one log line into AccessEvents.
//
// Parse appends the events line records to dst and returns the extended
// slice: one event for most lines, and one per key for a redis command that
// names several keys (MGET k1 k2), in the order the command names them; the
// events of one line differ only in Key. A line is used whole or not at
// all: on an error Parse appends nothing, so a caller that produces the
// events or dead-letters the line never does both for one line.
//
// dropped has a bit set for each optional field (op, app, bytes, status,
// client, node, latency_us) that the line carried but that did not parse,
// such as "status":"HIT": the field is left at zero and the events are
// still returned. Only the key is essential, and the time when the format
// has one and the line's does not parse. Callers count dropped fields per
// field (Fields.All), so a log whose status column changed shape shows up
// as a metric instead of as a dead-letter flood.
//
// err is ErrSkip for a well-formed line that records no keyed access
// (MONITOR's "OK", a PING), or an *schemas.InvalidEventError whose Reason
// says why the line is unusable (ReasonParse, ReasonEmptyKey,
// ReasonKeyNotUTF8). An event's TimeMs is 0 when the line carries no time;
// the caller substitutes the arrival time. The strings Parse stores in the
// events never alias line, so the caller may reuse line's buffer at once.
//
// A Parser holds no mutable state and is safe for concurrent use.
type Parser interface {
	// Name is the format's registered name, as config spells it.
	Name() string
	Parse(dst []schemas.AccessEvent, line []byte) (events []schemas.AccessEvent, dropped Fields, err error)
}

// ErrSkip is returned by Parse for lines that are well formed but record no
// keyed access, such as the "OK" redis-cli prints when MONITOR starts or a
// PING. Callers count these lines instead of dead-lettering them.
var ErrSkip = errors.New("line records no keyed access")

// Config selects a format and configures it. Only the section of the
// chosen format is read. The mapstructure tags are the option names a
// config file uses.
type Config struct {
	// Format is a registered name (Formats): json, combined (alias nginx,
	// apache), redis or regex.
	Format string `mapstructure:"format"`
	// App is the app of events whose line names none. For redis it
	// prefixes the database number: "cache" gives "cache/db0".
	App      string         `mapstructure:"app"`
	JSON     JSONConfig     `mapstructure:"json"`
	Combined CombinedConfig `mapstructure:"combined"`
	Regex    RegexConfig    `mapstructure:"regex"`
}

// DefaultConfig reads the nginx/Apache combined format keyed by path, with
// every other format's section at its defaults too, so that switching
// Format alone gives a working parser (regex still needs a pattern).
func DefaultConfig() Config {
	return Config{
		Format:   "combined",
		JSON:     DefaultJSONConfig(),
		Combined: CombinedConfig{Key: KeyPathNoQuery},
		Regex:    RegexConfig{TimeFormat: TimeAuto},
	}
}

// factories is the registry of formats. It is never written after
// initialisation, so it is not global state in the sense that matters.
var factories = map[string]func(Config) (Parser, error){
	"json":     func(c Config) (Parser, error) { return NewJSON(c.JSON, c.App) },
	"combined": func(c Config) (Parser, error) { return NewCombined(c.Combined, c.App) },
	"nginx":    func(c Config) (Parser, error) { return NewCombined(c.Combined, c.App) },
	"apache":   func(c Config) (Parser, error) { return NewCombined(c.Combined, c.App) },
	"redis":    func(c Config) (Parser, error) { return NewRedis(c.App), nil },
	"regex":    func(c Config) (Parser, error) { return NewRegex(c.Regex, c.App) },
}

// Formats returns the registered format names, sorted.
func Formats() []string {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New returns the parser cfg.Format names, configured by cfg.
func New(cfg Config) (Parser, error) {
	f, ok := factories[strings.ToLower(cfg.Format)]
	if !ok {
		return nil, fmt.Errorf("unknown log format %q: use one of %s", cfg.Format, strings.Join(Formats(), ", "))
	}
	return f(cfg)
}

func parseErr(format string, args ...any) error {
	return &schemas.InvalidEventError{Reason: schemas.ReasonParse, Detail: fmt.Sprintf(format, args...)}
}

func emptyKey(detail string) error {
	return &schemas.InvalidEventError{Reason: schemas.ReasonEmptyKey, Detail: detail}
}
