package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvRedis holds the host:port of a Redis server, e.g. 127.0.0.1:16379, as
// printed by `scripts/services.sh env`.
const EnvRedis = "KEYHEAT_TEST_REDIS"

// RedisAddr returns the host:port of the real Redis server named by
// KEYHEAT_TEST_REDIS. When the variable is unset it skips the test, or
// fails it under CI=true (see [Require]).
func RedisAddr(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(Require(t, EnvRedis))
}

// RedisClient returns a client of the real Redis server named by
// KEYHEAT_TEST_REDIS (skipping or failing the test as [RedisAddr] does when
// it is unset), checked with a PING, and a key prefix unique to this test
// run, [UniqueName] followed by ":". Tests share the server and its
// database 0: a test puts every key it makes under its prefix. When the
// test ends, every key under the prefix is deleted and the client closed.
func RedisClient(t testing.TB) (*redis.Client, string) {
	t.Helper()
	addr := RedisAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 5 * time.Second})
	prefix := UniqueName(t, "keyheat") + ":"
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("ping redis %s: %v (is it running? scripts/services.sh status)", addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		if err := deleteRedisKeys(ctx, rdb, prefix+"*"); err != nil {
			t.Errorf("delete the keys %s* on redis %s: %v", prefix, addr, err)
		}
		if err := rdb.Close(); err != nil {
			t.Errorf("close redis client %s: %v", addr, err)
		}
	})
	return rdb, prefix
}

// deleteRedisKeys deletes every key matching the glob pattern, on every
// master when rdb is a cluster client, with SCAN and UNLINK so that a large
// key set never blocks the server. Keys created while it runs may stay.
func deleteRedisKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 1000 {
				if err := unlinkEach(ctx, c, batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return unlinkEach(ctx, c, batch)
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, del)
	}
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	return del(ctx, c)
}

// unlinkEach unlinks keys one command each: in cluster mode a multi-key
// UNLINK must name keys of one slot.
func unlinkEach(ctx context.Context, c *redis.Client, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}

// PrivateRedisCluster starts a Redis server of the test's own in cluster
// mode, with scripts/services.sh (redis-up with
// KEYHEAT_SERVICES_REDIS_CLUSTER=1) on a port no other test uses: a
// one-node cluster holding all 16384 slots. It runs Redis Cluster's rules
// (CLUSTER KEYSLOT, CROSSSLOT errors for commands and scripts whose keys
// span slots), so a test can check what a cluster client does, and
// returns a cluster client of it, closed when the test ends, when the
// server is removed. Like [RedisAddr] it skips the test when
// KEYHEAT_TEST_REDIS is unset (fails under CI=true): a machine with the
// shared server has the redis-server binary this one runs. A start takes
// about two seconds (a new cluster node waits that long before it serves).
func PrivateRedisCluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	Require(t, EnvRedis)
	// A cluster node also listens on its port + 10000 (the cluster bus).
	off := freeOffset(t, 16379, 26379)
	run := servicesRunner(t, off, "KEYHEAT_SERVICES_REDIS_CLUSTER=1")
	run(t, "redis-up")
	t.Cleanup(func() { run(t, "redis-down") })
	addr := "127.0.0.1:" + strconv.Itoa(16379+off)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, DialTimeout: 5 * time.Second})
	t.Cleanup(func() {
		if err := rdb.Close(); err != nil {
			t.Errorf("close redis cluster client %s: %v", addr, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping redis cluster %s: %v", addr, err)
	}
	return rdb
}
