// Package deadletters sums up what a run of ingest or detect sent to its
// DLQ, for their logs: the dead letters by reason, their share of what was
// read, and, when most of the input went there, the setting that most
// likely fixes it. It counts nothing itself; the commands hand it their
// counts.
package deadletters

import (
	"fmt"
	"log/slog"

	"github.com/keyheat/keyheat/schemas"
)

// Summary is what a run read and how much of it went to the DLQ, by
// reason.
type Summary struct {
	// Read counts what was read: records (detect) or lines (ingest).
	// Every dead letter is one of them.
	Read int64
	// ByReason counts the dead letters by reason. A reason outside
	// schemas.Reasons counts in Total and is listed after the known ones.
	ByReason map[schemas.Reason]int64
}

// Total is the number of dead letters.
func (s Summary) Total() int64 {
	var n int64
	for _, c := range s.ByReason {
		n += c
	}
	return n
}

// Share is the dead letters' share of what was read, 0 to 1; 0 when
// nothing was read.
func (s Summary) Share() float64 {
	if s.Read <= 0 {
		return 0
	}
	return float64(s.Total()) / float64(s.Read)
}

// Most reports whether more than half of what was read went to the DLQ.
func (s Summary) Most() bool { return s.Read > 0 && 2*s.Total() > s.Read }

// Dominant returns the reason with the most dead letters and their count
// (ties go to the reason first in schemas.Reasons); "" and 0 without any.
func (s Summary) Dominant() (schemas.Reason, int64) {
	var best schemas.Reason
	var n int64
	for _, r := range s.reasons() {
		if c := s.ByReason[r]; c > n {
			best, n = r, c
		}
	}
	return best, n
}

// reasons are the reasons with dead letters, known ones in the order of
// schemas.Reasons, then any other.
func (s Summary) reasons() []schemas.Reason {
	var out []schemas.Reason
	known := map[schemas.Reason]bool{}
	for _, r := range schemas.Reasons() {
		known[r] = true
		if s.ByReason[r] > 0 {
			out = append(out, r)
		}
	}
	for r, c := range s.ByReason {
		if !known[r] && c > 0 {
			out = append(out, r)
		}
	}
	return out
}

// Attrs are the summary's log attributes: dlq (the dead letters), and
// when there are any, dlq_share (of what was read, as a percentage) and
// the group dlq_reasons with a count per reason (dlq_reasons.time_skew=3).
func (s Summary) Attrs() []any {
	total := s.Total()
	if total == 0 {
		return []any{"dlq", int64(0)}
	}
	var by []any
	for _, r := range s.reasons() {
		by = append(by, slog.Int64(string(r), s.ByReason[r]))
	}
	return []any{"dlq", total, "dlq_share", percent(s.Share()), slog.Group("dlq_reasons", by...)}
}

// WarnIfMost logs at WARN, when more than half of what was read went to
// the DLQ, how much did and why: the dominant reason and what fix says
// fixes it (Fix, or a command's own take on it). dlq is the DLQ topic. It
// logs nothing otherwise.
func (s Summary) WarnIfMost(log *slog.Logger, dlq string, fix func(schemas.Reason) string) {
	if !s.Most() {
		return
	}
	r, n := s.Dominant()
	log.Warn("most of what was read went to the DLQ", "dlq_topic", dlq, "read", s.Read, "dlq", s.Total(),
		"dlq_share", percent(s.Share()), "reason", string(r), "reason_dlq", n, "fix", fix(r))
}

// Fix says which settings fix dead letters of reason r, or where to look.
// section is the config section of the command's parsing settings:
// "ingest" (ingest.format, ingest.json.*) or "detect" (detect.format,
// detect.json.*).
func Fix(r schemas.Reason, section string) string {
	switch r {
	case schemas.ReasonParse:
		if section == "detect" {
			return "the records are not what detect.format says: empty reads AccessEvent records as ingest writes them; " +
				"for raw log records set detect.format to their format, with its field settings (detect.json.*, detect.regex.*, detect.combined.*)"
		}
		return fmt.Sprintf("the lines are not what %[1]s.format says: check %[1]s.format and its field settings (%[1]s.json.*, %[1]s.regex.*, %[1]s.combined.*)", section)
	case schemas.ReasonEmptyKey:
		return fmt.Sprintf("no key found: check %[1]s.json.key (json), %[1]s.combined.key (combined) or the key group of %[1]s.regex.pattern", section)
	case schemas.ReasonKeyTooLong:
		return fmt.Sprintf("raise events.max_key_bytes, or check that the key setting (%[1]s.json.key, %[1]s.combined.key) picks the key", section)
	case schemas.ReasonKeyNotUTF8:
		return "set events.codec: binary and events.allow_binary_keys: true to keep keys that are not UTF-8"
	case schemas.ReasonTimeSkew:
		judged := "time further than events.max_skew from now"
		if section == "detect" {
			// What an --exit-at-end run checks; a live one checks as
			// ingest does, and says so itself.
			judged = "time further than events.max_skew ahead of when its record was produced, or before 2001"
		}
		return fmt.Sprintf("each had a %s: events.max_skew: 0 turns the time check off (old logs), "+
			"or check the time's unit (%[2]s.json.time_format, %[2]s.regex.time_format)", judged, section)
	case schemas.ReasonMissingTime:
		return fmt.Sprintf("events without a time: point %[1]s.json.time at the time field, or set events.max_skew: 0 to accept them", section)
	case schemas.ReasonLineTooLong:
		return "raise ingest.max_line_bytes"
	}
	return "see the dead letters' detail field on the DLQ topic"
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
