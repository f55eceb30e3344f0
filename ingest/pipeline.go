package ingest

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// Pipeline turns lines into records: parse, check, produce. Good events go
// to the events topic, bad lines to the DLQ, lines that record no access
// are counted and acknowledged at once. One Pipeline serves every source
// of a process; Send is safe for concurrent use.
type Pipeline struct {
	parser logparse.Parser
	prod   *Producer
	limits schemas.Limits
	maxRaw int
	now    func() time.Time
	stats  *Stats
}

// PipelineConfig configures a Pipeline.
type PipelineConfig struct {
	Parser   logparse.Parser
	Producer *Producer
	// Limits are applied to every parsed event.
	Limits schemas.Limits
	// MaxDLQRaw bounds the copy of a bad line in its dead letter;
	// 0 means schemas.DefaultMaxDeadLetterRaw.
	MaxDLQRaw int
	// Stats receives the counts; nil makes private ones.
	Stats *Stats
	// Now is the clock for arrival times; nil means time.Now.
	Now func() time.Time
}

// NewPipeline returns a Pipeline.
func NewPipeline(cfg PipelineConfig) (*Pipeline, error) {
	if cfg.Parser == nil || cfg.Producer == nil {
		return nil, errors.New("pipeline: parser and producer must be set")
	}
	if cfg.Stats == nil {
		cfg.Stats = NewStats(nil)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pipeline{parser: cfg.Parser, prod: cfg.Producer, limits: cfg.Limits, maxRaw: cfg.MaxDLQRaw, now: cfg.Now, stats: cfg.Stats}, nil
}

// Stats returns the counts the pipeline updates.
func (p *Pipeline) Stats() *Stats { return p.stats }

// Producer returns the pipeline's producer.
func (p *Pipeline) Producer() *Producer { return p.prod }

// Line is one input line for Send.
type Line struct {
	// Data is the line without its line ending; Send copies what it keeps.
	Data []byte
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
}

// Send parses l and produces the result; ack.Ack(seq, …) follows once it
// is acknowledged (at once for a skipped line). Send blocks while the
// producer's buffer is full and returns ctx's error if ctx ends first.
func (p *Pipeline) Send(ctx context.Context, l *Line, ack Acker, seq uint64) error {
	p.stats.Lines.Add(1)
	p.stats.Bytes.Add(int64(len(l.Data)))
	now := p.now()
	err := l.Err
	var e schemas.AccessEvent
	if err == nil {
		err = p.parser.Parse(l.Data, &e)
	}
	if err == nil {
		if e.TimeMs == 0 {
			e.TimeMs = l.ArrivalMs
		}
		if e.TimeMs == 0 {
			e.TimeMs = now.UnixMilli()
		}
		err = p.limits.Validate(&e, now.UnixMilli())
	}
	switch {
	case err == nil:
		return p.prod.event(ctx, &e, l.IDPrefix, l.Offset, ack, seq, p.stats)
	case errors.Is(err, logparse.ErrSkip):
		p.stats.Skipped.Add(1)
		ack.Ack(seq, nil)
		return nil
	}
	source := l.Source
	if l.SourceAtOffset {
		source += "@" + strconv.FormatInt(l.Offset, 10)
	}
	d := schemas.NewDeadLetter(now.UnixMilli(), source, err, l.Data, p.maxRaw)
	return p.prod.deadLetter(ctx, &d, l.IDPrefix, l.Offset, ack, seq, p.stats)
}

func tooLongErr(detail string) error {
	return &schemas.InvalidEventError{Reason: schemas.ReasonLineTooLong, Detail: detail}
}
