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
// nothing to resume. Lines longer than pl.MaxLineBytes are dead-lettered
// with schemas.ReasonLineTooLong.
//
// When ctx ends, reading stops at the next line; if r has a
// SetReadDeadline method (an *os.File on a pipe or terminal), a blocked
// read is interrupted too.
func ReadLines(ctx context.Context, r io.Reader, source string, pl *LineSender) error {
	maxLine := pl.MaxLineBytes()
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		stop := context.AfterFunc(ctx, func() { _ = d.SetReadDeadline(time.Now()) })
		defer stop()
	}
	acks := ackseq.New(0)
	prefix := schemas.RecordID{Kind: schemas.IDStdin, StartNs: time.Now().UnixNano()}.Prefix()
	br := bufio.NewReaderSize(r, 64<<10)
	var off, lineStart int64
	// long holds the start of a line longer than the read buffer, at most
	// maxLine+1 bytes of it: enough to keep and to know it is too long.
	var long []byte
	partial := false
	var err error
	for ctx.Err() == nil {
		if !partial {
			lineStart = off
		}
		var line []byte
		line, err = br.ReadSlice('\n')
		off += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxLine+1 {
				long = append(long, line[:min(len(line), maxLine+1-len(long))]...)
			}
			partial = true
			continue
		}
		partial = false
		if len(long) > 0 {
			line = append(long, line...)
			long = long[:0]
		}
		if len(line) > 0 {
			data := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
			l := Line{Data: data, Source: source, IDPrefix: prefix, Offset: lineStart}
			if len(data) > maxLine {
				l.Data = data[:maxLine]
				l.Err = tooLongErr(fmt.Sprintf("line is longer than %d bytes", maxLine))
			}
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
