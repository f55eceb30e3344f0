package detect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func monitorLine(tsMs int64, args string) []byte {
	return fmt.Appendf(nil, "%d.%06d [0 127.0.0.1:6000] %s\n", tsMs/1000, tsMs%1000*1000, args)
}

// TestRawLogRecords: with a log format detect reads application-log
// records directly: a line may give several events, a line with no keyed
// access is skipped, a bad line is dead-lettered; records not keyed by
// access key make unkeyed summaries, which carry their sketches for the
// merger.
func TestRawLogRecords(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		produce(t, e.seeds,
			raw(e.events, 0, monitorLine(base, `"mget" "a" "b"`)),
			raw(e.events, 0, monitorLine(base+1, `"ping"`)),
			raw(e.events, 0, []byte("garbage\n")),
			raw(e.events, 0, monitorLine(base+1500, `"get" "a"`)),
			raw(e.events, 0, monitorLine(base+2100, `"set" "c" "v"`)),
		)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		cfg.Parse.Format, cfg.Parse.App = "redis", "cache"
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		require.NoError(t, svc.Run(ctx))

		dlq := readAll(t, e.seeds, e.dlq)
		require.Len(t, dlq, 1)
		var d schemas.DeadLetter
		require.NoError(t, schemas.DecodeDeadLetter(dlq[0].Value, &d))
		require.Equal(t, schemas.ReasonParse, d.Reason)
		require.Equal(t, "garbage\n", string(d.Raw), "the record as received")

		var events uint64
		keys := map[string]uint64{}
		for _, r := range readAll(t, e.seeds, e.windows) {
			w, err := schemas.DecodePartitionWindow(r.Value)
			require.NoError(t, err)
			require.False(t, w.Keyed, "records without the access key as key are not keyed")
			events += w.Events
			for _, a := range w.Apps {
				require.Equal(t, "cache/db0", a.App)
				require.NotEmpty(t, a.Sketch, "an unkeyed summary carries its Count-Min sketch")
				for _, k := range a.Top {
					keys[k.Key] += k.Count
				}
			}
		}
		require.EqualValues(t, 4, events, "MGET gave two events, PING none")
		require.Equal(t, map[string]uint64{"a": 2, "b": 1, "c": 1}, keys)
	})
}
