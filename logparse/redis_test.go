package logparse

import (
	"testing"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

// TestRedisClients covers every client form redis writes in a MONITOR
// line (replicationFeedMonitors, getClientPeerId).
func TestRedisClients(t *testing.T) {
	cases := []struct{ line, db, client string }{
		{`1742220131.107412 [0 127.0.0.1:6379] "GET" "k"`, "db0", "127.0.0.1:6379"},
		{`1742220131.107412 [0 [::1]:60004] "GET" "k"`, "db0", "[::1]:60004"},
		{`1742220131.107412 [3 [2001:db8::7]:51000] "GET" "k"`, "db3", "[2001:db8::7]:51000"},
		{`1742220131.107412 [0 unix:/tmp/redis.sock] "GET" "k"`, "db0", "unix:/tmp/redis.sock"},
		{`1742220131.107412 [0 unix:/tmp/my redis]/s.sock] "GET" "k"`, "db0", "unix:/tmp/my redis]/s.sock"},
		{`1742220131.107412 [0 lua] "GET" "k"`, "db0", "lua"},
		{`1742220131.107412 [0 ] "GET" "k"`, "db0", ""}, // a module's client has no address
		{`1742220131.107412 [15 10.0.0.1:1] "GET" "k"`, "db15", "10.0.0.1:1"},
	}
	for _, tc := range cases {
		e, _ := parseOne(t, NewRedis(""), tc.line)
		require.Equal(t, schemas.AccessEvent{TimeMs: 1742220131107, Key: "k", App: tc.db, Op: "GET", Client: tc.client}, e, tc.line)
	}
}

// TestRedisKeys checks that every key a command names becomes an event,
// where redis' key specs put them.
func TestRedisKeys(t *testing.T) {
	cases := []struct {
		args string
		keys []string
	}{
		{`"get" "k1"`, []string{"k1"}},
		{`"SET" "k1" "v" "EX" "60"`, []string{"k1"}},
		{`"MGET" "k1" "k2" "k3"`, []string{"k1", "k2", "k3"}},
		{`"DEL" "k1" "k2"`, []string{"k1", "k2"}},
		{`"UNLINK" "k1" "k2"`, []string{"k1", "k2"}},
		{`"EXISTS" "k1" "k1"`, []string{"k1", "k1"}},
		{`"TOUCH" "k1" "k2"`, []string{"k1", "k2"}},
		{`"MSET" "k1" "v1" "k2" "v2"`, []string{"k1", "k2"}},
		{`"MSETNX" "k1" "v1" "k2" "v2" "k3" "v3"`, []string{"k1", "k2", "k3"}},
		{`"BLPOP" "q1" "q2" "0"`, []string{"q1", "q2"}},
		{`"RENAME" "old" "new"`, []string{"old", "new"}},
		{`"LMOVE" "src" "dst" "LEFT" "RIGHT"`, []string{"src", "dst"}},
		{`"SINTERSTORE" "dst" "s1" "s2"`, []string{"dst", "s1", "s2"}},
		{`"ZUNIONSTORE" "dst" "2" "z1" "z2" "WEIGHTS" "1" "2"`, []string{"dst", "z1", "z2"}},
		{`"ZINTERCARD" "2" "z1" "z2" "LIMIT" "5"`, []string{"z1", "z2"}},
		{`"LCS" "a" "b"`, []string{"a", "b"}},
		{`"BITOP" "AND" "dst" "a" "b"`, []string{"dst", "a", "b"}},
		{`"EVAL" "return 1" "2" "k1" "k2" "arg"`, []string{"k1", "k2"}},
		{`"EVALSHA" "abc" "1" "k1"`, []string{"k1"}},
		{`"FCALL" "fn" "1" "k1" "arg"`, []string{"k1"}},
		{`"XREAD" "COUNT" "2" "STREAMS" "s1" "s2" "0" "0"`, []string{"s1", "s2"}},
		{`"XREADGROUP" "GROUP" "g" "c" "STREAMS" "s1" ">"`, []string{"s1"}},
		{`"GEORADIUS" "geo" "15" "37" "200" "km" "STORE" "out"`, []string{"geo", "out"}},
		{`"MIGRATE" "h" "6379" "" "0" "5000" "KEYS" "k1" "k2"`, []string{"k1", "k2"}},
		{`"MIGRATE" "h" "6379" "k1" "0" "5000"`, []string{"k1"}},
		{`"MGET" "a" "" "b"`, []string{"a", "b"}}, // an empty key is left out
		{`"OBJECT" "encoding" "k1"`, []string{"k1"}},
		{`"MEMORY" "USAGE" "k1"`, []string{"k1"}},
		{`"SORT" "list" "BY" "w_*" "STORE" "dst"`, []string{"list"}},
		{`"MYMODULE.CMD" "k1" "k2"`, []string{"k1"}}, // unknown: the first argument
		{`"GET" "a\"b\\c\x41\n"`, []string{"a\"b\\cA\n"}},
	}
	for _, tc := range cases {
		line := `1742220131.107412 [0 10.0.0.1:5000] ` + tc.args
		evs, dropped, err := NewRedis("").Parse(nil, []byte(line))
		require.NoError(t, err, line)
		require.Zero(t, dropped)
		var keys []string
		for _, e := range evs {
			keys = append(keys, e.Key)
			e.Key = evs[0].Key
			require.Equal(t, evs[0], e, "events of one line differ only in key")
		}
		require.Equal(t, tc.keys, keys, line)
	}
}

func TestRedisVerdicts(t *testing.T) {
	cases := []struct {
		args string
		want schemas.Reason // "" is ErrSkip
	}{
		{`"PING"`, ""},
		{`"select" "2"`, ""},
		{`"PUBLISH" "chan" "msg"`, ""},
		{`"SPUBLISH" "chan" "msg"`, ""}, // a shard channel is not a key
		{`"CLIENT" "LIST"`, ""},
		{`"OBJECT" "HELP"`, ""},
		{`"OBJECT"`, ""},
		{`"EVAL" "return 1" "0"`, ""},
		{`"EVAL" "return 1" "x"`, ""},
		{`"XREAD" "COUNT" "2"`, ""},
		{`"GET"`, schemas.ReasonEmptyKey},
		{`"DEL"`, schemas.ReasonEmptyKey},
		{`"MGET" "" ""`, schemas.ReasonEmptyKey},
		{`"EVALSHA" "abc" "2" "k1"`, schemas.ReasonEmptyKey},
		{`"BLPOP" "0"`, schemas.ReasonEmptyKey},
		{"\"GET\" \"raw\xffbytes\"", schemas.ReasonKeyNotUTF8},
		{`"GET" "bad\q"`, schemas.ReasonParse},
		{`"GET" "unterminated`, schemas.ReasonParse},
		{`"GET" k`, schemas.ReasonParse},
		{`"GET""k"`, schemas.ReasonParse},
	}
	for _, tc := range cases {
		line := `1742220131.107412 [0 10.0.0.1:5000] ` + tc.args
		evs, _, err := NewRedis("").Parse(nil, []byte(line))
		require.Empty(t, evs, line)
		if tc.want == "" {
			require.ErrorIs(t, err, ErrSkip, line)
		} else {
			require.Equal(t, tc.want, schemas.ReasonOf(err), "%s: %v", line, err)
		}
	}
}

// TestRedisCommandTable checks the generated table against what redis'
// documentation says of a few commands, so a regenerated table that lost
// its specs fails here.
func TestRedisCommandTable(t *testing.T) {
	require.Equal(t, firstArgKey, redisCommands["GET"].keys)
	require.Equal(t, []keySpec{{index: 1, lastKey: -1, step: 2}}, redisCommands["MSET"].keys)
	require.Equal(t, []keySpec{{index: 2, keyNum: true, firstKey: 1, step: 1}}, redisCommands["EVAL"].keys)
	require.Empty(t, redisCommands["PING"].keys)
	require.True(t, redisCommands["OBJECT"].container)
	require.Greater(t, len(redisCommands), 200)
}
