// Command shop is a small product service wired to keyheat through package
// hotkeys, to copy from: it reads product records from Redis through the
// hot-key cache, counts views on counters the splitter spreads when they
// turn hot, and reports every access to keyheat's events topic, so that
// keyheat finds its hot keys without an access log.
//
//	GET  /products/{id}        the product's JSON record (Redis key product:{id})
//	PUT  /products/{id}        replace it, then invalidate it in every shop process
//	POST /products/{id}/view   count a view (Redis key views:product:{id})
//	GET  /products/{id}/views  the view count
//	GET  /metrics              Prometheus metrics, the hotkeys package's among them
//	GET  /debug/hotkeys        what the cache holds and the registry says, as JSON
//
// Every flag can also be set from the environment: --redis-cluster is
// SHOP_REDIS_CLUSTER. See README.md for running it against `detect demo`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
)

// config is the shop's settings, from flags and the environment.
type config struct {
	addr         string
	app          string
	kafka        string // comma-separated seed brokers
	redis        string // comma-separated addresses
	redisCluster bool
	registry     string // the hot-key registry topic detect writes
	events       string // the events topic detect reads; empty: report nothing
	invalidation string // the topic caches broadcast invalidations on
	localCache   bool
	localTTL     time.Duration
	seed         int
	logLevel     slog.Level
}

// parseConfig reads args, with SHOP_<FLAG> environment variables (upper
// case, dashes as underscores) for the flags args leave out.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&c.app, "app", "shop", "app name the shop's keys are reported and looked up under")
	fs.StringVar(&c.kafka, "kafka", "127.0.0.1:9092", "Kafka seed brokers, comma separated")
	fs.StringVar(&c.redis, "redis", "127.0.0.1:6379", "Redis address(es), comma separated")
	fs.BoolVar(&c.redisCluster, "redis-cluster", false, "talk to Redis as a cluster (also with one address)")
	fs.StringVar(&c.registry, "registry-topic", hotkeys.DefaultTopic, "hot-key registry topic (detect's kafka.topics.hotkeys)")
	fs.StringVar(&c.events, "events-topic", "keyheat.events", "topic the shop reports its accesses to (detect's kafka.topics.events); empty reports nothing")
	fs.StringVar(&c.invalidation, "invalidation-topic", hotkeys.DefaultInvalidationTopic, "topic the shop processes broadcast cache invalidations on; created when missing")
	fs.BoolVar(&c.localCache, "local-cache", true, "serve hot products from the in-process cache; false reads Redis on every request (to compare)")
	fs.DurationVar(&c.localTTL, "local-ttl", 30*time.Second, "how long a hot product is served from the process without reading Redis; writes invalidate it at once")
	fs.IntVar(&c.seed, "seed", 0, "write this many product records (ids 1..N) to Redis at start, replacing what is there")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: shop [flags]\n\nA product service that uses keyheat's hotkeys package. Each flag can also be set\nfrom the environment, as SHOP_<FLAG>: --redis-cluster is SHOP_REDIS_CLUSTER.\n\n")
		fs.PrintDefaults()
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SHOP_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	if err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q: the shop takes flags only", fs.Args())
	}
	if c.localTTL <= 0 {
		return c, errors.New("--local-ttl must be positive")
	}
	if c.seed < 0 {
		return c, errors.New("--seed must not be negative")
	}
	return c, nil
}

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("shop stopped", "err", err)
		stop()
		os.Exit(1)
	}
	log.Info("shop stopped")
}

// run wires the shop and serves until ctx ends, then shuts down: it stops
// taking requests, lets those in flight finish, and flushes the accesses
// the reporter holds.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: commaList(cfg.redis), IsClusterMode: cfg.redisCluster})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", cfg.redis, err)
	}
	if cfg.seed > 0 {
		if err := seed(ctx, rdb, cfg.seed); err != nil {
			return err
		}
		log.Info("seeded products", "count", cfg.seed)
	}

	kafka := []kgo.Opt{kgo.SeedBrokers(commaList(cfg.kafka)...)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The follower keeps the registry's hot keys in memory: the cache and
	// the splitter ask it about every key.
	follower, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: kafka, Topic: cfg.registry,
		Logger: log.With("component", "follower"), Registerer: reg})
	if err != nil {
		return err
	}
	defer follower.Close()

	var cache *hotkeys.Cache
	if cfg.localCache {
		if err := ensureTopic(ctx, kafka, cfg.invalidation, log); err != nil {
			return err
		}
		cache, err = hotkeys.NewCache(hotkeys.CacheConfig{Registry: follower, LocalTTL: cfg.localTTL, Topic: cfg.invalidation,
			Kafka: kafka, Logger: log.With("component", "cache"), Registerer: reg})
		if err != nil {
			return err
		}
		defer cache.Close()
	}

	splitter, err := hotkeys.NewSplitter(rdb, hotkeys.SplitConfig{Lookup: follower.Get, Logger: log.With("component", "splitter"), Registerer: reg})
	if err != nil {
		return err
	}

	var rep *hotkeys.Reporter
	if cfg.events != "" {
		host, _ := os.Hostname()
		rep, err = hotkeys.NewReporter(hotkeys.ReporterConfig{ClientOpts: kafka, Topic: cfg.events, Client: host,
			Logger: log.With("component", "reporter"), Registerer: reg})
		if err != nil {
			return err
		}
		defer func() { // on the error paths: the stop below closes it first, and Close is idempotent
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rep.Close(ctx)
		}()
	}

	// Registered before WaitReady, so that no change is missed. A key
	// that leaves the hot set (or changes mitigation) leaves the cache,
	// and what its splitter shards hold is folded back into the key.
	hot := map[string]bool{} // keys logged hot; callbacks run one at a time
	follower.OnChange(func(e hotkeys.Entry) {
		if e.App != cfg.app {
			return // the registry lists every application's keys
		}
		// The shop's keys are product ids, nothing private, so the log
		// names them; an application whose keys hold user data logs
		// key_hash only. A hot key's entry is refreshed as its rate
		// moves: those changes are logged at debug level.
		level := slog.LevelInfo
		if e.Status == hotkeys.StatusHot && hot[e.Key] {
			level = slog.LevelDebug
		}
		if e.Status == hotkeys.StatusHot {
			hot[e.Key] = true
		} else {
			delete(hot, e.Key)
		}
		log.Log(context.Background(), level, "hot key changed", "key", e.Key, "key_hash", fmt.Sprintf("%016x", e.KeyHash),
			"status", e.Status, "mitigation", e.Mitigation, "split", e.SplitFactor, "rate", e.Rate)
		if cache != nil {
			cache.Forget(e)
		}
		if e.Status != hotkeys.StatusHot || e.Mitigation != hotkeys.MitigationSplit {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := splitter.Fold(fctx, e.App, e.Key, e.SplitFactor); err != nil {
				log.Warn("fold of a split key failed; the next reconcile retries", "err", err)
			}
		}
	})
	log.Info("reading the hot-key registry before serving", "topic", cfg.registry)
	if err := follower.WaitReady(ctx); err != nil {
		return fmt.Errorf("read the registry %s: %w", cfg.registry, err)
	}
	log.Info("registry read", "hot_keys", follower.Stats().Entries)
	if cache != nil {
		if err := cache.WaitFollowing(ctx); err != nil {
			return fmt.Errorf("follow the invalidations on %s: %w", cfg.invalidation, err)
		}
		log.Info("following invalidations", "topic", cfg.invalidation)
	}

	s := &shop{app: cfg.app, rdb: rdb, cache: cache, split: splitter, rep: rep, follower: follower, log: log}
	srv := &http.Server{Handler: s.routes(reg), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "local_cache", cache != nil, "reporting_to", cfg.events)

	rctx, stopReconcile := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { reconcile(rctx, splitter, log) })
	defer wg.Wait()
	defer stopReconcile()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("stopping: draining requests")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	if rep != nil {
		err = errors.Join(err, closeReporter(rep, log))
	}
	return err
}

// closeReporter flushes what the reporter holds, waiting for Kafka at
// most a few seconds.
func closeReporter(rep *hotkeys.Reporter, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := rep.Close(ctx)
	st := rep.Stats()
	log.Info("reporter closed", "recorded", st.Recorded, "sent", st.Sent, "failed", st.Failed,
		"dropped_full", st.DroppedFull, "dropped_invalid", st.DroppedInvalid)
	return err
}

// reconcile folds, every half minute, what a missed OnChange left in
// splitter shards.
func reconcile(ctx context.Context, s *hotkeys.Splitter, log *slog.Logger) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
				log.Warn("reconcile of split keys", "err", err)
			}
		}
	}
}

// ensureTopic creates topic (one partition) unless it exists: the
// invalidation topic is the shop's own, and the cache needs it to exist.
func ensureTopic(ctx context.Context, kafka []kgo.Opt, topic string, log *slog.Logger) error {
	cl, err := kgo.NewClient(kafka...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		log.Info("created the invalidation topic", "topic", topic)
	case errors.Is(err, kerr.TopicAlreadyExists):
	default:
		return fmt.Errorf("create topic %s (is Kafka at the --kafka address?): %w", topic, err)
	}
	return nil
}

func commaList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
