package pipeline

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestWindowSummariesHeldAcrossWindows holds every summary a partition
// hands out, as the producer and the merger do, while the partition goes
// on to windows of very different sizes (its buffers kept across them),
// and requires each unchanged at the end and no two sharing a list.
func TestWindowSummariesHeldAcrossWindows(t *testing.T) {
	for _, tc := range []struct {
		keyed     bool
		exactKeys int
	}{{true, 65_536}, {false, 65_536}, {true, 50}, {false, 0}} {
		t.Run("keyed="+strconv.FormatBool(tc.keyed)+"/exact="+strconv.Itoa(tc.exactKeys), func(t *testing.T) {
			o := DefaultOptions()
			o.Summary.ExactKeys = tc.exactKeys
			o.MaxApps = 3
			o.Summary.TopKeys = 20
			o.Summary.TopCapacity = 64
			o.Summary.TopWidth = 256
			o.Summary.BigKeys = 5
			o.Summary.BigCapacity = 16
			o.Summary.BigWidth = 64
			src := testSource
			src.Keyed = tc.keyed
			p := newPart(t, o, src, Start{})
			r := rand.New(rand.NewPCG(5, 6))
			apps := []string{"shop", "cart", "auth", "feed", "search"}
			type heldWin struct {
				w   schemas.PartitionWindow
				bin []byte
			}
			var held []heldWin
			var out Output
			hand := func() {
				for _, w := range out.Windows {
					held = append(held, heldWin{w: w, bin: w.AppendBinary(nil)})
				}
				out.Reset()
			}
			off := int64(0)
			for win := range 30 {
				n, keys := 3+r.IntN(10), 1+r.IntN(5)
				if win%4 == 0 {
					n, keys = 5000+r.IntN(5000), 2000
				}
				startMs := t0Ms + int64(win)*1000
				for i := range n {
					id := r.IntN(keys)
					op := "GET"
					if r.IntN(3) == 0 {
						op = "SET"
					}
					e := schemas.AccessEvent{TimeMs: startMs + int64(i*1000/n), Key: "user:" + strconv.Itoa(id),
						App: apps[id%len(apps)], Op: op, Bytes: int64(20 + id%300), LatencyUs: int64(50 + id%40)}
					p.Process(&e, off, &out)
					off++
					hand()
				}
			}
			p.End(&out)
			hand()
			require.Greater(t, len(held), 20)
			owner := map[*schemas.KeyCount]string{}
			for _, h := range held {
				require.Equal(t, string(h.bin), string(h.w.AppendBinary(nil)), "summary %s changed after it was handed out", h.w.ID)
				for ai := range h.w.Apps {
					a := &h.w.Apps[ai]
					for _, l := range [][]schemas.KeyCount{a.Top, a.Big, a.TopReads, a.TopWrites, a.TopLatency} {
						l = l[:cap(l)]
						for i := range l {
							if o, ok := owner[&l[i]]; ok && o != h.w.ID+"/"+a.App {
								t.Fatalf("summaries %s and %s/%s share a key list", o, h.w.ID, a.App)
							}
							owner[&l[i]] = h.w.ID + "/" + a.App
						}
					}
				}
			}
		})
	}
}
