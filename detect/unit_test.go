package detect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   []string // option names in order; nil: valid
	}{
		{"defaults", func(*Options) {}, nil},
		{"latest", func(o *Options) { o.From = FromLatest }, nil},
		{"a time", func(o *Options) { o.From = "2026-01-02T15:04:05.123Z" }, nil},
		{"a date", func(o *Options) { o.From = "2026-01-02" }, []string{"from"}},
		{"keyed", func(o *Options) { o.Keyed = "yes" }, []string{"keyed"}},
		{"groups", func(o *Options) { o.Group, o.MergeGroup = "g", "g" }, []string{"merge_group"}},
		{"no group", func(o *Options) { o.Group = "" }, []string{"group"}},
		{"topics", func(o *Options) { o.Topics = []string{"ok", "no good"} }, []string{"topics"}},
		{"regex", func(o *Options) { o.RegexTopics, o.Topics = true, []string{`^a\.`, `(`} }, []string{"topics"}},
		{"regex without topics", func(o *Options) { o.RegexTopics = true }, []string{"regex_topics"}},
		{"formats", func(o *Options) { o.Parse.Format = "nginx" }, nil},
		{"format", func(o *Options) { o.Parse.Format = "xml" }, []string{"format"}},
		{"regex format", func(o *Options) { o.Parse.Format = "regex" }, []string{"regex"}},
		{"numbers", func(o *Options) {
			o.DLQMaxRaw, o.MaxPollRecords, o.CommitInterval, o.FlushTimeout, o.SessionTimeout = 0, 0, 0, 0, 0
		}, []string{"dlq_max_raw", "max_poll_records", "commit_interval", "flush_timeout", "session_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			err := o.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var oe *OptionError
				require.True(t, errors.As(e, &oe), "%T", e)
				got = append(got, oe.Option)
			}
			require.Equal(t, tc.want, got, "%v", err)
		})
	}
}

func TestMergeMeta(t *testing.T) {
	for _, ms := range []int64{0, 1, 1767225600000} {
		for _, from := range []int64{schemas.NoTimeMs, 0, 1767225590000} {
			got, gotFrom, err := parseMergeMeta(mergeMeta(ms, from))
			require.NoError(t, err)
			require.Equal(t, ms, got)
			require.Equal(t, from, gotFrom)
		}
	}
	// Written before the cluster stage bounded commits: no start.
	got, from, err := parseMergeMeta("khm1 done=1767225600000")
	require.NoError(t, err)
	require.Equal(t, int64(1767225600000), got)
	require.Equal(t, int64(schemas.NoTimeMs), from)
	for _, bad := range []string{"", "khm1 done=", "khm1 done=-1", "khm1 done=01", "khm1 done=1 ", "khm2 done=1", "kh1 r=1 t=- w=- l=1000",
		"khm1 done=99999999999999999999", "khm1 done=1 cluster=", "khm1 done=1 cluster=-5", "khm1 done=1 cluster=07", "khm1 done=1 cluster=2 cluster=3"} {
		_, _, err := parseMergeMeta(bad)
		require.Error(t, err, "%q", bad)
	}
}

func FuzzMergeMeta(f *testing.F) {
	for _, s := range []string{"khm1 done=0", "khm1 done=1767225600000", "khm1 done=-5", "x", "khm1 done=5 cluster=3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, from, err := parseMergeMeta(s)
		if err != nil {
			return
		}
		require.Equal(t, s, mergeMeta(ms, from), "only the canonical form parses")
	})
}

func TestUnregisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 3 { // a merger elected three times registers the same names
		u := newUnregisterer(reg)
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_test_total", Help: "t"})
		require.NoError(t, u.or().Register(c))
		require.Error(t, reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_test_total", Help: "t"})))
		u.unregisterAll()
	}
	require.Nil(t, newUnregisterer(nil).or(), "no registry: register nothing")
	var nilU *unregisterer
	nilU.unregisterAll()
}

func TestTextFormat(t *testing.T) {
	h := &schemas.HotKeyEvent{Type: schemas.HotKeyHot, App: "shop", Key: "product:42", Rule: "hot-api", Rate: 5120.5, Threshold: 1000,
		Topic: "keyheat.events", Partition: 3, OnsetMs: time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC).UnixMilli(),
		Mitigation: &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}}
	h.DetectedMs = h.OnsetMs + 8
	require.Equal(t, `15:04:05.123 HOT    shop "product:42" rate=5120.5/s threshold=1000/s rule=hot-api partition=keyheat.events/3 delay=8ms advice=split split=4`,
		string(AppendHotKeyText(nil, h)))
	// An update is about its slot boundary (its ID's time) and says the
	// episode's peak and onset; a cooled its peak.
	up := *h
	up.Type, up.Rate, up.PeakRate, up.Mitigation = schemas.HotKeyUpdate, 12000, 12000, &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 16}
	atMs := h.OnsetMs + 1077
	up.ID = schemas.HotKeyID(up.Topic, up.Partition, up.Rule, up.Type, up.App, up.Key, atMs)
	up.DetectedMs = atMs + 9
	require.Equal(t, `15:04:06.200 UPDATE shop "product:42" rate=12000.0/s peak=12000.0/s threshold=1000/s rule=hot-api partition=keyheat.events/3 onset=15:04:05.123 advice=split split=16`,
		string(AppendHotKeyText(nil, &up)))
	up.ID = "not/an/update/id"
	require.True(t, strings.HasPrefix(string(AppendHotKeyText(nil, &up)), "15:04:05.123 UPDATE"), "an ID HotKeyID did not build: the onset")
	cooled := schemas.HotKeyEvent{Type: schemas.HotKeyCooled, App: "shop", Key: "product:42", Rule: "hot-api", PeakRate: 12000, Threshold: 1000,
		Topic: "keyheat.events", Partition: 3, OnsetMs: h.OnsetMs + 35_000}
	require.Equal(t, `15:04:40.123 COOLED shop "product:42" rate=0.0/s peak=12000.0/s threshold=1000/s rule=hot-api partition=keyheat.events/3`,
		string(AppendHotKeyText(nil, &cooled)))
	r := &schemas.WindowReport{Scope: schemas.ScopeCluster, StartMs: h.OnsetMs - 123, Events: 20000, Distinct: 9876,
		Skew: schemas.Skew{MaxMean: 1.31, Gini: 0.07, Top1Share: 0.15},
		Top:  []schemas.KeyCount{{App: "shop", Key: "product:42", Count: 3000, Share: 0.15, Partition: 3}, {Key: "b", Count: 1, Partition: -1}},
	}
	require.Equal(t, "15:04:05 REPORT cluster events=20000 distinct=9876 late=0 max/mean=1.31 gini=0.07 top1=15.0%\n"+
		"  1. shop \"product:42\" 3000 15.0% p3\n  2. \"b\" 1 0.0%\n", string(AppendReportText(nil, r, 5)))
	require.Equal(t, 2, strings.Count(string(AppendReportText(nil, r, 1)), "\n"))
}
