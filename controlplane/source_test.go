package controlplane_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane/chsource"
	"github.com/keyheat/keyheat/internal/testenv"
)

// brokenSource is a ClickHouse source whose database does not exist:
// every query fails.
func brokenSource(t *testing.T) *chsource.Source {
	t.Helper()
	src, err := chsource.New(chsource.Config{Conn: testenv.ClickHouseConn(t), Database: testenv.UniqueName(t, "missing")})
	require.NoError(t, err)
	return src
}
