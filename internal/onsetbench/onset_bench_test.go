package onsetbench_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
)

// BenchmarkOnsetToMitigation measures 100 onsets of benchPlan per
// campaign: from a planted key's first event produced to the follower's
// OnChange reporting it hot, split into the rule window (first event →
// the event that crossed) and delivery (that event → OnChange). It
// reports p50 and p99 of each in ms and logs a table with the max and the
// stages of delivery. A campaign is one run whatever b.N (run it with
// -benchtime 1x) and takes about a minute.
//
// Brokers: the real one named by KEYHEAT_TEST_KAFKA when set, and kfake
// in this process always. On each: detect's defaults (a 1 s rule window
// at 1,000 events/s), and the same rule over 200 ms (its threshold count
// scaled down with it, so the planted keys cross five times sooner). On
// the first broker also two producer lingers: the events' producer with
// none instead of ingest's 5 ms, and detect's producer with franz-go's
// default 10 ms instead of none.
func BenchmarkOnsetToMitigation(b *testing.B) {
	brokers := []broker{kfakeBroker}
	if os.Getenv(testenv.EnvKafka) != "" {
		brokers = []broker{kafkaBroker, kfakeBroker}
	}
	type variant struct {
		name string
		s    setting
		p    plan
	}
	noLinger := benchPlan
	noLinger.linger = 0
	for i, br := range brokers {
		vs := []variant{{"default", defaults, benchPlan}, {"window=200ms", ruleWindow(200 * time.Millisecond), benchPlan}}
		if i == 0 {
			vs = append(vs,
				variant{"default/events-linger=0", defaults, noLinger},
				variant{"linger=10ms", setting{name: "default, detect's producer linger 10ms",
					clientOpts: []kgo.Opt{kgo.ProducerLinger(10 * time.Millisecond)}}, benchPlan})
		}
		for _, v := range vs {
			b.Run("broker="+br.name+"/detect="+v.name, func(b *testing.B) {
				for range b.N {
					seeds := br.seeds(b)
					c := newCampaign(b, v.p)
					c.run(seeds, v.s)
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
					b.Logf("%s; %s\n%s", c.describe(br, seeds, v.s), c.crossings(ss), c.report(ss))
				}
			})
		}
	}
}
