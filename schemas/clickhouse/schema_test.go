package clickhouse

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMigrations(t *testing.T) {
	ms, err := Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	require.Equal(t, 1, ms[0].Version)
	created := regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+)\s`)
	var tables []string
	for i, m := range ms {
		require.Equal(t, i+1, m.Version, "versions run 1, 2, … without gaps")
		require.Len(t, m.Checksum, 64)
		for _, s := range m.Statements {
			require.NotContains(t, s, "--", "comment lines are dropped")
			require.False(t, strings.HasSuffix(s, ";"))
			if c := created.FindStringSubmatch(s); c != nil {
				tables = append(tables, c[1])
			}
		}
	}
	var want []string
	for _, tb := range Tables() {
		want = append(want, tb.Name)
		require.NotEmpty(t, tb.TimeColumn)
	}
	require.ElementsMatch(t, want, tables, "Tables lists what the migrations create")
}

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"comments only", "-- a; b;\n  -- c;\n", nil},
		{"one without semicolon", "SELECT 1", []string{"SELECT 1"}},
		{"two", "CREATE TABLE a (x UInt8)\nENGINE = Log;\n\nSELECT 2;\n", []string{"CREATE TABLE a (x UInt8)\nENGINE = Log", "SELECT 2"}},
		{"comment between", "SELECT 1 -- keep\n-- drop; me\nFROM t;", []string{"SELECT 1 -- keep\nFROM t"}},
		{"semicolon mid-line", "SELECT ';' AS x;", []string{"SELECT ';' AS x"}},
		{"trailing blanks", "SELECT 1;   \r\n", []string{"SELECT 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, SplitStatements(tt.in))
		})
	}
}

func TestQueries(t *testing.T) {
	for _, name := range QueryNames() {
		text, err := Query(name)
		require.NoError(t, err, name)
		require.Len(t, SplitStatements(text), 1, "%s is one statement", name)
		require.True(t, strings.HasPrefix(text, "-- "+name+": "), "%s starts with a comment naming it", name)
		params, err := Params(text)
		require.NoError(t, err, name)
		for _, p := range params {
			doc := regexp.MustCompile(`(?m)^--   [a-z_, ]*\b` + p.Name + `\b`)
			require.Regexp(t, doc, text, "%s documents parameter %s", name, p.Name)
		}
		names := make([]string, 0, len(params))
		for _, p := range params {
			names = append(names, p.Name)
		}
		require.Subset(t, names, []string{"from", "to", "app"}, name)
		bound := ClientBound(text)
		require.NotContains(t, bound, "{")
		for _, p := range params {
			require.Contains(t, bound, "@"+p.Name)
		}
	}
	_, err := Query("nope")
	require.ErrorContains(t, err, "known: top")
}

func TestParams(t *testing.T) {
	tests := []struct {
		in      string
		want    []Param
		wantErr string
	}{
		{"SELECT 1", nil, ""},
		{"x = {a:String} AND y < {b:UInt32} OR z = {a:String}", []Param{{"a", "String"}, {"b", "UInt32"}}, ""},
		{"{t:DateTime('UTC')}", []Param{{"t", "DateTime('UTC')"}}, ""},
		{"{a:String} {a:UInt8}", nil, "declared as String and as UInt8"},
	}
	for _, tt := range tests {
		got, err := Params(tt.in)
		if tt.wantErr != "" {
			require.ErrorContains(t, err, tt.wantErr, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestSupportsTTL(t *testing.T) {
	tests := []struct {
		version string
		want    bool
		wantErr bool
	}{
		{"18.16.1", false, false},
		{"19.5.3.8", false, false},
		{"19.6.1", true, false},
		{"19.17.4.11", true, false},
		{"20.1.2.4", true, false},
		{"26.9.2.1", true, false},
		{"", false, true},
		{"x.y", false, true},
		{"19", false, true},
	}
	for _, tt := range tests {
		got, err := SupportsTTL(tt.version)
		if tt.wantErr {
			require.Error(t, err, tt.version)
			continue
		}
		require.NoError(t, err, tt.version)
		require.Equal(t, tt.want, got, tt.version)
	}
}

func TestTTL(t *testing.T) {
	tb := Table{"reports", "start"}
	require.Equal(t, "ALTER TABLE reports MODIFY TTL start + INTERVAL 30 DAY", TTLStatement(tb, 30))
	// engine_full as ClickHouse 26.9 prints it after that ALTER.
	engine := "ReplacingMergeTree(complete) PARTITION BY toYYYYMMDD(start) ORDER BY (scope, app, start, id) TTL start + toIntervalDay(30) SETTINGS index_granularity = 8192"
	require.True(t, TTLApplied(engine, tb, 30))
	require.False(t, TTLApplied(engine, tb, 3))
	require.False(t, TTLApplied(engine, tb, 300))
	require.False(t, TTLApplied("ReplacingMergeTree(complete) ORDER BY id", tb, 30))
	require.True(t, slices.ContainsFunc(Tables(), func(x Table) bool { return x == tb }))
}

func FuzzSplitStatements(f *testing.F) {
	f.Add("SELECT 1;\nSELECT 2")
	f.Add("-- x;\nCREATE TABLE a (x UInt8);")
	f.Fuzz(func(t *testing.T, in string) {
		for _, s := range SplitStatements(in) {
			if s == "" || s != strings.TrimSpace(s) {
				t.Fatalf("statement %q is empty or not trimmed", s)
			}
			for line := range strings.SplitSeq(s, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "--") {
					t.Fatalf("comment line %q kept in %q", line, s)
				}
			}
		}
	})
}

func FuzzSupportsTTL(f *testing.F) {
	f.Add("18.16.1")
	f.Add("26.9.2.1")
	f.Fuzz(func(t *testing.T, v string) {
		ok, err := SupportsTTL(v)
		if err != nil && ok {
			t.Fatalf("%q: true with an error", v)
		}
	})
}
