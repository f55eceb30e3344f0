package logparse

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/keyheat/keyheat/schemas"
)

// Redis parses the output of redis-cli MONITOR, one line per command as
// the server writes it (replicationFeedMonitors in redis' src/replication.c):
//
//	1339518083.107412 [0 127.0.0.1:60866] "get" "user:42"
//	1339518083.107412 [0 [::1]:60004] "mget" "k1" "k2"
//	1339518083.107412 [1 unix:/tmp/redis.sock] "del" "k1"
//	1339518083.107412 [0 lua] "incr" "rate:1"
//	1339518083.107412 [0 ] "get" "k"
//
// The bracket holds the database number and the client: ip:port, [ipv6]:port,
// unix:<socket path>, lua for scripts and functions, and nothing for a
// module's internal client. Arguments are quoted as redis' sdscatrepr does
// (\\ \" \n \r \t \a \b \xHH), which is a subset of Go's quoting, so
// strconv.Unquote reads them.
//
// A command yields one event per key it names: Op is the command in upper
// case, Client the bracket's client, App the database ("db0", or
// "<app>/db0" when an app is configured), and the keys are where redis'
// own key specs put them (redisCommands, generated from redis' command
// table): MGET, DEL, UNLINK, EXISTS, TOUCH, WATCH, SDIFF, PFCOUNT… name
// every argument, MSET and MSETNX every other one, EVAL, FCALL, ZUNION,
// LMPOP… count them with a numkeys argument, RENAME, LMOVE, SMOVE,
// ZUNIONSTORE… have a destination and sources, XREAD and XREADGROUP name
// them after STREAMS, and OBJECT, MEMORY USAGE, XINFO and XGROUP after a
// subcommand. A command redis' table does not know (a module's, or a newer
// redis's) is keyed by its first argument.
//
// Commands without keys (PING, INFO, SELECT, PUBLISH, CLIENT …), numkeys
// 0, an unreadable numkeys, and the "OK" MONITOR prints first are ErrSkip.
// Empty keys are left out: MIGRATE writes "" where its KEYS form names
// the keys later. A command whose keys are all empty, or whose key specs
// point past its last argument, is rejected with ReasonEmptyKey; a key
// argument holding raw bytes that are not UTF-8 (the server escapes them,
// so such a line was not written by redis) with ReasonKeyNotUTF8.
type Redis struct {
	appPrefix string
	dbApps    [16]string // App of databases 0 to 15, made once
}

var _ Parser = (*Redis)(nil)

// NewRedis returns a MONITOR parser.
func NewRedis(app string) *Redis {
	p := &Redis{}
	if app != "" {
		p.appPrefix = app + "/"
	}
	for i := range p.dbApps {
		p.dbApps[i] = p.appPrefix + "db" + strconv.Itoa(i)
	}
	return p
}

// Name returns "redis".
func (*Redis) Name() string { return "redis" }

// redisCommand is where one command's keys are.
type redisCommand struct {
	keys []keySpec
	// container commands (OBJECT, MEMORY, XINFO, XGROUP) take their
	// subcommand as first argument; redisCommands holds the subcommands
	// with keys as "CONTAINER|SUB".
	container bool
}

// keySpec is one of redis' key specs (the key_specs of its command JSON
// files, evaluated as getKeysUsingKeySpecs in redis' src/db.c does): where
// the search for keys begins, then which arguments from there are keys.
// Indexes count the command itself as 0.
type keySpec struct {
	// Begin search: at argument index, or, when keyword is set, just after
	// the first argument equal to keyword (any case) searching forward from
	// startFrom, or backward from the end when startFrom is negative.
	index     int8
	keyword   string
	startFrom int8

	// Find keys, range form: the last key is lastKey arguments after the
	// first, or, when negative, counted from the end (-1: the last
	// argument), then divided by limit when set (XREAD's STREAMS k1 k2 id1
	// id2 has limit 2: keys are the first half); every step-th argument in
	// between is a key.
	lastKey int8
	step    int8
	limit   int8

	// Find keys, keynum form: the argument keyNumIdx after the first holds
	// the number of keys, which start firstKey after the first.
	keyNum    bool
	keyNumIdx int8
	firstKey  int8
}

// firstArgKey is the spec of most commands, and of commands redis' table
// does not know: the first argument is the only key.
var firstArgKey = []keySpec{{index: 1, step: 1}}

// Parse implements Parser.
func (p *Redis) Parse(dst []schemas.AccessEvent, line []byte) ([]schemas.AccessEvent, Fields, error) {
	s := string(line)
	if s == "OK" || s == "" {
		return dst, 0, ErrSkip
	}
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 {
		return dst, 0, parseErr("redis: no timestamp")
	}
	ms, ok := monitorTime(s[:sp])
	if !ok {
		return dst, 0, parseErr("redis: timestamp %q is not seconds.micros", truncate(s[:sp], 32))
	}
	rest := s[sp+1:]
	// The client may hold ']' ([::1]:6379) and even spaces (a socket path),
	// but the bracket always closes right before the quoted command.
	end := strings.Index(rest, `] "`)
	if len(rest) == 0 || rest[0] != '[' || end < 0 {
		return dst, 0, parseErr("redis: no [db client] before a quoted command")
	}
	db, client, _ := strings.Cut(rest[1:end], " ")
	dbn, ok := digits(db)
	if !ok || db == "" || len(db) > 9 {
		return dst, 0, parseErr("redis: %q is not [db client]", truncate(rest[:end+1], 64))
	}
	var argBuf [8]string
	args, err := monitorArgs(argBuf[:0], rest[end+1:])
	if err != nil {
		return dst, 0, err
	}

	cmd := strings.ToUpper(unquoted(args[0]))
	var app string
	if dbn < len(p.dbApps) {
		app = p.dbApps[dbn]
	} else {
		app = p.appPrefix + "db" + db
	}
	c, known := redisCommands[cmd]
	if !known {
		c.keys = firstArgKey
	}
	if c.container {
		if len(args) < 2 {
			return dst, 0, ErrSkip
		}
		c = redisCommands[cmd+"|"+strings.ToUpper(unquoted(args[1]))]
	}
	if len(c.keys) == 0 {
		return dst, 0, ErrSkip
	}
	var idxBuf [8]int
	idx, err := keyIndexes(idxBuf[:0], c.keys, args)
	switch {
	case err == errNoKeyThere:
		return dst, 0, emptyKey("redis: " + cmd + " declares a key its arguments do not hold")
	case err != nil || len(idx) == 0: // numkeys unreadable or 0: redis accessed no key
		return dst, 0, ErrSkip
	}
	n0 := len(dst)
	for _, i := range idx {
		if !utf8.ValidString(args[i]) {
			return dst[:n0], 0, &schemas.InvalidEventError{Reason: schemas.ReasonKeyNotUTF8,
				Detail: "redis: key argument holds raw bytes that are not UTF-8"}
		}
		if key := unquoted(args[i]); key != "" {
			dst = append(dst, schemas.AccessEvent{TimeMs: ms, Key: key, App: app, Op: cmd, Client: client})
		}
	}
	if len(dst) == n0 {
		return dst, 0, emptyKey("redis: " + cmd + " with an empty key")
	}
	return dst, 0, nil
}

// monitorTime reads MONITOR's seconds.micros as Unix milliseconds.
func monitorTime(ts string) (int64, bool) {
	dot := strings.IndexByte(ts, '.')
	if dot < 0 {
		dot = len(ts)
	}
	sec, err := strconv.ParseInt(ts[:dot], 10, 64)
	if err != nil || sec < 0 || sec > 1<<40 {
		return 0, false
	}
	ms := sec * 1000
	if dot < len(ts) {
		frac := ts[dot+1:]
		if len(frac) > 3 {
			frac = frac[:3]
		}
		f, ok := digits(frac)
		if !ok {
			return 0, false
		}
		for i := len(frac); i < 3; i++ {
			f *= 10
		}
		ms += int64(f)
	}
	return ms, true
}

// monitorArgs appends to args the arguments of ` "cmd" "arg"…`, still
// quoted: only the few that are looked at are unquoted.
func monitorArgs(args []string, rest string) ([]string, error) {
	for len(rest) > 0 {
		if len(rest) < 2 || rest[0] != ' ' || rest[1] != '"' {
			return nil, parseErr("redis: arguments are not quoted")
		}
		// The common argument has no escapes: its end is the next quote.
		// Any backslash before it hands the argument to strconv.
		q := rest[1:]
		if end := strings.IndexByte(q[1:], '"'); end >= 0 && strings.IndexByte(q[1:1+end], '\\') < 0 {
			q = q[:end+2]
		} else {
			var err error
			if q, err = strconv.QuotedPrefix(q); err != nil {
				return nil, parseErr("redis: bad quoted argument")
			}
		}
		args = append(args, q)
		rest = rest[1+len(q):]
	}
	if len(args) == 0 {
		return nil, parseErr("redis: no command")
	}
	return args, nil
}

// unquoted returns the text of a quoted argument that monitorArgs
// accepted. Without escapes it is a substring of the line, no copy.
func unquoted(q string) string {
	if strings.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	s, err := strconv.Unquote(q)
	if err != nil { // cannot happen after strconv.QuotedPrefix
		return q
	}
	return s
}

var (
	errNoKeyThere = errors.New("a key spec points past the last argument")
	errBadKeyNum  = errors.New("numkeys is not a number")
)

// keyIndexes appends the indexes of args that specs say are keys, in spec
// order, following redis' getKeysUsingKeySpecs.
func keyIndexes(dst []int, specs []keySpec, args []string) ([]int, error) {
	argc := len(args)
	for _, sp := range specs {
		first := int(sp.index)
		if sp.keyword != "" {
			first = 0
			if sp.startFrom > 0 {
				for i := int(sp.startFrom); i < argc-1; i++ {
					if strings.EqualFold(unquoted(args[i]), sp.keyword) {
						first = i + 1
						break
					}
				}
			} else {
				for i := argc + int(sp.startFrom); i > 1; i-- {
					if strings.EqualFold(unquoted(args[i]), sp.keyword) {
						first = i + 1
						break
					}
				}
			}
			if first == 0 {
				continue // keyword absent: this spec has no keys here
			}
		}
		var last int
		switch {
		case sp.keyNum:
			ni := first + int(sp.keyNumIdx)
			if ni >= argc {
				return dst, errNoKeyThere
			}
			n, err := strconv.Atoi(unquoted(args[ni]))
			if err != nil || n < 0 {
				return dst, errBadKeyNum
			}
			if n == 0 {
				continue
			}
			first += int(sp.firstKey)
			last = first + n - 1
		case sp.lastKey >= 0:
			last = first + int(sp.lastKey)
		case sp.limit == 0:
			last = argc + int(sp.lastKey)
		default:
			last = first + ((argc-first)/int(sp.limit) + int(sp.lastKey))
		}
		if first >= argc || last >= argc || last < first {
			return dst, errNoKeyThere
		}
		for i := first; i <= last; i += int(sp.step) {
			dst = append(dst, i)
		}
	}
	return dst, nil
}
