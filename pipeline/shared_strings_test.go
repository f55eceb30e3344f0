package pipeline

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestEventStringsNotKept: a partition keeps none of an event's strings
// beyond Process, as detect relies on when it decodes binary events with
// schemas.DecodeAnyShared (their strings point into the record). Each
// event's strings are made to point into one scratch buffer that is
// overwritten after every Process, before the outputs are read; every
// output, to the end, is what the same stream of ordinary strings gives.
// A key, app or op kept anywhere (the exact table, the top-K, the ring,
// an alert, a window's app, a summary) would read back as the scribble.
func TestEventStringsNotKept(t *testing.T) {
	for name, st := range sharedStreams() {
		for _, keyed := range []bool{true, false} {
			t.Run(name+"/keyed="+map[bool]string{true: "true", false: "false"}[keyed], func(t *testing.T) {
				src := testSource
				src.Keyed = keyed
				want := runOutputs(t, st.o, src, st.events, false)
				got := runOutputs(t, st.o, src, st.events, true)
				require.Positive(t, bytes.Count(want, []byte("\n")))
				require.Equal(t, string(want), string(got))
			})
		}
	}
}

// sharedStreams are the streams TestEventStringsNotKept runs.
func sharedStreams() map[string]struct {
	o      Options
	events []event
} {
	long := strings.Repeat("k", 300) // past MaxKeyBytes below: shortened
	return map[string]struct {
		o      Options
		events []event
	}{
		"golden": {goldenOptions(), goldenStream()},
		"defaults": {func() Options {
			o := DefaultOptions()
			o.MaxKeyBytes = 256
			o.Rules = []Rule{{Name: "default", Key: "*", Window: time.Second, Rate: 500}}
			return o
		}(), generate(streamSpec{seed: 7, durationMs: 6000, bgPerMs: 20, bgKeys: 50_000,
			bgApps: []string{"shop", "cart"}, jitterMs: 1500, jitterEvery: 50,
			planted: []*planted{
				{app: "shop", key: "hot:1", op: "GET", bytes: 100, rate: steady(2000, 500, 4000)},
				{app: "cart", key: long, op: "SET", bytes: 10, rate: steady(1500, 1000, 3000)},
			}})},
	}
}

// runOutputs runs events through a new partition and returns every output
// as JSON lines. With shared, each event's strings point into a buffer
// scribbled over after Process.
func runOutputs(t *testing.T, o Options, src Source, events []event, shared bool) []byte {
	p := newPart(t, o, src, Start{Offset: events[0].off})
	var buf bytes.Buffer
	var out Output
	write := func() { writeOutputs(t, &buf, &out) }
	scratch := make([]byte, 0, 4096)
	alias := func(s string) string {
		if s == "" {
			return ""
		}
		i := len(scratch)
		scratch = append(scratch, s...)
		return unsafe.String(&scratch[i], len(s))
	}
	for i := range events {
		e := events[i].e
		if shared {
			scratch = scratch[:0]
			e.Key, e.App, e.Op, e.Client, e.Node = alias(e.Key), alias(e.App), alias(e.Op), alias(e.Client), alias(e.Node)
		}
		p.Process(&e, events[i].off, &out)
		if shared {
			for j := range scratch {
				scratch[j] = '#'
			}
		}
		write()
	}
	p.End(&out)
	write()
	return buf.Bytes()
}

// writeOutputs appends out's outputs to buf as JSON lines and resets it.
func writeOutputs(t *testing.T, buf *bytes.Buffer, out *Output) {
	for i := range out.HotKeys {
		b, err := out.HotKeys[i].AppendJSON(nil)
		require.NoError(t, err)
		buf.Write(append(b, '\n'))
	}
	for i := range out.Candidates {
		b, err := out.Candidates[i].AppendJSON(nil)
		require.NoError(t, err)
		buf.Write(append(b, '\n'))
	}
	for i := range out.Windows {
		b, err := out.Windows[i].AppendJSON(nil)
		require.NoError(t, err)
		buf.Write(append(b, '\n'))
	}
	out.Reset()
}
