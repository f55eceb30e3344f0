package ingest

import (
	"strings"
	"testing"
)

// FuzzPositionKey: what parses as a positions record key of this tail id
// is exactly the key recordKey writes for it.
func FuzzPositionKey(f *testing.F) {
	s := &positionStore{tailID: "web-1"}
	for _, k := range []string{"web-1/2049:131:0", "web-1/start", "web-2/1:2:3", "web-1/1:2", "web-1/1:2:3:4", "web-1/-1:2:3", "web-1/18446744073709551615:0:0"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		k, ok := s.parseKey([]byte(key))
		if ok && string(s.recordKey(k)) != key {
			t.Fatalf("key %q parses to %+v, which formats as %q", key, k, s.recordKey(k))
		}
	})
}

// FuzzParseHotKey: a spec either fails, naming itself, or gives a key
// that NewGen's checks accept on its own.
func FuzzParseHotKey(f *testing.F) {
	for _, s := range []string{"key=product:42,start=10s,for=30s,share=5%", "key=a,share=100%", "share=150%", "key=a,share=5",
		"key=a,share=5%,for=-1s", "key=,share=1%", "key=a,key=b,share=1%", "=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		h, err := ParseHotKey(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "hot key ") {
				t.Fatalf("ParseHotKey(%q): error %q does not name the spec", spec, err)
			}
			return
		}
		if h.Key == "" || !(h.Share > 0 && h.Share <= 1) || h.Start < 0 || h.For <= 0 {
			t.Fatalf("ParseHotKey(%q) = %+v, which is not usable", spec, h)
		}
		if _, err := NewGen(GenConfig{Keys: 1, Count: 1, Hot: []HotKey{h}}, nil, nil); err != nil {
			t.Fatalf("ParseHotKey(%q) = %+v, which NewGen refuses: %v", spec, h, err)
		}
	})
}
