package logparse

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/keyheat/keyheat/schemas"
)

// RegexConfig configures the regex parser.
type RegexConfig struct {
	// Pattern is an RE2 expression with named groups. key is required;
	// time, op, app, bytes, status, client, node and latency_us are
	// optional. A line that does not match is rejected.
	Pattern string `mapstructure:"pattern"`
	// TimeFormat reads the time group: auto (default), unix, unix_ms,
	// unix_us, unix_ns, rfc3339 or a Go time layout.
	TimeFormat string `mapstructure:"time_format"`
}

// Regex parses lines with a regular expression whose named groups are the
// event's fields, for formats no other parser knows.
type Regex struct {
	re         *regexp.Regexp
	idx        [len(fieldNames)]int // submatch index per field, 0 when absent
	timeFormat string
	app        string
}

var _ Parser = (*Regex)(nil)

// NewRegex compiles cfg.Pattern; app is the app of lines without one.
func NewRegex(cfg RegexConfig, app string) (*Regex, error) {
	if cfg.Pattern == "" {
		return nil, fmt.Errorf("regex: pattern must be set, with a (?P<key>…) group")
	}
	re, err := regexp.Compile(cfg.Pattern)
	if err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	if err := checkTimeFormat(cfg.TimeFormat); err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	p := &Regex{re: re, timeFormat: cfg.TimeFormat, app: app}
	for i, name := range re.SubexpNames() {
		if name == "" {
			continue
		}
		f := fNone
		for j, n := range fieldNames {
			if n == name && j != fNone {
				f = j
			}
		}
		if f == fNone {
			return nil, fmt.Errorf("regex: group %q is not one of key, time, op, app, bytes, status, client, node, latency_us", name)
		}
		p.idx[f] = i
	}
	if p.idx[fKey] == 0 {
		return nil, fmt.Errorf("regex: pattern has no (?P<key>…) group")
	}
	return p, nil
}

// Name returns "regex".
func (*Regex) Name() string { return "regex" }

// Parse implements Parser. The key group is essential, and so is the time
// group when it matched text that does not parse. The numeric groups
// (bytes, status, latency_us) are optional: "-" or an empty match means
// absent, and a match that is not a decimal integer in range is dropped and
// reported, see Parser.
func (p *Regex) Parse(dst []schemas.AccessEvent, line []byte) ([]schemas.AccessEvent, Fields, error) {
	// One conversion per line: every string below is a substring of s.
	s := string(line)
	m := p.re.FindStringSubmatchIndex(s)
	if m == nil {
		return dst, 0, parseErr("regex: line does not match the pattern")
	}
	get := func(f int) string {
		i := p.idx[f]
		if i == 0 || m[2*i] < 0 {
			return ""
		}
		return s[m[2*i]:m[2*i+1]]
	}
	e := schemas.AccessEvent{Key: get(fKey), App: p.app, Op: get(fOp), Client: get(fClient), Node: get(fNode)}
	if e.Key == "" {
		return dst, 0, emptyKey("regex: the key group is empty")
	}
	if a := get(fApp); a != "" {
		e.App = a
	}
	if t := get(fTime); t != "" {
		ms, err := parseTime(t, p.timeFormat)
		if err != nil {
			return dst, 0, parseErr("regex: %v", err)
		}
		e.TimeMs = ms
	}
	var dropped Fields
	for _, f := range [...]int{fBytes, fStatus, fLatency} {
		t := get(f)
		if t == "" || t == "-" {
			continue
		}
		n, err := strconv.ParseInt(t, 10, 64)
		switch {
		case err != nil, f == fStatus && (n < 0 || n > math.MaxInt32):
			dropped |= 1 << f
		case f == fBytes:
			e.Bytes = n
		case f == fLatency:
			e.LatencyUs = n
		case f == fStatus:
			e.Status = int32(n)
		}
	}
	return append(dst, e), dropped, nil
}
