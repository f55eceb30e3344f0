package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/keyheat/keyheat/internal/ackseq"
	"github.com/keyheat/keyheat/schemas"
)

// ReadLines sends every line of r through pl until r ends or ctx does,
// then flushes. source names r in dead letters. Records carry stdin
// record ids (schemas.IDStdin: the run's start and the line's byte
// offset), unique per run: a pipe cannot be read again, so there is
// nothing to resume. Lines longer than maxLine (default
// 1 MiB) are dead-lettered with schemas.ReasonLineTooLong.
//
// When ctx ends, reading stops at the next line; if r has a
// SetReadDeadline method (an *os.File on a pipe or terminal), a blocked
// read is interrupted too.
func ReadLines(ctx context.Context, r io.Reader, source string, maxLine int, pl *Pipeline) error {
	if maxLine <= 0 {
		maxLine = 1 << 20
	}
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		stop := context.AfterFunc(ctx, func() { _ = d.SetReadDeadline(time.Now()) })
		defer stop()
	}
	acks := ackseq.New(0)
	prefix := schemas.RecordID{Kind: schemas.IDStdin, StartNs: time.Now().UnixNano()}.Prefix()
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	var long []byte
	var err error
	for ctx.Err() == nil {
		var line []byte
		line, err = br.ReadSlice('\n')
		n := int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxLine+1 {
				long = append(long, line[:min(len(line), maxLine+1-len(long))]...)
			}
			off += n
			continue
		}
		if len(long) > 0 || len(line) > maxLine {
			long = append(long, line...)
			start := off - int64(len(long)) + n
			l := Line{Data: long[:min(len(long), maxLine)], Source: source, IDPrefix: prefix, Offset: start}
			if len(long) > maxLine {
				l.Err = tooLongErr(fmt.Sprintf("line is longer than %d bytes", maxLine))
			}
			off += n
			if serr := pl.Send(ctx, &l, seqAcker{acks}, acks.Add(off)); serr != nil {
				break
			}
			long = long[:0]
		} else if len(line) > 0 {
			start := off
			off += n
			data := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
			l := Line{Data: data, Source: source, IDPrefix: prefix, Offset: start}
			if serr := pl.Send(ctx, &l, seqAcker{acks}, acks.Add(off)); serr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		err = nil
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if ferr := pl.Producer().Flush(fctx); ferr != nil {
		return errors.Join(err, fmt.Errorf("flush: %w", ferr))
	}
	if _, aerr := acks.Acked(); aerr != nil && ctx.Err() == nil {
		err = errors.Join(err, fmt.Errorf("kafka refused a record: %w", aerr))
	}
	return err
}
