package pipeline

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenOptions keep every summary small enough to review in a diff.
func goldenOptions() Options {
	o := DefaultOptions()
	o.MaxApps = 2
	// An exact table that busy windows overflow, so the golden files show
	// exact windows and approximate ones.
	o.Summary = SummaryOptions{ExactKeys: 190, ExactKeyBytes: 4096, TopKeys: 4, TopCapacity: 16, TopWidth: 64,
		BigKeys: 2, BigCapacity: 8, BigWidth: 32, DistinctPrecision: 4, SketchWidth: 8}
	o.Rules = []Rule{
		{Name: "writes", Key: "counter:*", Window: 2 * time.Second, Rate: 300, Ops: OpsWrites},
		{Name: "default", Key: "*", Window: time.Second, Rate: 400},
	}
	o.Whitelist = []KeyMatch{{Key: "health"}}
	o.Detect.CoolDown = 2 * time.Second
	o.Detect.Suppress = time.Second
	return o
}

func goldenStream() []event {
	return generate(streamSpec{seed: 31, durationMs: 7000, bgPerMs: 1, bgKeys: 300,
		bgApps: []string{"shop", "cart", "auth"}, jitterMs: 2500, jitterEvery: 30, startOffset: 500,
		planted: []*planted{
			{app: "shop", key: "{user1000}.cart", op: "GET", bytes: 2048, rate: steady(900, 1000, 3500)},
			{app: "cart", key: "counter:orders", op: "INCR", rate: steady(600, 2000, 4000)},
			{app: "shop", key: "health", op: "GET", rate: steady(800, 0, 7000)},
		}})
}

// runJSON runs the golden stream and returns every output as JSON lines,
// in the order produced.
func runJSON(t *testing.T, keyed bool) []byte {
	src := testSource
	src.Keyed = keyed
	p := newPart(t, goldenOptions(), src, Start{Offset: 500})
	var buf bytes.Buffer
	var out Output
	write := func() {
		for i := range out.HotKeys {
			b, err := out.HotKeys[i].AppendJSON(nil)
			require.NoError(t, err)
			buf.Write(b)
			buf.WriteByte('\n')
		}
		for i := range out.Candidates {
			b, err := out.Candidates[i].AppendJSON(nil)
			require.NoError(t, err)
			buf.Write(b)
			buf.WriteByte('\n')
		}
		for i := range out.Windows {
			b, err := out.Windows[i].AppendJSON(nil)
			require.NoError(t, err)
			buf.Write(b)
			buf.WriteByte('\n')
		}
		out.Reset()
	}
	events := goldenStream()
	for i := range events {
		p.Process(&events[i].e, events[i].off, &out)
		write()
	}
	p.End(&out)
	write()
	return buf.Bytes()
}

// TestGolden: the same input gives byte-identical output, run after run
// (and release after release, reviewed in the golden files' diffs).
// Regenerate with go test ./pipeline -run TestGolden -update.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keyed bool
	}{{"partition-keyed.jsonl", true}, {"partition-unkeyed.jsonl", false}} {
		t.Run(tc.name, func(t *testing.T) {
			got := runJSON(t, tc.keyed)
			require.Equal(t, string(got), string(runJSON(t, tc.keyed)), "two runs of the same input differ")
			path := filepath.Join("testdata", tc.name)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), string(got), "output differs from %s; if the change is intended, run with -update and review the diff", path)
		})
	}
}
