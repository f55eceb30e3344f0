package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestRulesReloadEmptyFileKeepsRules: a config file emptied while detect
// runs (`: > keyheat.yaml`, an editor that truncates before it writes, a
// deploy that wrote nothing), or one that lost the pipeline.rules it had,
// loads without error, the default rule (1000/s) filling in; applied, it
// would stop every configured alert. The reload is refused instead: a key
// at 300/s under the 100/s rule in force is still alerted.
func TestRulesReloadEmptyFileKeepsRules(t *testing.T) {
	for _, tc := range []struct{ name, rewrite string }{
		{"emptied", ""},
		{"comments only", "# nothing yet\n"},
		{"rules section gone", "log:\n  level: info\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := testenv.KFake(t)
			e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 1))
			file := filepath.Join(t.TempDir(), "keyheat.yaml")
			require.NoError(t, os.WriteFile(file, []byte("pipeline:\n  rules: [{name: r, key: \"*\", window: 1s, rate: 100}]\n"), 0o600))
			p := start(t, nil, append([]string{"run", "--print=text", "--config=" + file}, e.flags()...)...)
			p.WaitStderr(`msg="partitions assigned"`)

			require.NoError(t, os.WriteFile(file, []byte(tc.rewrite), 0o600)) // rewritten in place
			p.WaitStderr(`msg="(rules reloaded|config file changed but refused)`)

			base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
			produceEvents(t, seeds, e.events, 300, base, 1, 1, 1) // "hot" 300 times in 0.3 s
			produceEvents(t, seeds, e.events, 10, base+5000, 1, 0, 10)
			p.WaitStdout(`REPORT cluster events=300 `)
			require.Equal(t, 0, p.Stop())
			require.NotContains(t, p.Stderr.String(), `msg="rules reloaded"`)
			require.Len(t, p.Stdout.Match(regexpOf(`HOT +app "hot" .*rule=r `)), 1,
				"the rewritten config file keeps the rules in force: the key is hot under rule r\nstderr:\n%s", p.Stderr.String())
		})
	}
}
