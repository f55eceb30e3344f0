package logparse

import (
	"fmt"
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

// Parse implements Parser.
func (p *Regex) Parse(line []byte, e *schemas.AccessEvent) error {
	e.Reset()
	s := string(line)
	m := p.re.FindStringSubmatchIndex(s)
	if m == nil {
		return parseErr("regex: line does not match the pattern")
	}
	get := func(f int) string {
		i := p.idx[f]
		if i == 0 || m[2*i] < 0 {
			return ""
		}
		return s[m[2*i]:m[2*i+1]]
	}
	e.Key = get(fKey)
	if e.Key == "" {
		return emptyKey("regex: the key group is empty")
	}
	e.App = p.app
	if a := get(fApp); a != "" {
		e.App = a
	}
	e.Op, e.Client, e.Node = get(fOp), get(fClient), get(fNode)
	if t := get(fTime); t != "" {
		ms, err := parseTime(t, p.timeFormat)
		if err != nil {
			return parseErr("regex: %v", err)
		}
		e.TimeMs = ms
	}
	for _, f := range [...]int{fBytes, fStatus, fLatency} {
		t := get(f)
		if t == "" || t == "-" {
			continue
		}
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return parseErr("regex: %s %q is not a number", fieldNames[f], truncate(t, 32))
		}
		switch f {
		case fBytes:
			e.Bytes = n
		case fLatency:
			e.LatencyUs = n
		case fStatus:
			if n < 0 || n > 1<<31-1 {
				return parseErr("regex: status %d is out of range", n)
			}
			e.Status = int32(n)
		}
	}
	return nil
}
