package archive

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zeebo/xxh3"
)

// Kinds of rows, each in its own tree under the root.
const (
	KindEvents  = "events"
	KindReports = "reports"
	KindHotKeys = "hotkeys"
)

const (
	// defaultPartition is the folder value of an empty app: Hive's name
	// for a missing partition value, which DuckDB, Spark and Arrow read as
	// NULL. Cluster-wide reports (no app) land there too.
	defaultPartition = "__HIVE_DEFAULT_PARTITION__"
	// maxEscaped bounds an escaped app or topic in a path; longer ones
	// are cut and suffixed with a hash so two long names stay apart and a
	// path segment stays far below the usual 255-byte limit.
	maxEscaped = 120
	// fileExt ends every archive file; tempSuffix every file being written.
	fileExt    = ".parquet"
	tempSuffix = ".tmp"
	// stateDir holds what the writer keeps for itself: segment manifests
	// and staging folders. The leading underscore makes Hive-style readers
	// (DuckDB, Spark) skip it, and it holds no .parquet names.
	stateDir = "_keyheat"
	hourMs   = int64(time.Hour / time.Millisecond)
)

// escape makes s safe as one path segment. Letters, digits, '-', '_' and '.'
// stay; every other byte becomes %XX (upper-case hex), the escaping Hive
// and Spark use for partition values. The empty string becomes
// defaultPartition. The result never contains '/', never is "." or "..",
// and is injective for inputs up to the length cap.
func escape(s string) string {
	if s == "" {
		return defaultPartition
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c == '.' && s != "." && s != "..") {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	out := b.String()
	if out == defaultPartition {
		// An app literally named like the default partition must not
		// share its folder with the empty app.
		return "%5F" + out[1:]
	}
	if len(out) > maxEscaped {
		cut := maxEscaped - 17
		// Do not split a %XX triple.
		if i := strings.LastIndexByte(out[:cut], '%'); i >= cut-2 {
			cut = i
		}
		out = out[:cut] + "~" + fmt.Sprintf("%016x", xxh3.HashString(s))
	}
	return out
}

// bucketDir is the folder of kind's rows of app whose event time falls in
// the UTC hour starting at hourStartMs.
func bucketDir(kind, app string, hourStartMs int64) string {
	t := time.UnixMilli(hourStartMs).UTC()
	return fmt.Sprintf("kind=%s/app=%s/dt=%04d-%02d-%02d/hour=%02d", kind, escape(app), t.Year(), t.Month(), t.Day(), t.Hour())
}

// hourOf returns the start of the UTC hour holding tsMs.
func hourOf(tsMs int64) int64 {
	h := tsMs / hourMs
	if tsMs%hourMs < 0 {
		h--
	}
	return h * hourMs
}

// eventFileName names the file of one bucket of a segment: the topic,
// partition and the segment's first and last offset, zero-padded so names
// sort by offset. Every bucket file of a segment has the same range: the
// segment's, not the range of the rows inside it.
func eventFileName(topic string, partition int32, first, last int64) string {
	return fmt.Sprintf("%s_%d_%019d_%019d%s", escape(topic), partition, first, last, fileExt)
}

// EventFileInfo is what an events file's name says.
type EventFileInfo struct {
	// Topic is the escaped topic as it appears in the name.
	Topic     string
	Partition int32
	// First and Last bound the offsets of the segment the file belongs to.
	First, Last int64
}

// ParseEventFileName reads an events file name (its last path segment);
// ok is false for any other name.
func ParseEventFileName(name string) (info EventFileInfo, ok bool) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	rest, found := strings.CutSuffix(name, fileExt)
	if !found {
		return info, false
	}
	parts := strings.Split(rest, "_")
	if len(parts) < 4 {
		return info, false
	}
	n := len(parts)
	last, err1 := strconv.ParseInt(parts[n-1], 10, 64)
	first, err2 := strconv.ParseInt(parts[n-2], 10, 64)
	p, err3 := strconv.ParseInt(parts[n-3], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || p < 0 {
		return info, false
	}
	return EventFileInfo{Topic: strings.Join(parts[:n-3], "_"), Partition: int32(p), First: first, Last: last}, true
}

// partitionStateDir holds a partition's manifests and staging folder.
func partitionStateDir(topic string, partition int32) string {
	return fmt.Sprintf("%s/%s/%s/%d", stateDir, KindEvents, escape(topic), partition)
}

// manifestName names the manifest of segment [first, last].
func manifestName(first, last int64) string {
	return fmt.Sprintf("%019d_%019d.json", first, last)
}
