package archive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// manifestVersion is the version of the segment manifest format.
const manifestVersion = 1

// manifest records one durable-or-becoming-durable segment of an events
// partition: its offset range and the files it consists of. It is written
// before any of those files becomes visible (see doc.go), so it is how a
// restart learns where an earlier run cut the partition into segments.
type manifest struct {
	Version   int            `json:"v"`
	Topic     string         `json:"topic"`
	Partition int32          `json:"partition"`
	First     int64          `json:"first"`
	Last      int64          `json:"last"`
	Files     []manifestFile `json:"files"`
}

// manifestFile is one file of a segment: its path under the root, rows and
// size in bytes.
type manifestFile struct {
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// sameFiles reports whether m and o list the same files with the same rows.
func (m *manifest) sameFiles(o *manifest) bool {
	return slices.EqualFunc(m.Files, o.Files, func(a, b manifestFile) bool { return a.Path == b.Path && a.Rows == b.Rows })
}

// complete reports whether every file m lists exists with its recorded size.
func (m *manifest) complete(fsys FS) (bool, error) {
	for _, f := range m.Files {
		st, err := fsys.Stat(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("check segment file %s: %w", f.Path, err)
		}
		if st.Size() != f.Bytes {
			return false, nil
		}
	}
	return true, nil
}

// readManifests returns the manifests in dir sorted by First, refusing
// overlapping ones.
func readManifests(fsys FS, dir string, topic string, partition int32) ([]*manifest, error) {
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list segments %s: %w", dir, err)
	}
	var out []*manifest
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		name := path.Join(dir, e.Name())
		m, err := readManifest(fsys, name)
		if err != nil {
			return nil, err
		}
		if m.Topic != topic || m.Partition != partition || manifestName(m.First, m.Last) != e.Name() {
			return nil, fmt.Errorf("segment manifest %s describes %s/%d [%d, %d]; it does not belong here, move it away", name, m.Topic, m.Partition, m.First, m.Last)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *manifest) int { return cmpInt(a.First, b.First) })
	for i := 1; i < len(out); i++ {
		if out[i].First <= out[i-1].Last {
			return nil, fmt.Errorf("segment manifests in %s overlap: [%d, %d] and [%d, %d]; remove the one whose files are missing",
				dir, out[i-1].First, out[i-1].Last, out[i].First, out[i].Last)
		}
	}
	return out, nil
}

func readManifest(fsys FS, name string) (*manifest, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open segment manifest %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	if err != nil {
		return nil, fmt.Errorf("read segment manifest %s: %w", name, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode segment manifest %s: %w", name, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("segment manifest %s: version %d, this writer knows %d", name, m.Version, manifestVersion)
	}
	if m.First < 0 || m.Last < m.First {
		return nil, fmt.Errorf("segment manifest %s: range [%d, %d] is not ordered", name, m.First, m.Last)
	}
	return &m, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
