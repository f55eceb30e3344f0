// Package logparse turns access-log lines into schemas.AccessEvents.
//
// Each log format is a small type behind the Parser interface, registered
// by name so a config file picks it: "json" (JSON lines with configurable
// field paths), "combined" (nginx/Apache combined and common log format),
// "redis" (redis-cli MONITOR output) and "regex" (a regular expression with
// named groups). New builds the parser a Config names.
//
// A line yields its events (one per key: a redis MGET names several) and
// the set of optional fields it carried that did not parse, which are left
// at zero instead of costing the line; see Parser. JSON lines are read with
// internal/jsonscan, the scanner schemas decodes keyheat's own records
// with, so both accept the same JSON; redis and nginx escapes are read with
// strconv.Unquote.
//
// logparse owns the syntax of lines. It does not apply the event limits
// (key length, UTF-8, time skew: schemas.Limits does that; a parser
// rejects a key that is not UTF-8 itself only where decoding it would
// otherwise replace bytes and merge keys), it does not
// fill in the arrival time for lines that carry none (the caller knows the
// clock), and it does no I/O.
package logparse
