package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisAddrRequire(t *testing.T) {
	for _, tc := range []struct {
		name, value, ci    string
		wantSkip, wantFail bool
	}{
		{name: "set", value: " 127.0.0.1:1 ", ci: "true"},
		{name: "unset_locally_skips", ci: "", wantSkip: true},
		{name: "unset_in_ci_fails", ci: "true", wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRedis, tc.value)
			t.Setenv("CI", tc.ci)
			var got string
			r := run(t, func(tb testing.TB) { got = RedisAddr(tb) })
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped=%q failed=%q; want skip=%v fail=%v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			if msg := r.skipped + r.failed; msg != "" {
				if !strings.Contains(msg, EnvRedis) || !strings.Contains(msg, "scripts/services.sh up") {
					t.Errorf("message %q does not say what to set and how", msg)
				}
				return
			}
			if got != "127.0.0.1:1" {
				t.Fatalf("RedisAddr = %q, want 127.0.0.1:1", got)
			}
		})
	}
}

// TestRedisClientCleansUp: a test's keys are under its prefix, another
// test's prefix differs, and the keys are gone when the test ends.
func TestRedisClientCleansUp(t *testing.T) {
	outer, _ := RedisClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	var prefix string
	t.Run("writer", func(t *testing.T) {
		rdb, p := RedisClient(t)
		prefix = p
		if !strings.HasPrefix(p, "keyheat_testredisclientcleansup_writer_") || !strings.HasSuffix(p, ":") {
			t.Fatalf("prefix %q, want keyheat_<test name>_<random>:", p)
		}
		for i := range 2500 { // more than one SCAN batch
			rdb.Set(ctx, p+strings.Repeat("k", i%7)+string(rune('a'+i%26))+"-"+time.Duration(i).String(), "v", 0)
		}
		if n, err := rdb.Keys(ctx, p+"*").Result(); err != nil || len(n) != 2500 {
			t.Fatalf("%d keys under the prefix (%v), want the 2500 written", len(n), err)
		}
		if _, p2 := RedisClient(t); p2 == p {
			t.Fatalf("two clients got the prefix %q", p)
		}
	})
	keys, err := outer.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("%d keys under %s left after the test, e.g. %q", len(keys), prefix, keys[0])
	}
}

// TestPrivateRedisCluster: the private server is a cluster that hashes
// keys as Redis Cluster does and refuses cross-slot commands.
func TestPrivateRedisCluster(t *testing.T) {
	rdb := PrivateRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	slot, err := rdb.ClusterKeySlot(ctx, "foo").Result()
	if err != nil || slot != 12182 {
		t.Fatalf("CLUSTER KEYSLOT foo = %d, %v; want 12182", slot, err)
	}
	// Through one node's connection, so that go-redis does not split
	// the command by slot itself.
	var crossErr error
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		crossErr = c.MGet(ctx, "foo", "bar").Err()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if crossErr == nil || !strings.Contains(crossErr.Error(), "CROSSSLOT") {
		t.Fatalf("MGET foo bar on one node: %v, want CROSSSLOT", crossErr)
	}
	if err := rdb.Set(ctx, "foo", "1", 0).Err(); err != nil {
		t.Fatalf("SET on the cluster: %v", err)
	}
	if err := rdb.Get(ctx, "nope").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET of a missing key: %v, want redis.Nil", err)
	}
}
