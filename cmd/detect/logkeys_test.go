package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// plantedKey is a key that looks like what logs must not carry by
// default: a user's address.
const plantedKey = "user:planted-7d1e@example.com"

// producePlanted writes 3 s of keyed JSON events of app shop to topic,
// every second one of plantedKey (1000 events/s of it), the rest spread
// over 100 keys.
func producePlanted(t testing.TB, seeds []string, topic string, baseMs int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	var recs []*kgo.Record
	for i := range 6000 {
		key := fmt.Sprintf("key:%d", i%100)
		if i%2 == 0 {
			key = plantedKey
		}
		e := schemas.AccessEvent{TimeMs: baseMs + int64(i)/2, Key: key, App: "shop", Op: "GET", Bytes: 100}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: schemas.AppendJSON(nil, &e)})
	}
	require.NoError(t, cl.ProduceSync(ctx(t), recs...).FirstErr())
}

// TestLogKeys: detect at debug finds a planted hot key and logs each
// hot-key event it publishes; by default its log names the key by its
// key_hash only and the key itself is nowhere in it, while --print (for
// a person, not a log) shows it; with KEYHEAT_LOG_KEYS=raw, or
// --log.keys=raw, the log shows the key beside its key_hash.
func TestLogKeys(t *testing.T) {
	seeds := testenv.KFake(t)
	events := testenv.NewTopic(t, seeds, 2)
	producePlanted(t, seeds, events, time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli())
	hash := schemas.KeyHash(plantedKey)
	for _, tc := range []struct {
		name  string
		env   []string
		flags []string
		raw   bool
	}{
		{"default", nil, nil, false},
		{"hash", nil, []string{"--log.keys=hash"}, false},
		{"raw from env", []string{config.EnvName("log.keys") + "=raw"}, nil, true},
		{"raw flag", nil, []string{"--log.keys=raw"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRunEnv(t, seeds, events)
			env := append([]string{config.EnvName("log.level") + "=debug"}, tc.env...)
			p := start(t, env, append(append([]string{"run", "--exit-at-end", "--print=text", sinkRules}, e.flags()...), tc.flags...)...)
			require.Equal(t, 0, p.WaitExit())
			logs := p.Stderr.String()
			require.Contains(t, logs, "level=DEBUG", "the log is at debug")
			require.Contains(t, p.Stdout.String(), plantedKey, "--print shows the key: it is for a person, not a log")
			published := p.Stderr.Match(regexpOf(`level=DEBUG msg="publishing a hot-key event" type=hot app=shop .*key_hash=` + hash))
			require.NotEmpty(t, published, "the planted key's hot is logged, by its key_hash:\n%s", logs)
			if !tc.raw {
				require.NotContains(t, logs, plantedKey, "a raw key in the log")
				require.NotContains(t, logs, "planted-7d1e")
				require.NotContains(t, logs, "key:1", "a background key in the log")
				return
			}
			require.Contains(t, published[0], " key="+plantedKey+" key_hash="+hash+" ")
			keyed := p.Stderr.Match(regexpOf(`level=INFO msg="events topic keyed by access key`))
			require.Len(t, keyed, 1, logs)
			require.Regexp(t, `record_key=(\S+) record_key_hash=[0-9a-f]{16} access_key=(\S+) access_key_hash=[0-9a-f]{16}$`, keyed[0])
			require.True(t, strings.Contains(keyed[0], "access_key=key:") || strings.Contains(keyed[0], "access_key="+plantedKey), keyed[0])
		})
	}
}
