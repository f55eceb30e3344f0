package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// LineOptions are the settings of lines every source shares, as a config
// file sets them (under ingest:, by their mapstructure tags). A zero value
// takes the default (DefaultLineOptions).
type LineOptions struct {
	// MaxLineBytes bounds a line (or a raw record's value); the sources
	// dead-letter longer ones with schemas.ReasonLineTooLong, keeping
	// their start.
	MaxLineBytes int `mapstructure:"max_line_bytes"`
	// DLQMaxRaw bounds the copy of a bad line in its dead letter.
	DLQMaxRaw int `mapstructure:"dlq_max_raw"`
}

// DefaultLineOptions: lines up to 1 MiB, dead letters keep
// schemas.DefaultMaxDeadLetterRaw bytes of a line.
func DefaultLineOptions() LineOptions {
	return LineOptions{MaxLineBytes: 1 << 20, DLQMaxRaw: schemas.DefaultMaxDeadLetterRaw}
}

// Validate returns every unusable option, each an *OptionError, joined.
func (o LineOptions) Validate() error {
	var p optionErrors
	if o.MaxLineBytes < 1 {
		p.add("max_line_bytes", "must be at least 1, e.g. 1048576")
	}
	if o.DLQMaxRaw < 1 {
		p.add("dlq_max_raw", "must be at least 1, e.g. 16384")
	}
	return p.err()
}

func (o LineOptions) withDefaults() LineOptions {
	def := DefaultLineOptions()
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = def.MaxLineBytes
	}
	if o.DLQMaxRaw == 0 {
		o.DLQMaxRaw = def.DLQMaxRaw
	}
	return o
}

// LineSender turns lines into records and sends them: parse, check,
// produce. Good events go to the events topic, bad lines to the DLQ, lines
// that record no access are counted and acknowledged at once. One
// LineSender serves every source of a process; Send is safe for
// concurrent use.
type LineSender struct {
	parser  logparse.Parser
	prod    *Producer
	limits  schemas.Limits
	maxLine int
	maxRaw  int
	now     func() time.Time
	stats   *Stats
}

// LineSenderConfig configures a LineSender: its options and what it runs
// with.
type LineSenderConfig struct {
	LineOptions
	Parser   logparse.Parser
	Producer *Producer
	// Limits are applied to every parsed event.
	Limits schemas.Limits
	// Stats receives the counts; nil makes private ones.
	Stats *Stats
	// Now is the clock for arrival times; nil means time.Now.
	Now func() time.Time
}

// NewLineSender returns a LineSender.
func NewLineSender(cfg LineSenderConfig) (*LineSender, error) {
	if cfg.Parser == nil || cfg.Producer == nil {
		return nil, errors.New("line sender: parser and producer must be set")
	}
	opt := cfg.LineOptions.withDefaults()
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("line sender: %w", err)
	}
	if cfg.Stats == nil {
		cfg.Stats = NewStats(nil)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &LineSender{parser: cfg.Parser, prod: cfg.Producer, limits: cfg.Limits, maxLine: opt.MaxLineBytes,
		maxRaw: opt.DLQMaxRaw, now: cfg.Now, stats: cfg.Stats}, nil
}

// Stats returns the counts the sender updates.
func (s *LineSender) Stats() *Stats { return s.stats }

// Producer returns the sender's producer.
func (s *LineSender) Producer() *Producer { return s.prod }

// MaxLineBytes is the longest line the sources hand to Send; they
// dead-letter longer ones (Line.Err).
func (s *LineSender) MaxLineBytes() int { return s.maxLine }

// Line is one input line for Send.
type Line struct {
	// Data is the line without its line ending; Send copies what it keeps.
	Data []byte
	// Len, when not 0, is the whole line's length in bytes and Data only
	// its start (a line over the limit, of which readers keep the start):
	// its dead letter's OrigLen.
	Len int
	// Source names where it came from, for dead letters (a path, "stdin",
	// "topic:partition").
	Source string
	// SourceAtOffset makes a dead letter's source Source+"@"+Offset, Kafka's
	// "topic:partition@offset" (schemas.KafkaSource), without building that
	// string for the lines that do not need it.
	SourceAtOffset bool
	// ArrivalMs, when not 0, is the event time of a line that carries none
	// (a raw record's timestamp); 0 means the time Send is called.
	ArrivalMs int64
	// IDPrefix and Offset make the record's keyheat-id header: IDPrefix is
	// the schemas.RecordID.Prefix of the line's stream and Offset its
	// position there, so the same line always gets the same id.
	IDPrefix string
	Offset   int64
	// Err, when set, dead-letters the line with this error instead of
	// parsing it (a source's own verdict, e.g. schemas.ReasonLineTooLong).
	Err error
	// Unterminated marks the last bytes of a file closed for good without
	// a newline after them: parsed like any line, and when that fails its
	// dead letter says it was left unfinished.
	Unterminated bool
	// rejected is set by send when the line went to the DLQ for what it
	// holds, not for its time alone: the tail judges from it whether a
	// file it took for a rotated log is one. A line whose time is too far
	// from now parsed as a log line (a backlog older than
	// events.max_skew), so it says nothing against the file.
	rejected bool
}

// Send parses l and produces the result; ack.Ack(seq, …) follows once it
// is acknowledged (at once for a skipped line). A line that records
// several accesses (a redis MGET) becomes one record per key, all with the
// line's position in their id and each with its own Index
// (schemas.RecordID), and is acknowledged once they all are; if one of its
// events is invalid the whole line is dead-lettered instead, so replaying
// the dead letter never counts a key twice. Optional fields the parser
// dropped are counted per field (Stats.DroppedFields). Send blocks while
// the producer's buffer is full and returns ctx's error if ctx ends first.
func (s *LineSender) Send(ctx context.Context, l *Line, ack Acker, seq uint64) error {
	return s.send(ctx, l, ack, seq, s.stats)
}

// send is Send counting into st: the tail counts each transaction apart.
func (s *LineSender) send(ctx context.Context, l *Line, ack Acker, seq uint64, st *Stats) error {
	st.Lines.Add(1)
	st.Bytes.Add(int64(len(l.Data)))
	now := s.now()
	err := l.Err
	var one [1]schemas.AccessEvent
	var evs []schemas.AccessEvent
	var dropped logparse.Fields
	if err == nil {
		evs, dropped, err = s.parser.Parse(one[:0], l.Data)
	}
	for i := 0; err == nil && i < len(evs); i++ {
		e := &evs[i]
		if e.TimeMs == 0 {
			e.TimeMs = l.ArrivalMs
		}
		if e.TimeMs == 0 {
			e.TimeMs = now.UnixMilli()
		}
		err = s.limits.Validate(e, now.UnixMilli())
	}
	switch {
	case err == nil:
		if dropped != 0 {
			st.countDropped(dropped)
		}
		if len(evs) > 1 {
			ack = &lineAcker{next: ack, left: len(evs)}
		}
		for i := range evs {
			if err := s.prod.event(ctx, &evs[i], l.IDPrefix, l.Offset, i, ack, seq, st); err != nil {
				// The failed record's promise acks it; the records not
				// produced are acked here, so the line's ack still comes.
				for range evs[i+1:] {
					ack.Ack(seq, err)
				}
				return err
			}
		}
		return nil
	case errors.Is(err, logparse.ErrSkip):
		st.Skipped.Add(1)
		ack.Ack(seq, nil)
		return nil
	}
	l.rejected = schemas.ReasonOf(err) != schemas.ReasonTimeSkew
	if l.Unterminated {
		err = &schemas.InvalidEventError{Reason: schemas.ReasonOf(err),
			Detail: "unterminated last line of a file closed for good (a torn write?): " + detailOf(err)}
	}
	source := l.Source
	if l.SourceAtOffset {
		source += "@" + strconv.FormatInt(l.Offset, 10)
	}
	d := schemas.NewDeadLetter(now.UnixMilli(), source, err, l.Data, s.maxRaw)
	if l.Len > d.OrigLen {
		d.OrigLen = l.Len
	}
	return s.prod.deadLetter(ctx, &d, l.IDPrefix, l.Offset, ack, seq, st)
}

// detailOf is what a dead letter would say about err.
func detailOf(err error) string {
	var ie *schemas.InvalidEventError
	if errors.As(err, &ie) {
		return ie.Detail
	}
	return err.Error()
}

// lineAcker passes the ack of a line that became several records on to
// next once every record was acknowledged, with the first error.
type lineAcker struct {
	next Acker
	mu   sync.Mutex
	left int // records not yet acknowledged
	err  error
}

func (a *lineAcker) Ack(seq uint64, err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.left--
	done, first := a.left == 0, a.err
	a.mu.Unlock()
	if done {
		a.next.Ack(seq, first)
	}
}

func tooLongErr(detail string) error {
	return &schemas.InvalidEventError{Reason: schemas.ReasonLineTooLong, Detail: detail}
}
