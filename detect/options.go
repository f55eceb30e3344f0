package detect

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/logparse"
)

// Options are the service's settings a config file sets (under detect:,
// by their mapstructure tags). DefaultOptions has the defaults; New
// validates them as they are.
type Options struct {
	// Group is the consumer group of the detect instances: Kafka splits
	// the events partitions among its members.
	Group string `mapstructure:"group"`
	// Topics are the events topics to read; empty means the events topic
	// (kafka.topics.events). With RegexTopics they are regular expressions.
	Topics []string `mapstructure:"topics"`
	// RegexTopics makes Topics regular expressions matched against every
	// topic name, so topics created later are picked up.
	RegexTopics bool `mapstructure:"regex_topics"`
	// From is where a partition the group has no commit for starts:
	// earliest, latest, or an RFC 3339 time (the first record at or after
	// it).
	From string `mapstructure:"from"`
	// Keyed says whether the records' Kafka key is the event's key, so a
	// key lives on one partition and the partitions' top lists merge
	// exactly: auto, true or false. Auto decides per partition from its
	// first record, and a partition found keyed is merged as not keyed
	// from its first record that is not; with true such a record stops
	// the service with a *KeyMismatchError.
	Keyed string `mapstructure:"keyed"`
	// Parse reads raw application-log records when its Format is a log
	// format (one record may give several events); empty Format means the
	// records are AccessEvents in either codec, as ingest writes them.
	Parse logparse.Config `mapstructure:",squash"`
	// DLQMaxRaw bounds the bytes of a bad record kept in its dead letter.
	DLQMaxRaw int `mapstructure:"dlq_max_raw"`
	// MaxPollRecords bounds the records taken per poll, across partitions.
	MaxPollRecords int `mapstructure:"max_poll_records"`
	// CommitInterval is how often the partitions' commit points are
	// committed.
	CommitInterval time.Duration `mapstructure:"commit_interval"`
	// FlushTimeout bounds the wait for outputs in flight when a partition
	// is given up (revoke, shutdown) before its commit.
	FlushTimeout time.Duration `mapstructure:"flush_timeout"`
	// MergeGroup is the consumer group electing the merger: the member
	// that owns the windows topic's single partition merges.
	MergeGroup string `mapstructure:"merge_group"`
	// SessionTimeout is how long the groups wait for a member that stopped
	// heartbeating (a crash, a network split) before giving its partitions
	// to the others: how long a crashed instance's partitions stall, unless
	// it restarts with the same InstanceID first.
	SessionTimeout time.Duration `mapstructure:"session_timeout"`
	// InstanceID makes this instance a static member of both groups
	// (Kafka's group.instance.id): restarted after a crash with the same
	// id, it takes its partitions back at once instead of waiting for the
	// dead member's session timeout. Each running instance needs an id of
	// its own: a second member joining with an id fences the first, which
	// stops with an error. "auto" (the default) is the host name and the
	// lowest slot free on this host ("<host>-0", a second instance beside
	// it "<host>-1"), which suits one instance per host or container, and
	// several on one host restarted there; give ids yourself where
	// instances move between hosts (a StatefulSet's pod name). "none"
	// turns static membership off. A stop (SIGTERM) still leaves the
	// groups at once.
	InstanceID string `mapstructure:"instance_id"`
	// PartitionTimeout is how long an events partition may say nothing
	// (no progress record: its instance died, or it is stuck) before the
	// merger reports windows without it, naming it missing, and the other
	// partitions stop waiting for it. A partition that is alive is waited
	// for however slowly it moves. Longer than SessionTimeout, so that a
	// crashed instance's partitions are taken over by another before they
	// are given up on.
	PartitionTimeout time.Duration `mapstructure:"partition_timeout"`
}

// Keyed values.
const (
	KeyedAuto  = "auto"
	KeyedTrue  = "true"
	KeyedFalse = "false"
)

// From values besides an RFC 3339 time.
const (
	FromEarliest = "earliest"
	FromLatest   = "latest"
)

// DefaultOptions: group keyheat-detect reading the events topic from the
// earliest record, keyed decided per partition, AccessEvent records, a
// commit every second, merger group keyheat-merge, static membership with
// an id from the host name.
func DefaultOptions() Options {
	p := logparse.DefaultConfig()
	p.Format = ""
	return Options{
		Group:            "keyheat-detect",
		From:             FromEarliest,
		Keyed:            KeyedAuto,
		Parse:            p,
		DLQMaxRaw:        16 << 10,
		MaxPollRecords:   10_000,
		CommitInterval:   time.Second,
		FlushTimeout:     30 * time.Second,
		MergeGroup:       "keyheat-merge",
		SessionTimeout:   45 * time.Second,
		InstanceID:       InstanceAuto,
		PartitionTimeout: time.Minute,
	}
}

// OptionError is one unusable option: Option is its name as the config
// file spells it under detect:, Problem what is wrong.
type OptionError struct {
	Option  string
	Problem string
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Problem }

// Validate returns every unusable option, each an *OptionError, joined.
func (o Options) Validate() error {
	var errs []error
	bad := func(option, format string, args ...any) {
		errs = append(errs, &OptionError{Option: option, Problem: fmt.Sprintf(format, args...)})
	}
	for _, g := range []struct{ key, name string }{{"group", o.Group}, {"merge_group", o.MergeGroup}} {
		if err := topics.CheckName(g.name); err != nil {
			bad(g.key, "%v", err)
		}
	}
	if o.Group == o.MergeGroup && o.Group != "" {
		bad("merge_group", "%q is also detect.group; the merger needs a group of its own", o.MergeGroup)
	}
	for _, t := range o.Topics {
		if o.RegexTopics {
			if _, err := regexp.Compile(t); err != nil {
				bad("topics", "%q is not a regular expression: %v", t, err)
			}
		} else if err := topics.CheckName(t); err != nil {
			bad("topics", "%v", err)
		}
	}
	if o.RegexTopics && len(o.Topics) == 0 {
		bad("regex_topics", "is true but detect.topics names no expression")
	}
	if _, err := o.resetOffset(); err != nil {
		bad("from", "%v", err)
	}
	if !slices.Contains([]string{KeyedAuto, KeyedTrue, KeyedFalse}, o.Keyed) {
		bad("keyed", "%q is not one of auto, true, false", o.Keyed)
	}
	if o.Parse.Format != "" {
		if _, err := logparse.New(o.Parse); err != nil {
			// logparse names the section ("json: …"), the key under detect.
			section, problem, ok := strings.Cut(err.Error(), ": ")
			if ok && slices.Contains([]string{"json", "combined", "regex"}, section) {
				bad(section, "%s", problem)
			} else {
				bad("format", "%q: want empty (AccessEvent records) or one of %s", o.Parse.Format, strings.Join(logparse.Formats(), ", "))
			}
		}
	}
	if o.DLQMaxRaw < 1 {
		bad("dlq_max_raw", "must be at least 1, e.g. 16384")
	}
	if o.MaxPollRecords < 1 {
		bad("max_poll_records", "must be at least 1, e.g. 10000")
	}
	if o.CommitInterval <= 0 {
		bad("commit_interval", "must be positive, e.g. 1s")
	}
	if o.FlushTimeout <= 0 {
		bad("flush_timeout", "must be positive, e.g. 30s")
	}
	if o.SessionTimeout < time.Second || o.SessionTimeout > 30*time.Minute {
		// Brokers refuse less than group.min.session.timeout.ms (6 s by
		// default) or more than group.max.session.timeout.ms (30 min)
		// anyway; below a second heartbeats cannot keep up.
		bad("session_timeout", "%v: want at least 1s and at most 30m (brokers accept 6s to 30m by default)", o.SessionTimeout)
	}
	if o.InstanceID != InstanceAuto && o.InstanceID != InstanceNone {
		if err := topics.CheckName(o.InstanceID); err != nil {
			bad("instance_id", "%v; or auto (from the host name), or none (no static membership)", err)
		}
	}
	if o.PartitionTimeout < time.Second {
		bad("partition_timeout", "%v: want at least 1s, and more than session_timeout (e.g. 1m)", o.PartitionTimeout)
	}
	return errors.Join(errs...)
}

// resetOffset is where a partition with no commit starts.
func (o Options) resetOffset() (kgo.Offset, error) {
	switch o.From {
	case FromEarliest:
		return kgo.NewOffset().AtStart(), nil
	case FromLatest:
		return kgo.NewOffset().AtEnd(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, o.From)
	if err != nil {
		return kgo.Offset{}, fmt.Errorf("%q is not earliest, latest or an RFC 3339 time like 2026-01-02T15:04:05Z", o.From)
	}
	return kgo.NewOffset().AfterMilli(t.UnixMilli()), nil
}
