package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// fileID identifies a file independent of its name.
type fileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// filePos is what the state file keeps per followed path: which file was
// at that path, how often it was found truncated (Gen, part of every
// record id so ids stay unique across truncations), and the byte offset
// up to which every line is acknowledged by Kafka.
//
// Floor makes a restart exactly once (see readback.go): per output topic
// name and partition, an offset after which every record of a line at or
// past Offset lies. A restart reads from there to find those records.
// Absent in state files of older versions, which then restart at least
// once; the version stays 1 so that they can still read this one.
type filePos struct {
	ID     fileID                     `json:"id"`
	Gen    uint64                     `json:"gen"`
	Offset int64                      `json:"offset"`
	Floor  map[string]map[int32]int64 `json:"floor,omitempty"`
}

type tailState struct {
	Version int                `json:"version"`
	Files   map[string]filePos `json:"files"`
}

const stateVersion = 1

func loadState(path string) (map[string]filePos, error) {
	files := map[string]filePos{}
	if path == "" {
		return files, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return files, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	var st tailState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt (%w); move it away to start over", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("state file %s has version %d, want %d", path, st.Version, stateVersion)
	}
	if st.Files != nil {
		files = st.Files
	}
	return files, nil
}

func marshalState(files map[string]filePos) ([]byte, error) {
	b, err := json.MarshalIndent(tailState{Version: stateVersion, Files: files}, "", "  ")
	return append(b, '\n'), err
}

// saveState replaces the state file atomically: write a temporary file
// beside it, sync, rename. A crash leaves the old state or the new, never
// half of one.
func saveState(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("save state %s: %w", path, err)
	}
	return nil
}
