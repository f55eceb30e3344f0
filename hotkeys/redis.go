package hotkeys

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// ErrNotFound is returned by the loader RedisGet makes when its key does
// not exist in Redis.
var ErrNotFound = errors.New("hotkeys: key not found")

// RedisGet returns a loader that GETs key from rdb: its bytes, or an error
// that errors.Is ErrNotFound when the key does not exist (an empty value is
// a value, not a miss), or the client's error. It fits the cache's Get:
//
//	v, err := cache.Get(ctx, app, key, hotkeys.RedisGet(rdb, key))
func RedisGet(rdb redis.UniversalClient, key string) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		v, err := rdb.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}
