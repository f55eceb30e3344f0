package archive

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/keyheat/keyheat/schemas"
)

// eventFile reads an events file row group by row group, column by column.
//
// parquet-go's GenericReader rebuilds rows through parquet.Value and
// allocates every string of every row; reading the columns' pages
// directly costs one allocation per page and per dictionary instead, which
// is what makes a replay several times faster (see the benchmarks).
type eventFile struct {
	*openedFile
	cols [len(schemas.EventRowColumns)]int
	*columns
}

// columns holds the decoded columns of a row group. A reader hands one
// from file to file, so a replay of many files allocates them once.
type columns struct {
	i64  [4][]int64 // time_ms, bytes, latency_us, offset
	i32  [3][]int32 // status, partition, event_index
	strs [6][]string
	dict []string
	// all: every row of the row group is selected; otherwise sel lists
	// the selected rows.
	all bool
	sel []int32
	// scratch holds page headers for checkPages.
	scratch []byte
}

// Column positions in schemas.EventRowColumns.
const (
	colTime = iota
	colApp
	colKey
	colOp
	colBytes
	colStatus
	colClient
	colNode
	colLatency
	colTopic
	colPartition
	colOffset
	colIndex
)

// colAbsent marks a column a file of an older layout version lacks.
const colAbsent = -1

// openEventFile opens name; cols is the scratch space it decodes into
// (nil: its own).
func openEventFile(fsys FS, name string, cols *columns) (*eventFile, error) {
	o, err := openArchiveFile(fsys, name, KindEvents)
	if err != nil {
		return nil, err
	}
	if cols == nil {
		cols = new(columns)
	}
	ef := &eventFile{openedFile: o, columns: cols}
	err = guard(func() error {
		for i, c := range schemas.EventRowColumns {
			col := o.pf.Root().Column(c)
			want := parquet.ByteArray
			switch i {
			case colTime, colBytes, colLatency, colOffset:
				want = parquet.Int64
			case colStatus, colPartition, colIndex:
				want = parquet.Int32
			}
			if col == nil && i == colIndex && o.version == 1 {
				// Version 1 archived one event per record: index 0.
				ef.cols[i] = colAbsent
				continue
			}
			if col == nil || !col.Leaf() || !col.Required() || col.Type().Kind() != want {
				return fmt.Errorf("column %s missing or not a required %s", c, want)
			}
			ef.cols[i] = col.Index()
		}
		return nil
	})
	if err != nil {
		o.Close()
		return nil, &BadFileError{Path: name, Err: err}
	}
	return ef, nil
}

func (ef *eventFile) numRowGroups() int { return len(ef.pf.RowGroups()) }

// timeBounds returns row group rg's event-time range from the footer.
func (ef *eventFile) timeBounds(rg int) (minMs, maxMs int64) {
	return timeBounds(ef.pf, rg, ef.cols[colTime])
}

// readRowGroup decodes row group rg into ef's columns and selects its
// rows that q keeps: it returns how many, and row j of the selection is
// row(j). Errors are *BadFileError.
func (ef *eventFile) readRowGroup(rg int, q *Query) (int, error) {
	var kept int
	err := guard(func() error {
		var err error
		if ef.scratch, err = checkPages(ef.f, ef.pf.Metadata(), rg, ef.scratch); err != nil {
			return err
		}
		g := ef.pf.RowGroups()[rg]
		n := int(g.NumRows())
		chunks := g.ColumnChunks()
		read64 := func(slot, col int) {
			if err == nil {
				ef.i64[slot], err = readInt64s(chunks[ef.cols[col]], ef.i64[slot][:0], n)
			}
		}
		read32 := func(slot, col int) {
			switch {
			case err != nil:
			case ef.cols[col] == colAbsent:
				ef.i32[slot] = slices.Grow(ef.i32[slot][:0], n)[:n]
				clear(ef.i32[slot])
			default:
				ef.i32[slot], err = readInt32s(chunks[ef.cols[col]], ef.i32[slot][:0], n)
			}
		}
		readS := func(slot, col int) {
			if err == nil {
				ef.strs[slot], ef.dict, err = readStrings(chunks[ef.cols[col]], ef.strs[slot][:0], ef.dict, n)
			}
		}
		read64(0, colTime)
		read64(1, colBytes)
		read64(2, colLatency)
		read64(3, colOffset)
		read32(0, colStatus)
		read32(1, colPartition)
		read32(2, colIndex)
		readS(0, colApp)
		readS(1, colKey)
		readS(2, colOp)
		readS(3, colClient)
		readS(4, colNode)
		readS(5, colTopic)
		if err != nil {
			return err
		}
		// The per-row checks are skipped when the footer shows the whole
		// row group inside the query.
		minMs, maxMs := ef.timeBounds(rg)
		ef.sel = ef.sel[:0]
		if q.hasTime(minMs) && q.hasTime(maxMs) && len(q.Apps) == 0 && q.KeyPrefix == "" {
			ef.all, kept = true, n
			return nil
		}
		ts, app, key := ef.i64[0], ef.strs[0], ef.strs[1]
		for i := 0; i < n; i++ {
			if !q.hasTime(ts[i]) || !q.hasApp(app[i]) || len(key[i]) < len(q.KeyPrefix) || key[i][:len(q.KeyPrefix)] != q.KeyPrefix {
				continue
			}
			ef.sel = append(ef.sel, int32(i))
		}
		ef.all, kept = false, len(ef.sel)
		return nil
	})
	if err != nil {
		return 0, &BadFileError{Path: ef.path, Err: fmt.Errorf("row group %d: %w", rg, err)}
	}
	return kept, nil
}

// rowIndex is the column index of row j of the selection.
func (c *columns) rowIndex(j int) int {
	if c.all {
		return j
	}
	return int(c.sel[j])
}

// timeMs is the event time of row j of the selection.
func (c *columns) timeMs(j int) int64 { return c.i64[0][c.rowIndex(j)] }

// row sets *dst to row j of the selection. Rows are built only as the
// merge hands them out, straight into the caller's buffer: a row group
// decoded into rows first would cost a 10 MB buffer of pointers for the
// garbage collector to scan per open file, and a second copy of every row.
func (c *columns) row(j int, dst *schemas.EventRow) {
	i := c.rowIndex(j)
	*dst = schemas.EventRow{TimeMs: c.i64[0][i], App: c.strs[0][i], Key: c.strs[1][i], Op: c.strs[2][i], Bytes: c.i64[1][i],
		Status: c.i32[0][i], Client: c.strs[3][i], Node: c.strs[4][i], LatencyUs: c.i64[2][i], Topic: c.strs[5][i],
		Partition: c.i32[1][i], Offset: c.i64[3][i], Index: c.i32[2][i]}
}

var errColumnLength = errors.New("column length differs from the row group's row count")

// eachPage calls fn with every page of chunk, releasing each afterwards.
func eachPage(chunk parquet.ColumnChunk, fn func(parquet.Page) error) error {
	pages := chunk.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if p.NumNulls() != 0 {
			parquet.Release(p)
			return errors.New("null in a required column")
		}
		err = fn(p)
		parquet.Release(p)
		if err != nil {
			return err
		}
	}
}

func readInt64s(chunk parquet.ColumnChunk, dst []int64, n int) ([]int64, error) {
	dst = slices.Grow(dst, n)
	err := eachPage(chunk, func(p parquet.Page) error {
		v := p.Data()
		dst = append(dst, v.Int64()...)
		return nil
	})
	if err == nil && len(dst) != n {
		err = errColumnLength
	}
	return dst, err
}

func readInt32s(chunk parquet.ColumnChunk, dst []int32, n int) ([]int32, error) {
	dst = slices.Grow(dst, n)
	err := eachPage(chunk, func(p parquet.Page) error {
		v := p.Data()
		dst = append(dst, v.Int32()...)
		return nil
	})
	if err == nil && len(dst) != n {
		err = errColumnLength
	}
	return dst, err
}

// readStrings appends the strings of a BYTE_ARRAY chunk to dst. A
// dictionary is turned into strings once (one allocation for all of its
// bytes) and its entries are shared by the rows; a plain page costs one
// allocation for all of its values. dict is scratch space, returned for
// reuse.
func readStrings(chunk parquet.ColumnChunk, dst, dict []string, n int) ([]string, []string, error) {
	dst = slices.Grow(dst, n)
	var dictOf parquet.Dictionary
	err := eachPage(chunk, func(p parquet.Page) error {
		if d := p.Dictionary(); d != nil {
			if d != dictOf {
				dictOf = d
				dv := d.Page().Data()
				data, offs := dv.ByteArray()
				dict = splitStrings(dict[:0], string(data), offs)
				if dict == nil {
					return errors.New("malformed dictionary")
				}
			}
			v := p.Data()
			for _, ix := range v.Int32() {
				if ix < 0 || int(ix) >= len(dict) {
					return fmt.Errorf("dictionary index %d beyond %d entries", ix, len(dict))
				}
				dst = append(dst, dict[ix])
			}
			return nil
		}
		v := p.Data()
		data, offs := v.ByteArray()
		var ok bool
		if dst, ok = appendSplit(dst, string(data), offs); !ok {
			return errors.New("malformed byte-array page")
		}
		return nil
	})
	if err == nil && len(dst) != n {
		err = errColumnLength
	}
	return dst, dict, err
}

// splitStrings returns dst with the values of s cut at offs (n+1 offsets
// for n values), or nil when the offsets do not fit s.
func splitStrings(dst []string, s string, offs []uint32) []string {
	out, ok := appendSplit(dst, s, offs)
	if !ok {
		return nil
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func appendSplit(dst []string, s string, offs []uint32) ([]string, bool) {
	for i := 0; i+1 < len(offs); i++ {
		a, b := offs[i], offs[i+1]
		if a > b || int(b) > len(s) {
			return dst, false
		}
		dst = append(dst, s[a:b])
	}
	return dst, true
}
