package sketch

import (
	"testing"
)

// Each fuzz target feeds arbitrary bytes to an UnmarshalBinary twice: as
// they are, and with a valid checksum appended, so the fuzzer can explore
// the structural checks behind the CRC. Decoding must never panic; whatever
// decodes must work (add, merge, re-encode) and re-encode to an equal value.

func withCRC(b []byte) []byte { return appendCRC(append([]byte(nil), b...), 0) }

func fuzzSeeds(f *testing.F, blobs ...[]byte) {
	for _, b := range blobs {
		f.Add(b)
		if len(b) > crcLen {
			f.Add(b[:len(b)-crcLen]) // body only: withCRC makes it valid again
		}
	}
}

func sampleCountMin(conservative bool) *CountMin {
	s, _ := NewCountMin(CountMinConfig{Depth: 2, Width: 8, Seed: 3, Conservative: conservative})
	for i := range 30 {
		s.AddN(keyOf(uint64(i%9)), uint64(i%4+1))
	}
	return s
}

func sampleTopK() *TopK {
	a, _ := NewTopK(TopKConfig{Capacity: 3, Sketch: CountMinConfig{Depth: 2, Width: 8}})
	b, _ := NewTopK(a.Config())
	for i := range 40 {
		a.Add(keyOf(uint64(i % 7)))
		b.Add(keyOf(uint64(i%5 + 3)))
	}
	_ = a.Merge(b)
	return a
}

func mustMarshal(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzUnmarshalCountMin(f *testing.F) {
	fuzzSeeds(f,
		mustMarshal(sampleCountMin(false).MarshalBinary()),
		mustMarshal(sampleCountMin(true).MarshalBinary()),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withCRC(data)} {
			var s CountMin
			if err := s.UnmarshalBinary(in); err != nil {
				continue
			}
			again, err := s.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var s2 CountMin
			if err := s2.UnmarshalBinary(again); err != nil {
				t.Fatalf("re-encoding of a decoded sketch does not decode: %v", err)
			}
			s.Add("k")
			if s.Estimate("k") == 0 {
				t.Fatal("estimate of an added key is 0")
			}
			if err := s2.Merge(&s); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzUnmarshalTopK(f *testing.F) {
	fuzzSeeds(f, mustMarshal(sampleTopK().MarshalBinary()))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withCRC(data)} {
			var tk TopK
			if err := tk.UnmarshalBinary(in); err != nil {
				continue
			}
			again, err := tk.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var t2 TopK
			if err := t2.UnmarshalBinary(again); err != nil {
				t.Fatalf("re-encoding of a decoded top-k does not decode: %v", err)
			}
			if len(t2.Top(tk.Len())) != tk.Len() {
				t.Fatal("re-decoded top-k lost keys")
			}
			for i := range 2 * tk.Config().Capacity {
				tk.Add(keyOf(uint64(i)))
			}
			if err := t2.Merge(&tk); err != nil {
				t.Fatal(err)
			}
			_ = t2.Top(10)
		}
	})
}

func FuzzUnmarshalCardinality(f *testing.F) {
	c, _ := NewCardinality(CardinalityConfig{Precision: 4})
	s, _ := NewCardinality(CardinalityConfig{Precision: 6, Sparse: true})
	l, _ := NewCardinality(CardinalityConfig{Precision: hllListMinP}) // listed registers
	for i := range 20 {
		c.Add(keyOf(uint64(i)))
		s.Add(keyOf(uint64(i)))
		l.Add(keyOf(uint64(i)))
	}
	fuzzSeeds(f, mustMarshal(c.MarshalBinary()), mustMarshal(s.MarshalBinary()), mustMarshal(l.MarshalBinary()))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withCRC(data)} {
			var c Cardinality
			if err := c.UnmarshalBinary(in); err != nil {
				continue
			}
			_ = c.Estimate()
			c.Add("k")
			if _, err := c.MarshalBinary(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
