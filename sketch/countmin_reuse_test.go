package sketch

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

// requireSameDecode checks that UnmarshalBinaryReuse into target decodes
// data as UnmarshalBinary does: the same sketch, or the same error.
func requireSameDecode(t testing.TB, target *CountMin, data []byte) {
	t.Helper()
	var want CountMin
	wantErr := want.UnmarshalBinary(data)
	before := target.counters
	err := target.UnmarshalBinaryReuse(data)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("UnmarshalBinaryReuse error %v, UnmarshalBinary error %v", err, wantErr)
	case err != nil:
		if err.Error() != wantErr.Error() {
			t.Fatalf("UnmarshalBinaryReuse error %q, UnmarshalBinary %q", err, wantErr)
		}
		if !reflect.DeepEqual(*target, CountMin{}) {
			t.Fatal("a failed UnmarshalBinaryReuse left a sketch behind")
		}
		return
	}
	if !reflect.DeepEqual(*target, want) {
		t.Fatalf("UnmarshalBinaryReuse decoded %+v, UnmarshalBinary %+v", *target, want)
	}
	n := len(want.counters)
	if cap(before) >= n && cap(before) <= 2*n && &target.counters[0] != &before[:1][0] {
		t.Fatal("counters of room enough were not reused")
	}
}

func TestCountMinUnmarshalBinaryReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := []CountMinConfig{{Depth: 1, Width: 1}, {Depth: 2, Width: 8}, {Depth: 4, Width: 2048},
		{Depth: 4, Width: 1024, Conservative: true}, {Depth: 5, Width: 300, Seed: 9}, {Depth: 4, Width: 4096}}
	var blobs [][]byte
	for _, cfg := range shapes {
		s, err := NewCountMin(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rng.IntN(20_000) {
			// Counts of every size, so counters take 1 to 10 varint bytes.
			s.AddN("k"+strconv.Itoa(i%3000), uint64(1)<<rng.IntN(40))
		}
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, b)
	}
	target := new(CountMin)
	for range 300 {
		b := blobs[rng.IntN(len(blobs))]
		switch rng.IntN(4) {
		case 0: // a damaged byte, with its checksum made right
			c := append([]byte(nil), b[:len(b)-crcLen]...)
			c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
			b = withCRC(c)
		case 1: // truncated
			b = withCRC(b[:rng.IntN(len(b)-crcLen)])
		}
		requireSameDecode(t, target, b)
		if rng.IntN(10) == 0 {
			target = new(CountMin) // and from the zero value
		}
	}
}

func FuzzUnmarshalCountMinReuse(f *testing.F) {
	fuzzSeeds(f,
		mustMarshal(sampleCountMin(false).MarshalBinary()),
		mustMarshal(sampleCountMin(true).MarshalBinary()),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withCRC(data)} {
			requireSameDecode(t, new(CountMin), in)
			requireSameDecode(t, sampleCountMin(false), in)
		}
	})
}

// BenchmarkCountMinUnmarshal decodes a default-size sketch of a busy
// partition, allocating (UnmarshalBinary) or into a sketch of its shape
// (UnmarshalBinaryReuse).
func BenchmarkCountMinUnmarshal(b *testing.B) {
	s, _ := NewCountMin(CountMinConfig{})
	for i := range 100_000 {
		s.Add("user:" + strconv.Itoa(i%20_000))
	}
	data, _ := s.MarshalBinary()
	b.Run("UnmarshalBinary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d CountMin
			if err := d.UnmarshalBinary(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UnmarshalBinaryReuse", func(b *testing.B) {
		b.ReportAllocs()
		var d CountMin
		for b.Loop() {
			if err := d.UnmarshalBinaryReuse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
