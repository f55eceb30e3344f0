package schemas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWindowReportMergerFieldsRoundTrip(t *testing.T) {
	r := &WindowReport{Version: ReportVersion, ID: WindowReportID(ScopeCluster, "", 0), Scope: ScopeCluster,
		EndMs: 1000, Topics: []string{"t"}, Top: []KeyCount{}, Floor: 7,
		Skew: Skew{Nodes: []NodeLoad{
			{Node: "a", FirstSlot: 0, LastSlot: 16383, Ranges: []SlotRange{{First: 0, Last: 99}, {First: 200, Last: 16383}}, Events: 3, Share: 0.75},
			{Node: "b", FirstSlot: 100, LastSlot: 199, Events: 1, Share: 0.25},
		}},
		Advice: []KeyAdvice{{App: "shop", Key: "k", Rate: 20, Threshold: 10, ReadShare: 0.25,
			Mitigation: Mitigation{Kind: MitigationSplit, Split: 4}}}}
	b, err := r.AppendJSON(nil)
	require.NoError(t, err)
	require.Contains(t, string(b), `"floor":7`)
	require.Contains(t, string(b), `"ranges":[{"first":0,"last":99},{"first":200,"last":16383}]`)
	require.NotContains(t, string(b), `"ranges":null`, "a node with one range lists none")
	require.Contains(t, string(b), `"threshold":10`)
	got, err := DecodeWindowReport(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
}
