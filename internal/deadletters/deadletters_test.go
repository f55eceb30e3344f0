package deadletters

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func logged(f func(*slog.Logger)) string {
	var b bytes.Buffer
	f(slog.New(slog.NewTextHandler(&b, nil)))
	return b.String()
}

func TestSummary(t *testing.T) {
	s := Summary{Read: 1000, ByReason: map[schemas.Reason]int64{schemas.ReasonParse: 664, schemas.ReasonKeyTooLong: 165, schemas.ReasonTimeSkew: 0}}
	require.EqualValues(t, 829, s.Total())
	require.InDelta(t, 0.829, s.Share(), 1e-9)
	require.True(t, s.Most())
	r, n := s.Dominant()
	require.Equal(t, schemas.ReasonParse, r)
	require.EqualValues(t, 664, n)
	line := logged(func(l *slog.Logger) { l.Info("x", s.Attrs()...) })
	require.Contains(t, line, "dlq=829 dlq_share=82.9% dlq_reasons.parse=664 dlq_reasons.key_too_long=165\n",
		"reasons in schemas.Reasons order, zero counts left out")
}

func TestSummaryEdges(t *testing.T) {
	require.False(t, Summary{}.Most(), "nothing read")
	require.Zero(t, Summary{}.Share())
	half := Summary{Read: 10, ByReason: map[schemas.Reason]int64{schemas.ReasonParse: 5}}
	require.False(t, half.Most(), "half is not most")
	half.Read = 9
	require.True(t, half.Most())
	tie := Summary{Read: 4, ByReason: map[schemas.Reason]int64{schemas.ReasonTimeSkew: 2, schemas.ReasonEmptyKey: 2}}
	r, _ := tie.Dominant()
	require.Equal(t, schemas.ReasonEmptyKey, r, "a tie goes to the reason listed first")
	require.Equal(t, []any{"dlq", int64(0)}, Summary{Read: 3}.Attrs(), "no share or reasons without dead letters")
	other := Summary{Read: 2, ByReason: map[schemas.Reason]int64{"mystery": 2}}
	require.EqualValues(t, 2, other.Total())
	require.Contains(t, logged(func(l *slog.Logger) { l.Info("x", other.Attrs()...) }), "dlq_reasons.mystery=2")
}

// TestWarnIfMost: the warning names the dominant reason and the setting
// that fixes it, and comes only when most of the input went to the DLQ.
func TestWarnIfMost(t *testing.T) {
	skew := Summary{Read: 1000, ByReason: map[schemas.Reason]int64{schemas.ReasonTimeSkew: 1000}}
	line := logged(func(l *slog.Logger) {
		skew.WarnIfMost(l, "keyheat.events.dlq", func(r schemas.Reason) string { return Fix(r, "detect") })
	})
	require.Contains(t, line, `level=WARN msg="most of what was read went to the DLQ" dlq_topic=keyheat.events.dlq read=1000 dlq=1000 dlq_share=100.0% reason=time_skew reason_dlq=1000 fix=`)
	require.Contains(t, line, "events.max_skew: 0")
	few := Summary{Read: 1000, ByReason: map[schemas.Reason]int64{schemas.ReasonTimeSkew: 500}}
	require.Empty(t, logged(func(l *slog.Logger) {
		few.WarnIfMost(l, "dlq", func(r schemas.Reason) string { return Fix(r, "detect") })
	}))
}

func TestFix(t *testing.T) {
	for _, tt := range []struct {
		r       schemas.Reason
		section string
		names   []string
	}{
		{schemas.ReasonTimeSkew, "detect", []string{"events.max_skew", "ahead of when its record was produced", "detect.json.time_format"}},
		{schemas.ReasonTimeSkew, "ingest", []string{"events.max_skew", "from now", "ingest.json.time_format"}},
		{schemas.ReasonKeyTooLong, "ingest", []string{"events.max_key_bytes", "ingest.json.key"}},
		{schemas.ReasonParse, "detect", []string{"detect.format", "detect.json.*"}},
		{schemas.ReasonParse, "ingest", []string{"ingest.format", "ingest.json.*"}},
		{schemas.ReasonEmptyKey, "ingest", []string{"ingest.json.key", "ingest.regex.pattern"}},
		{schemas.ReasonKeyNotUTF8, "detect", []string{"events.codec: binary", "events.allow_binary_keys: true"}},
		{schemas.ReasonMissingTime, "detect", []string{"detect.json.time", "events.max_skew: 0"}},
		{schemas.ReasonLineTooLong, "ingest", []string{"ingest.max_line_bytes"}},
	} {
		fix := Fix(tt.r, tt.section)
		for _, n := range tt.names {
			require.Contains(t, fix, n, "%s in %s", tt.r, tt.section)
		}
	}
	for _, r := range schemas.Reasons() {
		require.NotContains(t, Fix(r, "detect"), "dead letters' detail", "%s has a fix of its own", r)
	}
}
