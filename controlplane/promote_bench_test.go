package controlplane_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
)

// BenchmarkPromoteVisible: from sending POST /api/hotkeys/{key}/promote to
// server A until an application's follower (not A's) has the key hot, over
// HTTP and Kafka. Each iteration promotes a new key; run it 100 times:
//
//	go test -run '^$' -bench BenchmarkPromoteVisible -benchtime 100x ./controlplane/
//
// ack_p50/p99 is until A answered 201 (Kafka acknowledged), visible_p50/p99
// until the application's OnChange callback ran for the key (IsHot answers
// true from just before that).
func BenchmarkPromoteVisible(b *testing.B) {
	b.Run("kfake", func(b *testing.B) { benchPromoteVisible(b, newRegistry(b, 3)) })
	b.Run("real_kafka", func(b *testing.B) { benchPromoteVisible(b, openRegistry(b, testenv.KafkaSeeds(b), 3)) })
}

func benchPromoteVisible(b *testing.B, r *registry) {
	a := r.server(r.follower(), controlplane.Config{Token: token})
	app := r.follower()
	hot := make(chan string, 1024)
	app.OnChange(func(e hotkeys.Entry) {
		if e.Status == hotkeys.StatusHot {
			hot <- e.Key
		}
	})
	body := promoteBody(b, controlplane.PromoteRequest{App: "shop", Mitigation: "local_cache", TTL: "10m"})
	var acks, visible []time.Duration
	i := 0
	for b.Loop() {
		i++
		key := "product:" + strconv.Itoa(i)
		start := time.Now()
		rep := a.do("POST", "/api/hotkeys/"+key+"/promote", body)
		acked := time.Since(start)
		if rep.code != http.StatusCreated {
			b.Fatalf("promote: %d %s", rep.code, rep.body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		for k := ""; k != key; {
			select {
			case k = <-hot:
			case <-ctx.Done():
				b.Fatalf("gave up waiting (hang guard) for %s", key)
			}
		}
		cancel()
		visible = append(visible, time.Since(start))
		acks = append(acks, acked)
		if !app.IsHot("shop", key) {
			b.Fatalf("OnChange reported %s hot, IsHot says not", key)
		}
	}
	report(b, "ack", acks)
	report(b, "visible", visible)
}

// report adds the 50th and 99th percentiles of ds, in milliseconds.
func report(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 {
		return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), name+"_p50_ms")
	b.ReportMetric(at(0.99), name+"_p99_ms")
}
