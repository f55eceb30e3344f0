package logparse

import (
	"strconv"
	"strings"

	"github.com/keyheat/keyheat/schemas"
)

// Redis parses the output of redis-cli MONITOR:
//
//	1339518083.107412 [0 127.0.0.1:60866] "get" "user:42"
//
// Op is the command in upper case, Key its first key argument, Client the
// connection address (or "lua", "unix:…") and App the database: "db0", or
// "<app>/db0" when an app is configured. Commands that name no key
// (PING, INFO, SELECT, CLIENT, …) and the "OK" MONITOR prints first are
// ErrSkip; EVAL, EVALSHA and FCALL are keyed by their first key, if any.
type Redis struct {
	appPrefix string
}

var _ Parser = (*Redis)(nil)

// NewRedis returns a MONITOR parser.
func NewRedis(app string) *Redis {
	p := &Redis{}
	if app != "" {
		p.appPrefix = app + "/"
	}
	return p
}

// Name returns "redis".
func (*Redis) Name() string { return "redis" }

// unkeyed are commands whose first argument is not a key.
var unkeyed = map[string]bool{
	"PING": true, "ECHO": true, "INFO": true, "SELECT": true, "AUTH": true, "HELLO": true, "QUIT": true,
	"CLIENT": true, "CONFIG": true, "COMMAND": true, "CLUSTER": true, "DBSIZE": true, "FLUSHDB": true,
	"FLUSHALL": true, "KEYS": true, "SCAN": true, "RANDOMKEY": true, "MULTI": true, "EXEC": true,
	"DISCARD": true, "UNWATCH": true, "SCRIPT": true, "FUNCTION": true, "SLOWLOG": true, "TIME": true,
	"LASTSAVE": true, "SAVE": true, "BGSAVE": true, "BGREWRITEAOF": true, "PUBLISH": true, "SPUBLISH": true,
	"SUBSCRIBE": true, "PSUBSCRIBE": true, "UNSUBSCRIBE": true, "PUNSUBSCRIBE": true, "MONITOR": true,
	"MEMORY": true, "LATENCY": true, "ACL": true, "MODULE": true, "SWAPDB": true, "WAIT": true,
	"READONLY": true, "READWRITE": true, "RESET": true, "ROLE": true, "REPLICAOF": true, "SLAVEOF": true,
	"SHUTDOWN": true, "DEBUG": true, "OBJECT": true, "PUBSUB": true, "XREAD": true, "XREADGROUP": true,
}

// Parse implements Parser.
func (p *Redis) Parse(line []byte, e *schemas.AccessEvent) error {
	e.Reset()
	s := string(line)
	if s == "OK" || s == "" {
		return ErrSkip
	}
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 {
		return parseErr("redis: no timestamp")
	}
	ts := s[:sp]
	dot := strings.IndexByte(ts, '.')
	if dot < 0 {
		dot = len(ts)
	}
	sec, err := strconv.ParseInt(ts[:dot], 10, 64)
	if err != nil || sec < 0 || sec > 1<<40 {
		return parseErr("redis: timestamp %q is not seconds.micros", truncate(ts, 32))
	}
	ms := sec * 1000
	if dot < len(ts) {
		frac := ts[dot+1:]
		if len(frac) > 3 {
			frac = frac[:3]
		}
		f, ok := digits(frac)
		if !ok {
			return parseErr("redis: timestamp %q is not seconds.micros", truncate(ts, 32))
		}
		for i := len(frac); i < 3; i++ {
			f *= 10
		}
		ms += int64(f)
	}
	rest := s[sp+1:]
	if len(rest) == 0 || rest[0] != '[' {
		return parseErr("redis: no [db client]")
	}
	rb := strings.IndexByte(rest, ']')
	if rb < 0 {
		return parseErr("redis: unterminated [db client]")
	}
	db, client, ok := strings.Cut(rest[1:rb], " ")
	if _, dok := digits(db); !ok || !dok || db == "" {
		return parseErr("redis: %q is not [db client]", truncate(rest[:rb+1], 64))
	}
	rest = rest[rb+1:]
	var args [4]string // command and up to three arguments are all we look at
	n := 0
	for len(rest) > 0 && n < len(args) {
		if rest[0] != ' ' || len(rest) < 2 || rest[1] != '"' {
			return parseErr("redis: arguments are not quoted")
		}
		a, r, ok := redisArg(rest[1:])
		if !ok {
			return parseErr("redis: bad quoted argument")
		}
		args[n], rest = a, r
		n++
	}
	if n == 0 {
		return parseErr("redis: no command")
	}
	cmd := strings.ToUpper(args[0])
	e.TimeMs, e.Op, e.Client, e.App = ms, cmd, client, p.appPrefix+"db"+db
	if unkeyed[cmd] {
		return ErrSkip
	}
	switch cmd {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
		// EVAL script numkeys key… arg…
		if k, ok := digits(args[2]); n < 3 || !ok || k == 0 {
			return ErrSkip
		}
		if n < 4 || args[3] == "" {
			return emptyKey("redis: " + cmd + " declares keys but names none")
		}
		e.Key = args[3]
		return nil
	}
	if n < 2 || args[1] == "" {
		return emptyKey("redis: " + cmd + " without a key")
	}
	e.Key = args[1]
	return nil
}

// redisArg reads one argument as redis quotes it (sdscatrepr: \\ \" \n \r
// \t \a \b \xHH) from s, which starts with '"'. Arguments without escapes
// are substrings of s and cost no allocation.
func redisArg(s string) (arg, rest string, ok bool) {
	esc := false
	end := -1
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			esc = true
			i++
			continue
		}
		if s[i] == '"' {
			end = i
			break
		}
	}
	if end < 0 {
		return "", "", false
	}
	body, rest := s[1:end], s[end+1:]
	if !esc {
		return body, rest, true
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(body) {
			return "", "", false
		}
		switch body[i] {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'a':
			out = append(out, '\a')
		case 'b':
			out = append(out, '\b')
		case 'x':
			if i+2 >= len(body) {
				return "", "", false
			}
			hi, lo := hexVal(body[i+1]), hexVal(body[i+2])
			if hi < 0 || lo < 0 {
				return "", "", false
			}
			out = append(out, byte(hi<<4|lo))
			i += 2
		default:
			out = append(out, body[i])
		}
	}
	return string(out), rest, true
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
