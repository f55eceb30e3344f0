package schemas

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CommitMetaVersion is the version of the commit-metadata format written
// today; ParseCommitMeta reads this version only.
const CommitMetaVersion = 1

// NoTimeMs marks a time CommitMeta does not know: no event seen before the
// committed offset, or no window acknowledged yet.
const NoTimeMs = math.MinInt64

// CommitMeta is the metadata a detect partition commits with its offset on
// keyheat.events, and reads back when it is assigned the partition again.
// The committed offset itself is where reading resumes; the metadata says
// what the events from there are for, so that a restart rebuilds exactly
// what the crashed run had not yet handed over.
//
// Text form (String / ParseCommitMeta), every field always present, times
// as decimal Unix ms or "-" for NoTimeMs:
//
//	kh1 r=1043 t=1767225600123 w=1767225599000 l=1000
//
// The form is canonical: ParseCommitMeta accepts exactly what String
// writes, so a stored value round-trips byte for byte. It is far below
// Kafka's default limit on commit metadata (offset.metadata.max.bytes,
// 4096).
type CommitMeta struct {
	// ResumeOffset (r) is the first offset whose events count in windows
	// and may publish hot keys. Events from the committed offset up to it
	// only warm up the detector. It is at least the committed offset.
	ResumeOffset int64
	// MaxTsMs (t) is the partition's newest event time before the
	// committed offset, the clock its watermark starts from; NoTimeMs if
	// it had seen none.
	MaxTsMs int64
	// NextWindowMs (w) is the start of the first report window not yet
	// acknowledged downstream: windows before it are never emitted again.
	// NoTimeMs if none was acknowledged.
	NextWindowMs int64
	// WindowMs (l) is the report window length the partition ran with; a
	// restart with another length cannot rebuild its windows.
	WindowMs int64
}

// String returns m's text form.
func (m CommitMeta) String() string {
	b := make([]byte, 0, 80)
	b = append(b, "kh"...)
	b = strconv.AppendInt(b, CommitMetaVersion, 10)
	b = append(b, " r="...)
	b = strconv.AppendInt(b, m.ResumeOffset, 10)
	b = append(b, " t="...)
	b = appendTimeMs(b, m.MaxTsMs)
	b = append(b, " w="...)
	b = appendTimeMs(b, m.NextWindowMs)
	b = append(b, " l="...)
	b = strconv.AppendInt(b, m.WindowMs, 10)
	return string(b)
}

func appendTimeMs(b []byte, ms int64) []byte {
	if ms == NoTimeMs {
		return append(b, '-')
	}
	return strconv.AppendInt(b, ms, 10)
}

// ErrCommitMeta is wrapped by every error ParseCommitMeta returns.
var ErrCommitMeta = errors.New("commit metadata")

// ParseCommitMeta parses String's form. It rejects another version, a
// missing, repeated or reordered field, numbers not written as String
// writes them, a negative offset and a window length below 1 ms, with an
// error wrapping ErrCommitMeta. It never panics.
func ParseCommitMeta(s string) (CommitMeta, error) {
	bad := func(format string, args ...any) (CommitMeta, error) {
		return CommitMeta{}, fmt.Errorf("%w %q: "+format+"; start the partition without it", append([]any{ErrCommitMeta, s}, args...)...)
	}
	fields := strings.Split(s, " ")
	if len(fields) != 5 {
		return bad("want 5 space-separated fields, got %d", len(fields))
	}
	if want := "kh" + strconv.Itoa(CommitMetaVersion); fields[0] != want {
		return bad("version %q, this reader knows %q", fields[0], want)
	}
	var m CommitMeta
	for i, f := range []struct {
		name   string
		dst    *int64
		timeMs bool
	}{{"r", &m.ResumeOffset, false}, {"t", &m.MaxTsMs, true}, {"w", &m.NextWindowMs, true}, {"l", &m.WindowMs, false}} {
		val, ok := strings.CutPrefix(fields[i+1], f.name+"=")
		if !ok {
			return bad("field %d is not %s=", i+2, f.name)
		}
		if f.timeMs && val == "-" {
			*f.dst = NoTimeMs
			continue
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != val || (f.timeMs && n == NoTimeMs) {
			return bad("%s=%q is not a canonical decimal", f.name, val)
		}
		*f.dst = n
	}
	if m.ResumeOffset < 0 {
		return bad("negative resume offset %d", m.ResumeOffset)
	}
	if m.WindowMs < 1 {
		return bad("window length %d ms", m.WindowMs)
	}
	return m, nil
}
