package ingest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/logparse"
)

// requireOptionErrors checks that err holds exactly the problems want, in
// order, each an *OptionError whose text starts with the entry.
func requireOptionErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var oe *OptionError
		require.True(t, errors.As(e, &oe), "every problem is an *OptionError, got %T %v", e, e)
		got = append(got, oe.Error())
	}
	require.Len(t, got, len(want), "problems: %q", got)
	for i, w := range want {
		require.True(t, strings.HasPrefix(got[i], w), "problem %d = %q, want it to start with %q", i, got[i], w)
	}
}

func TestOptionsValidate(t *testing.T) {
	prod := func(f func(*ProducerOptions)) error { o := DefaultProducerOptions(); f(&o); return o.Validate() }
	line := func(f func(*LineOptions)) error { o := DefaultLineOptions(); f(&o); return o.Validate() }
	tail := func(f func(*TailOptions)) error { o := DefaultTailOptions(); f(&o); return o.Validate() }
	topic := func(f func(*TopicOptions)) error { o := DefaultTopicOptions(); f(&o); return o.Validate() }
	for _, tc := range []struct {
		name string
		err  error
		want []string // nil: valid
	}{
		{"producer defaults", DefaultProducerOptions().Validate(), nil},
		{"line defaults", DefaultLineOptions().Validate(), nil},
		{"tail defaults", DefaultTailOptions().Validate(), nil},
		{"topic defaults", DefaultTopicOptions().Validate(), nil},

		{"every compression", prod(func(o *ProducerOptions) {}), nil},
		{"unknown compression", prod(func(o *ProducerOptions) { o.Compression = "brotli" }), []string{`compression: "brotli" is not one of zstd, lz4, snappy, gzip, none`}},
		{"empty compression", prod(func(o *ProducerOptions) { o.Compression = "" }), []string{`compression: "" is not one of`}},
		{"zero linger", prod(func(o *ProducerOptions) { o.Linger = 0 }), nil},
		{"negative linger", prod(func(o *ProducerOptions) { o.Linger = -time.Millisecond }), []string{"linger: must not be negative"}},
		{"no buffer", prod(func(o *ProducerOptions) { o.MaxBufferedRecords = 0 }), []string{"max_buffered_records: must be at least 1"}},
		{"producer, two at once", prod(func(o *ProducerOptions) { o.Linger = -1; o.MaxBufferedRecords = -1 }), []string{"linger:", "max_buffered_records:"}},

		{"no line", line(func(o *LineOptions) { o.MaxLineBytes = 0 }), []string{"max_line_bytes: must be at least 1"}},
		{"no dlq raw", line(func(o *LineOptions) { o.DLQMaxRaw = -1 }), []string{"dlq_max_raw: must be at least 1"}},

		{"tail id", tail(func(o *TailOptions) { o.TailID = "web-1" }), nil},
		{"illegal tail id", tail(func(o *TailOptions) { o.TailID = "web/1" }), []string{`tail_id: "web/1" has '/'`}},
		{"no positions topic", tail(func(o *TailOptions) { o.PositionsTopic = "" }), []string{"positions_topic: must not be empty"}},
		{"bad rotated glob", tail(func(o *TailOptions) { o.Rotated = []string{"ok.*", "[x"} }), []string{`rotated: "[x" is not a glob pattern`}},
		{"negative rotated idle", tail(func(o *TailOptions) { o.RotatedIdle = -1 }), []string{"rotated_idle: must not be negative"}},
		{"no poll interval", tail(func(o *TailOptions) { o.PollInterval = 0 }), []string{"poll_interval: must be positive"}},
		{"no commit interval", tail(func(o *TailOptions) { o.CommitInterval = 0 }), []string{"commit_interval: must be positive"}},
		{"delivery defaults", DefaultDeliveryOptions().Validate(), nil},
		{"negative stop timeout", DeliveryOptions{StopTimeout: -1}.Validate(), []string{"stop_timeout: must not be negative"}},
		{"negative end timeout", DeliveryOptions{EndTimeout: -1}.Validate(), []string{"end_timeout: must not be negative"}},

		{"raw topics", topic(func(o *TopicOptions) { o.Topics = []string{"app.raw", "db.raw"} }), nil},
		{"illegal raw topic", topic(func(o *TopicOptions) { o.Topics = []string{"a b"} }), []string{`topics: "a b" has ' '`}},
		{"empty raw topic", topic(func(o *TopicOptions) { o.Topics = []string{""} }), []string{"topics: must not be empty"}},
		{"raw topic twice", topic(func(o *TopicOptions) { o.Topics = []string{"raw", "raw"} }), []string{`topics: "raw" is named twice`}},
		{"no group", topic(func(o *TopicOptions) { o.Group = "" }), []string{"group: must not be empty"}},
		{"illegal group", topic(func(o *TopicOptions) { o.Group = "ingest/1" }), []string{"group: "}},
		{"no commit interval", topic(func(o *TopicOptions) { o.CommitInterval = 0 }), []string{"commit_interval: must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) { requireOptionErrors(t, tc.err, tc.want) })
	}
	for _, c := range Compressions() {
		o := DefaultProducerOptions()
		o.Compression = c
		require.NoError(t, o.Validate(), c)
	}
}

// TestConstructorsFillZeroOptions: the zero value of each options type
// works in its constructor (the defaults fill in), and what is set is
// validated there.
func TestConstructorsFillZeroOptions(t *testing.T) {
	p, err := NewProducer(ProducerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Topic: "ev", DLQTopic: "dlq"})
	require.NoError(t, err)
	defer p.Close()
	_, err = NewProducer(ProducerConfig{ProducerOptions: ProducerOptions{Linger: -1}, Topic: "ev", DLQTopic: "dlq"})
	require.ErrorContains(t, err, "producer: linger: must not be negative")
	_, err = NewProducer(ProducerConfig{})
	require.ErrorContains(t, err, "events topic must be set")

	parser, err := logparse.New(logparse.DefaultConfig())
	require.NoError(t, err)
	ls, err := NewLineSender(LineSenderConfig{Parser: parser, Producer: p})
	require.NoError(t, err)
	require.Equal(t, DefaultLineOptions().MaxLineBytes, ls.MaxLineBytes())
	_, err = NewLineSender(LineSenderConfig{LineOptions: LineOptions{MaxLineBytes: -1}, Parser: parser, Producer: p})
	require.ErrorContains(t, err, "max_line_bytes")

	_, err = NewTailer(TailConfig{Paths: []string{"a.log"}}, ls)
	require.ErrorContains(t, err, "tail: the producer must be transactional with id "+DefaultTailOptions().TransactionalID())
	tp, err := NewProducer(ProducerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Topic: "ev", DLQTopic: "dlq",
		TransactionalID: DefaultTailOptions().TransactionalID(), PositionsTopic: DefaultTailOptions().PositionsTopic})
	require.NoError(t, err)
	defer tp.Close()
	tls, err := NewLineSender(LineSenderConfig{Parser: parser, Producer: tp})
	require.NoError(t, err)
	tl, err := NewTailer(TailConfig{Paths: []string{"a.log"}}, tls)
	require.NoError(t, err)
	require.Equal(t, DefaultTailOptions(), tl.cfg.TailOptions)
	_, err = NewTailer(TailConfig{Paths: []string{"a.log"}, TailOptions: TailOptions{PollInterval: -1}}, tls)
	require.ErrorContains(t, err, "tail: poll_interval: must be positive")

	for _, tc := range []struct {
		name string
		cfg  TopicConfig
		want string // "": valid
	}{
		{"zero options but topics", TopicConfig{TopicOptions: TopicOptions{Topics: []string{"raw"}}}, ""},
		{"no topics", TopicConfig{}, "no topics to read"},
		{"events topic as input", TopicConfig{TopicOptions: TopicOptions{Topics: []string{"ev"}}}, "topic ev is an output topic"},
		{"dlq as input", TopicConfig{TopicOptions: TopicOptions{Topics: []string{"raw", "dlq"}}}, "topic dlq is an output topic"},
		{"bad option", TopicConfig{TopicOptions: TopicOptions{Topics: []string{"raw"}, CommitInterval: -1}}, "commit_interval: must be positive"},
		{"negative poll", TopicConfig{TopicOptions: TopicOptions{Topics: []string{"raw"}}, MaxPollRecords: -1}, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := NewTopic(tc.cfg, ls)
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, DefaultTopicOptions().Group, src.cfg.Group)
				require.Equal(t, DefaultTopicOptions().CommitInterval, src.cfg.CommitInterval)
				src.Close()
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
