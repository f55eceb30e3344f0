package archive

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// FS is the storage the archive lives in. Names are slash-separated paths
// relative to the archive's root, as io/fs uses them.
//
// The writer needs three things from it: a file written under a name
// nobody reads (Create in a staging folder, Sync), an atomic move of that
// file to its final name (Rename), and a way to make names durable
// (SyncDir). DirFS provides them on a local folder with fsync(2) and
// rename(2).
//
// An object store (S3, GCS) would implement the same contract differently,
// and is not built: Create buffers or starts a multipart upload under the
// final name's staging key, Sync completes the upload, Rename is a
// server-side copy to the final key followed by a delete of the staging
// key (visible at once and whole, since objects appear atomically),
// SyncDir does nothing, and ReadDir is a delimiter listing of the prefix.
// The segment protocol in doc.go holds unchanged, because it relies only
// on "a name is either absent or complete" and on the order of the steps.
type FS interface {
	// MkdirAll creates dir and its missing parents and makes their
	// names durable.
	MkdirAll(dir string) error
	// Create creates or truncates name for writing.
	Create(name string) (WritableFile, error)
	// Open opens name for reading.
	Open(name string) (ReadableFile, error)
	// Rename moves oldname to newname, replacing newname atomically.
	Rename(oldname, newname string) error
	// SyncDir makes the names created, renamed or removed in dir durable.
	SyncDir(dir string) error
	// Remove removes the file name.
	Remove(name string) error
	// ReadDir lists dir; a missing dir is an error satisfying
	// errors.Is(err, fs.ErrNotExist).
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Stat describes name.
	Stat(name string) (fs.FileInfo, error)
}

// WritableFile is a file being written: data, then Sync, then Close.
type WritableFile interface {
	io.Writer
	// Sync makes what was written durable.
	Sync() error
	Close() error
}

// ReadableFile is a file open for random-access reads.
type ReadableFile interface {
	io.ReaderAt
	io.Closer
	// Size is the file's length in bytes.
	Size() int64
}

// DirFS is FS on a local folder.
type DirFS struct {
	root string
}

var _ FS = (*DirFS)(nil)

// NewDirFS returns the FS rooted at the local folder root, which must exist.
func NewDirFS(root string) (*DirFS, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("archive root %s: %w (create the folder, or fix archive.root)", root, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("archive root %s is not a folder", root)
	}
	return &DirFS{root: root}, nil
}

func (d *DirFS) path(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "archive", Path: name, Err: fs.ErrInvalid}
	}
	return filepath.Join(d.root, filepath.FromSlash(name)), nil
}

// MkdirAll creates dir and its missing parents, then fsyncs the parent of
// each folder it created, so the new names survive a power loss.
func (d *DirFS) MkdirAll(dir string) error {
	var created []string
	for p := dir; p != "." && p != "/"; p = path.Dir(p) {
		full, err := d.path(p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(full); err == nil {
			break
		}
		created = append(created, p)
	}
	full, err := d.path(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(full, 0o755); err != nil {
		return err
	}
	for _, p := range created {
		if err := d.SyncDir(path.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// Create creates or truncates name.
func (d *DirFS) Create(name string) (WritableFile, error) {
	full, err := d.path(name)
	if err != nil {
		return nil, err
	}
	return os.OpenFile(full, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

type osReadable struct {
	*os.File
	size int64
}

func (f osReadable) Size() int64 { return f.size }

// Open opens name for reading.
func (d *DirFS) Open(name string) (ReadableFile, error) {
	full, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return osReadable{File: f, size: st.Size()}, nil
}

// Rename moves oldname to newname with rename(2), atomic on one file system.
func (d *DirFS) Rename(oldname, newname string) error {
	o, err := d.path(oldname)
	if err != nil {
		return err
	}
	n, err := d.path(newname)
	if err != nil {
		return err
	}
	return os.Rename(o, n)
}

// SyncDir fsyncs the folder dir.
func (d *DirFS) SyncDir(dir string) error {
	full, err := d.path(dir)
	if err != nil {
		return err
	}
	f, err := os.Open(full)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// Remove removes name.
func (d *DirFS) Remove(name string) error {
	full, err := d.path(name)
	if err != nil {
		return err
	}
	return os.Remove(full)
}

// ReadDir lists dir sorted by name.
func (d *DirFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	full, err := d.path(dir)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(full)
}

// Stat describes name.
func (d *DirFS) Stat(name string) (fs.FileInfo, error) {
	full, err := d.path(name)
	if err != nil {
		return nil, err
	}
	return os.Stat(full)
}

// isTemp reports whether a name in a staging folder is a file the writer
// left behind.
func isTemp(name string) bool { return strings.HasSuffix(name, tempSuffix) }
