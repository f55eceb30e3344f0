package controlplane_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDashboardTenThousandKeys: with 10,000 keys the page renders, the
// table scrolls to the last key, and the DOM holds a screenful of rows,
// not 10,000. It logs how long the first paint and the first full read
// took (figures, not assertions).
func TestDashboardTenThousandKeys(t *testing.T) {
	const n = 10_000
	s := newSite(t)
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		recs = append(recs, bulkHot("bulk", fmt.Sprintf("k%05d", i), float64(i+2)))
	}
	s.reg.produce(recs...)
	s.reg.barrier(s.f)

	b := newTab(t, 1400, 900)
	b.open(s.url)
	// The keys and the barrier's, counted as the page writes numbers.
	b.WaitFor("10,000 keys", fmt.Sprintf(`document.getElementById('counts').textContent.includes(new Intl.NumberFormat('en').format(%d) + ' detector')`,
		n+int(s.reg.partitions)))
	type mark struct {
		StartTime float64 `json:"startTime"`
		Entries   int     `json:"entries"`
		ReadMs    float64 `json:"readMs"`
		RenderMs  float64 `json:"renderMs"`
	}
	fcp := eval[float64](b, `performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1`)
	first := eval[mark](b, `(() => { const m = performance.getEntriesByName('keyheat:first-data')[0];
		return {startTime: m.startTime, ...m.detail}; })()`)
	t.Logf("first contentful paint %.0f ms after navigation; first read of the registry shown at %.0f ms (%d entries: read %.0f ms, render %.0f ms)",
		fcp, first.StartTime, first.Entries, first.ReadMs, first.RenderMs)
	// A later read with all of them: the page's own measure of its last
	// apply and render.
	b.WaitFor("a later read of all the keys", fmt.Sprintf(`(() => { const m = performance.getEntriesByName('keyheat:render')[0];
		return m.detail.entries >= %d && m.startTime > %f; })()`, n, first.StartTime))
	render := eval[mark](b, `(() => { const m = performance.getEntriesByName('keyheat:render')[0];
		return {startTime: m.duration, ...m.detail}; })()`)
	t.Logf("the last read of %d entries: applied and rendered in %.0f ms; status line: %s", render.Entries, render.StartTime, b.status())

	rowsInDOM := `document.querySelectorAll('#hk-scroll .hk-row').length`
	require.Less(t, eval[int](b, rowsInDOM), 200, "the table is virtualised")
	require.Equal(t, n*24+int(s.reg.partitions)*24, eval[int](b, `document.getElementById('hk-spacer').offsetHeight`), "the scroll height covers every row")

	// Sorted by key, the last is k09999.
	b.Run(chromedp.Click(chromedp.CSS(`.thead [data-sort="key"]`), chromedp.NodeVisible))
	b.WaitFor("sorted by key", `document.querySelector('.thead [data-sort="key"]').dataset.dir === 'asc'`)
	eval[chromedp.Void](b, `(() => { const s = document.getElementById('hk-scroll'); s.scrollTop = s.scrollHeight; })()`)
	b.WaitFor("the last key", hasRow("bulk", fmt.Sprintf("k%05d", n-1), ""))
	require.Less(t, eval[int](b, rowsInDOM), 200, "still virtualised at the bottom")
	// And half way down, the keys around the middle.
	eval[chromedp.Void](b, `(() => { const s = document.getElementById('hk-scroll'); s.scrollTop = s.scrollHeight / 2; })()`)
	b.WaitFor("a key in the middle", `!`+hasRow("bulk", fmt.Sprintf("k%05d", n-1), "")+` && `+rowsJS+`.some(r => r.key === 'k04990')`)
	require.Less(t, eval[int](b, rowsInDOM), 200)
	b.NoProblems()
}
