// Package logparse turns access-log lines into schemas.AccessEvents.
//
// Each log format is a small type behind the Parser interface, registered
// by name so a config file picks it: "json" (JSON lines with configurable
// field paths), "combined" (nginx/Apache combined and common log format),
// "redis" (redis-cli MONITOR output) and "regex" (a regular expression with
// named groups). New builds the parser a Config names.
//
// logparse owns the syntax of lines. It does not apply the event limits
// (key length, UTF-8, time skew: schemas.Limits does that), it does not
// fill in the arrival time for lines that carry none (the caller knows the
// clock), and it does no I/O.
package logparse
