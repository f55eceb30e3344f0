package hotkeys_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
)

// An application follows the registry, reads product records through the
// hot-key cache, counts views on a split counter, and reports its accesses
// (for an application whose accesses reach no access log keyheat reads).
func Example() {
	ctx := context.Background()
	brokers := kgo.SeedBrokers("127.0.0.1:9092")
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})

	reg, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{brokers}})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	cache, err := hotkeys.NewCache(hotkeys.CacheConfig{
		Registry:  reg,
		SharedTTL: 5 * time.Minute, // Redis's TTL for these records; the local one is a fifth
		Kafka:     []kgo.Opt{brokers},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close()
	split, err := hotkeys.NewSplitter(rdb, hotkeys.SplitConfig{Lookup: reg.Get})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := hotkeys.NewReporter(hotkeys.ReporterConfig{ClientOpts: []kgo.Opt{brokers}, Topic: "keyheat.events", Client: "shop-7"})
	if err != nil {
		log.Fatal(err)
	}
	defer rep.Close(ctx)

	// A key that cools leaves the cache, and its shards fold back (a
	// periodic split.Reconcile retries a fold that failed).
	reg.OnChange(func(e hotkeys.Entry) {
		cache.Forget(e)
		if e.Status != hotkeys.StatusHot || e.Mitigation != hotkeys.MitigationSplit {
			_ = split.Fold(ctx, e.App, e.Key, e.SplitFactor)
		}
	})
	if err := reg.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}

	// On the request path:
	key := "product:42"
	rep.Record("shop", key, "GET", 0)
	val, err := cache.Get(ctx, "shop", key, hotkeys.RedisGet(rdb, key))
	if err != nil {
		log.Print(err)
	}
	_ = val
	_ = split.Incr(ctx, "shop", "views:"+key, 1)
	if reg.IsHot("shop", key) {
		log.Printf("%s is hot", key)
	}
}
