package hotkeys

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnumsAsText(t *testing.T) {
	type doc struct {
		Source     Source     `json:"source"`
		Mitigation Mitigation `json:"mitigation"`
		Status     Status     `json:"status"`
	}
	for _, d := range []doc{
		{SourceDetector, MitigationLocalCache, StatusHot},
		{SourceManual, MitigationSplit, StatusCooled},
		{SourceManual, MitigationCoalesce, StatusExpired},
		{SourceDetector, MitigationNone, StatusHot},
	} {
		b, err := json.Marshal(d)
		require.NoError(t, err)
		require.Contains(t, string(b), `"`+d.Mitigation.String()+`"`)
		var got doc
		require.NoError(t, json.Unmarshal(b, &got), "%s", b)
		require.Equal(t, d, got)
	}
	var m Mitigation
	err := json.Unmarshal([]byte(`"shard"`), &m)
	require.ErrorContains(t, err, `mitigation "shard", want one of none, local_cache, split, coalesce`)
	var s Source
	require.Error(t, json.Unmarshal([]byte(`"unknown"`), &s), "String's fallback is not a value")
}
