package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestRulesReloadEmptyFileKeepsRules (review-2, finding 3): a config file
// emptied while detect runs (`: > keyheat.yaml`, an editor that truncates
// before it writes, a deploy that wrote nothing) names no rules; it must
// not silently replace the rules in force with the default rule (rate
// 1000/s), which stops every configured alert. Today it is logged as
// "rules reloaded" and a key at 300/s under a 100/s rule is not alerted.
func TestRulesReloadEmptyFileKeepsRules(t *testing.T) {
	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 1))
	file := filepath.Join(t.TempDir(), "keyheat.yaml")
	require.NoError(t, os.WriteFile(file, []byte("pipeline:\n  rules: [{name: r, key: \"*\", window: 1s, rate: 100}]\n"), 0o600))
	p := start(t, nil, append([]string{"run", "--print=text", "--config=" + file}, e.flags()...)...)
	p.waitErr(`msg="partitions assigned"`, time.Minute)

	require.NoError(t, os.WriteFile(file, nil, 0o600)) // truncated in place
	p.waitErr(`msg="(rules reloaded|config file changed but refused)`, time.Minute)

	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	produceEvents(t, seeds, e.events, 300, base, 1, 1, 1) // "hot" 300 times in 0.3 s
	produceEvents(t, seeds, e.events, 10, base+5000, 1, 0, 10)
	p.waitOut(`REPORT cluster events=300 `, time.Minute)
	require.Equal(t, 0, p.stop(time.Minute))
	require.Len(t, p.stdout.match(regexpOf(`HOT +app "hot" .*rule=r `)), 1,
		"an emptied config file keeps the rules in force: the key is hot under rule r\nstderr:\n%s", p.stderr.String())
}
