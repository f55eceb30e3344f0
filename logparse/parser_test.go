package logparse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the parsers' output")

// sampleConfigs are the realistic samples in testdata and the config that
// reads each. The golden file next to each sample holds, per line, the
// event or the rejection reason; regenerate with -update and review the
// diff.
var sampleConfigs = []struct {
	name, file string
	cfg        Config
}{
	{"nginx_path_noquery", "nginx.log", Config{Format: "nginx", App: "shop"}},
	{"nginx_query_sku", "nginx.log", Config{Format: "combined", App: "shop", Combined: CombinedConfig{Key: KeyQuery, QueryParam: "sku"}}},
	{"json_nested", "events.jsonl", Config{Format: "json", App: "default", JSON: JSONConfig{
		Key: "req.key", Time: "ts", Op: "req.op", Bytes: "req.bytes", App: "svc", Status: "status",
		Client: "peer", Node: "shard", LatencyUs: "lat_us"}}},
	{"redis_monitor", "redis-monitor.txt", Config{Format: "redis"}},
	{"regex_applog", "app.log", Config{Format: "regex", App: "cache", Regex: RegexConfig{
		Pattern:    `^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \w+ .*?key=(?P<key>\S*) op=(?P<op>\w+) size=(?P<bytes>\d+) node=(?P<node>\S+) took=(?P<latency_us>\d+)us$`,
		TimeFormat: "2006-01-02 15:04:05.000"}}},
}

// goldenLine is one line's outcome: its event, or its events when it has
// several, and the fields dropped; or skip; or the rejection reason.
type goldenLine struct {
	Line    int                   `json:"line"`
	Event   *schemas.AccessEvent  `json:"event,omitempty"`
	Events  []schemas.AccessEvent `json:"events,omitempty"`
	Dropped string                `json:"dropped,omitempty"`
	Skip    bool                  `json:"skip,omitempty"`
	Reason  schemas.Reason        `json:"reason,omitempty"`
}

// outcome parses and validates one line as ingest does: a line whose
// events do not all validate is rejected whole.
func outcome(p Parser, n int, line []byte) goldenLine {
	evs, dropped, err := p.Parse(nil, line)
	for i := 0; err == nil && i < len(evs); i++ {
		err = schemas.Limits{MaxSkew: -1}.Validate(&evs[i], 0)
	}
	switch {
	case errors.Is(err, ErrSkip):
		return goldenLine{Line: n, Skip: true}
	case err != nil:
		return goldenLine{Line: n, Reason: schemas.ReasonOf(err)}
	case len(evs) == 1:
		return goldenLine{Line: n, Event: &evs[0], Dropped: dropped.String()}
	}
	return goldenLine{Line: n, Events: evs, Dropped: dropped.String()}
}

func TestSamples(t *testing.T) {
	for _, tc := range sampleConfigs {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			require.NoError(t, err)
			raw, err := os.ReadFile(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			var out bytes.Buffer
			sc := bufio.NewScanner(bytes.NewReader(raw))
			n := 0
			for sc.Scan() {
				n++
				b, err := json.Marshal(outcome(p, n, sc.Bytes()))
				require.NoError(t, err)
				out.Write(b)
				out.WriteByte('\n')
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update once to create the golden file, then review it")
			require.Equal(t, string(want), out.String())
		})
	}
}

// TestSampleReasons pins the reasons that matter in the samples, so a
// golden file regenerated carelessly cannot hide a changed verdict.
func TestSampleReasons(t *testing.T) {
	cases := []struct {
		format, line string
		want         schemas.Reason
	}{
		{"nginx", `1.2.3.4 - - [17/Mar/2025:14:02:13 +0000] "\x16\x03\x01" 400 157 "-" "-"`, schemas.ReasonParse},
		{"nginx", `1.2.3.4 - - [17/Mar/2025/14:02:14] "GET /x HTTP/1.1" 200 1 "-" "-"`, schemas.ReasonParse},
		{"nginx", `1.2.3.4 - - [17/Mar/2025:14:02:16 +0000] "GET /bad\xff HTTP/1.1" 404 12 "-" "-"`, schemas.ReasonKeyNotUTF8},
		{"nginx", "1.2.3.4 - - [17/Mar/2025:14:02:16 +0000] \"GET /bad\xff HTTP/1.1\" 404 12 \"-\" \"-\"", schemas.ReasonKeyNotUTF8},
		{"json", `{"op":"GET"}`, schemas.ReasonEmptyKey},
		{"json", `{"key":""}`, schemas.ReasonEmptyKey},
		{"json", `{"key":"a"`, schemas.ReasonParse},
		{"json", `{"key":"` + string(bytes.Repeat([]byte("k"), 2000)) + `"}`, schemas.ReasonKeyTooLong},
		{"redis", `1742220131.9 [0 127.0.0.1:1] "get"`, schemas.ReasonEmptyKey},
		{"redis", `1742220131.9 [0 127.0.0.1:1] "EVAL" "return 1" "1" ""`, schemas.ReasonEmptyKey},
		{"redis", `1742220131.9 [0 127.0.0.1:1] "EVALSHA" "abc" "2"`, schemas.ReasonEmptyKey},
		{"redis", `1742220131.9 [0 127.0.0.1:1] "get" "a\xffb"`, schemas.ReasonKeyNotUTF8},
		{"redis", `garbage`, schemas.ReasonParse},
	}
	for _, tc := range cases {
		cfg := Config{Format: tc.format, JSON: DefaultJSONConfig()}
		p, err := New(cfg)
		require.NoError(t, err)
		got := outcome(p, 1, []byte(tc.line))
		require.Equal(t, tc.want, got.Reason, "%s: %q", tc.format, tc.line)
	}
}

// parseOne parses a line that must yield exactly one event.
func parseOne(t *testing.T, p Parser, line string) (schemas.AccessEvent, Fields) {
	t.Helper()
	evs, dropped, err := p.Parse(nil, []byte(line))
	require.NoError(t, err, line)
	require.Len(t, evs, 1, line)
	return evs[0], dropped
}

func TestCombinedFields(t *testing.T) {
	p, err := NewCombined(CombinedConfig{}, "web")
	require.NoError(t, err)
	e, _ := parseOne(t, p, `10.0.0.1 - bob [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif?a=1 HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08"`)
	require.Equal(t, schemas.AccessEvent{TimeMs: 971211336000, Key: "/apache_pb.gif", App: "web", Op: "GET", Bytes: 2326, Status: 200, Client: "10.0.0.1"}, e)

	p, err = NewCombined(CombinedConfig{Key: KeyPath}, "")
	require.NoError(t, err)
	e, _ = parseOne(t, p, `10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET /a?b=1 HTTP/1.0" 200 - "-" "-"`)
	require.Equal(t, "/a?b=1", e.Key)
	require.Zero(t, e.Bytes)
}

func TestCombinedUnescapesTarget(t *testing.T) {
	p, err := NewCombined(CombinedConfig{Key: KeyPath}, "")
	require.NoError(t, err)
	for _, tc := range []struct{ target, want string }{
		{`/caf\xC3\xA9`, "/café"},          // nginx
		{`/q\x22x\x22`, `/q"x"`},           // nginx quote
		{`/a\"b\\c`, `/a"b\c`},             // Apache
		{`/tab\there`, "/tab\there"},       // Apache control character
		{`/odd\qescape`, `/odd\qescape`},   // neither server writes \q: kept as logged
		{"/raw\xff\\x41", "/raw\xff\\x41"}, // raw invalid byte: kept as logged, the key check rejects it
	} {
		e, _ := parseOne(t, p, `10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET `+tc.target+` HTTP/1.0" 200 1 "-" "-"`)
		require.Equal(t, tc.want, e.Key, "target %s", tc.target)
	}
}

func TestRedisFields(t *testing.T) {
	e, _ := parseOne(t, NewRedis("cache"), `1339518083.107412 [3 127.0.0.1:60866] "hget" "h:1" "f"`)
	require.Equal(t, schemas.AccessEvent{TimeMs: 1339518083107, Key: "h:1", App: "cache/db3", Op: "HGET", Client: "127.0.0.1:60866"}, e)
	e, _ = parseOne(t, NewRedis(""), `1339518083.107412 [42 127.0.0.1:60866] "get" "k"`)
	require.Equal(t, "db42", e.App)
	for _, line := range []string{"OK", `1339518083.1 [0 127.0.0.1:1] "ping"`} {
		evs, _, err := NewRedis("").Parse(nil, []byte(line))
		require.ErrorIs(t, err, ErrSkip, line)
		require.Empty(t, evs)
	}
}

func TestTimeFormats(t *testing.T) {
	cases := []struct {
		in, format string
		want       int64
	}{
		{"1742220131", "auto", 1742220131000},
		{"1742220131.25", "auto", 1742220131250},
		{"1742220131250", "auto", 1742220131250},
		{"1742220131250000", "auto", 1742220131250},
		{"1742220131250000000", "auto", 1742220131250},
		{"2025-03-17T14:02:11.25Z", "auto", 1742220131250},
		{"17/Mar/2025:14:02:11 +0000", "auto", 1742220131000},
		{"1742220131250", "unix_ms", 1742220131250},
		{"1742220131", "unix", 1742220131000},
		{"2025-03-17 14:02:11", "2006-01-02 15:04:05", 1742220131000},
	}
	for _, tc := range cases {
		got, err := parseTime(tc.in, tc.format)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, "%s as %s", tc.in, tc.format)
	}
	_, err := parseTime("soon", "auto")
	require.Error(t, err)
	require.Error(t, checkTimeFormat("no layout here"))
}

func TestNewRejectsBadConfig(t *testing.T) {
	bad := []Config{
		{Format: "syslog"},
		{Format: "json"},
		{Format: "json", JSON: JSONConfig{Key: "a..b"}},
		{Format: "json", JSON: JSONConfig{Key: "a", Op: "a.b"}},
		{Format: "json", JSON: JSONConfig{Key: "a.b", Op: "a"}},
		{Format: "json", JSON: JSONConfig{Key: "k", TimeFormat: "nonsense"}},
		{Format: "combined", Combined: CombinedConfig{Key: "host"}},
		{Format: "combined", Combined: CombinedConfig{Key: KeyQuery}},
		{Format: "regex"},
		{Format: "regex", Regex: RegexConfig{Pattern: `(?P<op>\w+)`}},
		{Format: "regex", Regex: RegexConfig{Pattern: `(?P<key>\w+) (?P<user>\w+)`}},
		{Format: "regex", Regex: RegexConfig{Pattern: `(?P<key>\w+`}},
	}
	for _, cfg := range bad {
		_, err := New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
}
