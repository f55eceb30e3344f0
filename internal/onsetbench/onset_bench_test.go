package onsetbench_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// BenchmarkOnsetToMitigation measures, for each broker and setting, 100
// onsets of benchPlan: from a planted key's first event produced to the
// follower's OnChange reporting it hot, split into the rule window (first
// event → the event that crossed) and delivery (that event → OnChange).
// It reports p50 and p99 of each in ms and logs a table with the max and
// the stages of delivery. One campaign is one run whatever b.N (run it
// with -benchtime 1x); about 70 s each.
//
// Brokers: the real one named by KEYHEAT_TEST_KAFKA when set, and kfake
// in this process always. Settings: detect's defaults (1 s rule window at
// 1,000 events/s), and the same rule over 200 ms (its threshold count
// scaled down with it, so the planted keys cross five times sooner).
func BenchmarkOnsetToMitigation(b *testing.B) {
	brokers := []broker{kfakeBroker}
	if os.Getenv(testenv.EnvKafka) != "" {
		brokers = []broker{kafkaBroker, kfakeBroker}
	}
	for _, br := range brokers {
		for _, s := range []setting{defaults, ruleWindow(200 * time.Millisecond)} {
			b.Run("broker="+br.name+"/detect="+s.name, func(b *testing.B) {
				for range b.N {
					seeds := br.seeds(b)
					c := newCampaign(b, benchPlan)
					c.run(seeds, s)
					ss := c.samples()
					require.Empty(b, c.strays(), "background keys reported hot")
					for _, m := range []struct {
						unit string
						of   func(sample) float64
					}{{"total", parts[0].of}, {"window", parts[1].of}, {"delivery", parts[2].of}} {
						st := quantiles(ss, m.of)
						b.ReportMetric(st.p50, m.unit+"-p50-ms")
						b.ReportMetric(st.p99, m.unit+"-p99-ms")
					}
					b.ReportMetric(float64(len(ss)), "onsets")
					b.Logf("%s\n%s", describe(br, seeds, s, benchPlan), report(ss))
				}
			})
		}
	}
}
