package onsetbench_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReportOnset runs a shorter campaign at detect's defaults on the real
// broker (kfake when KEYHEAT_TEST_KAFKA is unset, outside CI) and checks
// what must hold however slow the machine: every planted key is reported
// hot by the follower's OnChange while IsHot says so, each stage of its
// path comes after the one before, and no background key is reported
// hot. It logs the figures; they are not checked (the benchmark is where
// they are measured).
func TestReportOnset(t *testing.T) {
	br := defaultBroker()
	seeds := br.seeds(t)
	p := benchPlan
	p.onsets, p.every = 30, 700*time.Millisecond
	c := newCampaign(t, p)
	c.run(seeds, defaults)
	ss := c.samples()
	require.Len(t, ss, p.onsets)
	require.Empty(t, c.strays(), "background keys reported hot")
	t.Logf("%s; %s\n%s", c.describe(br, seeds, defaults), c.crossings(ss), c.report(ss))
}
