package archive

import (
	"fmt"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// maxPageBytes bounds a page's uncompressed size. keyheat's pages are
// parquet-go's 256 KiB page buffers, and a dictionary page holds at most a
// row group's distinct strings; anything near this bound is corruption.
const maxPageBytes = 256 << 20

// checkPages walks the page headers of row group rg's column chunks and
// refuses sizes that do not fit: a page longer than what is left of its
// chunk, a chunk beyond the file, an uncompressed size beyond
// maxPageBytes. parquet-go v0.32.0 allocates what a page header claims
// before it reads, so one flipped bit in a header can ask for gigabytes;
// checking first turns that into a BadFileError.
func checkPages(f ReadableFile, md *format.FileMetaData, rg int, scratch []byte) ([]byte, error) {
	size := f.Size()
	var proto thrift.CompactProtocol
	for _, cc := range md.RowGroups[rg].Columns {
		m := &cc.MetaData
		start, n := m.DataPageOffset, m.TotalCompressedSize
		if d := m.DictionaryPageOffset; d > 0 && d < start {
			start = d
		}
		if start < 4 || n <= 0 || n > size || start > size-n {
			return scratch, fmt.Errorf("column %v: chunk [%d, +%d) is not inside the %d-byte file", m.PathInSchema, start, n, size)
		}
		for off := int64(0); off < n; {
			var h format.PageHeader
			var err error
			for window := int64(4 << 10); ; window *= 16 {
				w := min(window, n-off)
				scratch = grow(scratch, int(w))
				if _, err = f.ReadAt(scratch, start+off); err != nil {
					return scratch, fmt.Errorf("column %v: read page header: %w", m.PathInSchema, err)
				}
				r := proto.NewReaderFromBytes(scratch)
				h = format.PageHeader{}
				if err = thrift.NewDecoder(r).Decode(&h); err == nil {
					off += int64(r.BytesRead())
					break
				}
				if w == n-off {
					return scratch, fmt.Errorf("column %v: page header at %d: %w", m.PathInSchema, start+off, err)
				}
			}
			switch {
			case h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > n-off:
				return scratch, fmt.Errorf("column %v: page at %d claims %d bytes, %d are left in its chunk", m.PathInSchema, start+off, h.CompressedPageSize, n-off)
			case h.UncompressedPageSize < 0 || h.UncompressedPageSize > maxPageBytes:
				return scratch, fmt.Errorf("column %v: page at %d claims %d uncompressed bytes", m.PathInSchema, start+off, h.UncompressedPageSize)
			}
			off += int64(h.CompressedPageSize)
		}
	}
	return scratch, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
