package archive

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/keyheat/keyheat/schemas"
)

// memFile is one in-memory file, enough FS for openEventFile.
type memFile struct {
	FS
	data []byte
}

type memReadable struct{ *bytes.Reader }

func (memReadable) Close() error { return nil }

func (m memFile) Open(string) (ReadableFile, error) { return memReadable{bytes.NewReader(m.data)}, nil }

// FuzzEventFile feeds arbitrary bytes to the events file reader: it must
// return rows or a *BadFileError, never panic.
func FuzzEventFile(f *testing.F) {
	var rows []schemas.EventRow
	for i := range 300 {
		rows = append(rows, schemas.EventRow{TimeMs: int64(1000 + i), App: "shop", Key: string(rune('a' + i%26)),
			Op: "GET", Bytes: int64(i), Topic: "t", Partition: 1, Offset: int64(i)})
	}
	o := DefaultOptions()
	o.RowGroupRows = 128
	var buf bytes.Buffer
	enc := newEncoder[schemas.EventRow](o, KindEvents, "time_ms", "offset")
	w := &bufFS{buf: &buf}
	if _, err := enc.writeFile(w, "f", rows); err != nil {
		f.Fatal(err)
	}
	valid := buf.Bytes()
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := openEventFile(memFile{data: data}, "f", nil)
		if err != nil {
			var bf *BadFileError
			if !errors.As(err, &bf) {
				t.Fatalf("error is not a *BadFileError: %v", err)
			}
			return
		}
		defer ef.Close()
		q := &Query{}
		for rg := range ef.numRowGroups() {
			if _, err := ef.readRowGroup(rg, q); err != nil {
				var bf *BadFileError
				if !errors.As(err, &bf) {
					t.Fatalf("error is not a *BadFileError: %v", err)
				}
			}
		}
	})
}

// bufFS writes one file into a buffer.
type bufFS struct {
	FS
	buf *bytes.Buffer
}

type bufFile struct{ *bytes.Buffer }

func (bufFile) Sync() error  { return nil }
func (bufFile) Close() error { return nil }

func (b *bufFS) Create(string) (WritableFile, error) { return bufFile{b.buf}, nil }
func (b *bufFS) Remove(string) error                 { return fs.ErrInvalid }
