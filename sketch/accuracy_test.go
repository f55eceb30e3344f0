package sketch

import (
	"cmp"
	"slices"
	"strconv"
	"testing"
)

// accuracyBudget is the memory the detection structures (top-K with its
// Count-Min filter) may use in the accuracy tests.
const accuracyBudget = 1 << 20

// accuracyCapacity is the tracked-key count used with the budget: 20× the
// reported top-100, leaving ~830 KiB for the filter (4 × 26,6xx counters).
const accuracyCapacity = 2048

type accuracyResult struct {
	recall       float64 // keys above 0.1 % share found in the reported top-100
	aboveShare   int     // how many keys are above 0.1 % share
	k            int     // precision depth: min(100, keys with share ≥ 0.01 %)
	precision    float64 // of the reported top-k, fraction whose true count ≥ the true k-th count
	top10MeanErr float64 // mean |Count − true| / true over the reported top-10
	top10MaxErr  float64
	top100Err    float64 // mean relative error over the reported top-k (k as for precision)
	bytes        int
	floor        uint64 // Floor(): bound on any untracked key's count
}

// runAccuracy feeds events of w into a TopK sized for accuracyBudget and
// compares its report with exact counts.
func runAccuracy(t testing.TB, w workload, events int) accuracyResult {
	t.Helper()
	cfg, err := TopKConfigForBudget(accuracyBudget, accuracyCapacity, 32)
	if err != nil {
		t.Fatal(err)
	}
	return runAccuracyWith(t, cfg, w, events, (*TopK).Add, true)
}

// runAccuracyWith is runAccuracy with the update rule swapped, so the
// benchmarks can measure alternative algorithms on the same data. With
// strict, a tracked key whose true count lies outside its bounds or a missed
// key above 0.1 % share fails t; without, they only lower the metrics.
func runAccuracyWith(t testing.TB, cfg TopKConfig, w workload, events int, add func(*TopK, string), strict bool) accuracyResult {
	t.Helper()
	tk, err := NewTopK(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]uint32, w.space)
	buf := make([]byte, 0, 32)
	for range events {
		id := w.gen()
		if id < w.space {
			counts[id]++
		}
		buf = appendKey(buf[:0], id)
		add(tk, string(buf))
	}
	trueCount := func(key string) uint64 {
		id, err := strconv.ParseUint(key[len("tenant-7:user:"):], 10, 64)
		if err != nil {
			t.Fatalf("reported key %q is not one we generated", key)
		}
		if id >= w.space {
			return 1
		}
		return uint64(counts[id])
	}

	n := uint64(events)
	// The keys that matter: share ≥ 0.01 % (count ≥ N/10⁴), heaviest first.
	// Below that a workload's "true top-100" is decided by sampling noise
	// among millions of near-equal keys (the uniform tail at ~2 events per
	// key, the flood's count-1 keys), which no 1 MiB structure can rank and
	// no detector needs to.
	type kc struct {
		id    uint64
		count uint64
	}
	var sig []kc
	for id, c := range counts {
		if uint64(c)*10_000 >= n {
			sig = append(sig, kc{uint64(id), uint64(c)})
		}
	}
	slices.SortFunc(sig, func(a, b kc) int { return cmp.Compare(b.count, a.count) })

	var res accuracyResult
	res.bytes = tk.Bytes()
	res.floor = tk.Floor()
	top100 := tk.Top(100)
	reported := make(map[string]Item, len(top100))
	for _, it := range top100 {
		reported[it.Key] = it
	}
	// Every reported key's true count must lie inside its bounds: that is a
	// guarantee, not a statistic.
	for _, it := range tk.Top(tk.Len()) {
		if !strict {
			break
		}
		if tc := trueCount(it.Key); tc > it.Count || tc < it.Count-it.Error {
			t.Errorf("%s: key %s true count %d outside reported [%d, %d]", w.name, it.Key, tc, it.Count-it.Error, it.Count)
		}
	}

	found := 0
	for _, s := range sig {
		if s.count*1000 <= n {
			continue
		}
		res.aboveShare++
		if _, ok := reported[keyOf(s.id)]; ok {
			found++
		} else if strict {
			t.Errorf("%s: key id %d with share %.3f%% missing from the top-100", w.name, s.id, 100*float64(s.count)/float64(n))
		}
	}
	res.recall = 1
	if res.aboveShare > 0 {
		res.recall = float64(found) / float64(res.aboveShare)
	}

	// Precision at k. A reported key counts as correct when its true count
	// is at least the true k-th count, so keys tied with the k-th key are
	// all acceptable answers.
	res.k = min(100, len(sig))
	if res.k > 0 {
		kth := sig[res.k-1].count
		correct := 0
		for _, it := range top100[:min(res.k, len(top100))] {
			if trueCount(it.Key) >= kth {
				correct++
			}
		}
		res.precision = float64(correct) / float64(res.k)
	}

	for _, it := range top100[:min(res.k, len(top100))] {
		tc := float64(trueCount(it.Key))
		res.top100Err += (float64(it.Count) - tc) / tc / float64(res.k)
	}
	for _, it := range top100[:min(10, len(top100))] {
		tc := float64(trueCount(it.Key))
		e := (float64(it.Count) - tc) / tc
		res.top10MeanErr += e / 10
		res.top10MaxErr = max(res.top10MaxErr, e)
	}
	return res
}

func TestAccuracyAt1MiB(t *testing.T) {
	events := eventsForTest(testing.Short())
	for _, w := range []workload{zipfWorkload(42), plantedWorkload(42), floodWorkload(42)} {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			r := runAccuracy(t, w, events)
			t.Logf("%s, %d events, %d B: recall(>0.1%% share) %.4f of %d keys; precision@%d %.4f; top-10 relative count error mean %.5f%% max %.5f%%; top-%d mean %.5f%%; floor %d (%.4f%% of N)",
				w.name, events, r.bytes, r.recall, r.aboveShare, r.k, r.precision, 100*r.top10MeanErr, 100*r.top10MaxErr,
				r.k, 100*r.top100Err, r.floor, 100*float64(r.floor)/float64(events))
			if r.bytes > accuracyBudget {
				t.Errorf("structures use %d bytes, over the %d budget", r.bytes, accuracyBudget)
			}
			if r.recall != 1 {
				t.Errorf("recall of keys above 0.1%% share is %.4f, want 1", r.recall)
			}
			if r.precision < 0.99 {
				t.Errorf("precision@%d is %.4f, want ≥ 0.99", r.k, r.precision)
			}
			if r.k == 0 {
				t.Errorf("workload has no key above 0.01%% share; the generator is broken")
			}
		})
	}
}
