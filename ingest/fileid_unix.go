//go:build unix

package ingest

import (
	"os"
	"syscall"
)

// fileID identifies a file independent of its name: device and inode,
// what survives a rename and changes when a file is recreated, so
// rotation can be told from growth.
type fileID struct {
	Dev, Ino uint64
}

// fileIDOf returns the identity of fi.
func fileIDOf(fi os.FileInfo) fileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{Dev: uint64(st.Dev), Ino: st.Ino} //nolint:unconvert // Dev is int32 on some platforms
	}
	return fileID{}
}
