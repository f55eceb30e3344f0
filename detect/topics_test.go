package detect_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
)

// TestMissingInputTopicNotCreated: an events topic that does not exist (a
// typo in detect.topics) fails Run at start with an error naming it, even
// with CreateTopics, and is not created: detect creates only the topics
// it writes. Otherwise an --exit-at-end run reads the empty new topic and
// exits 0 having read nothing.
func TestMissingInputTopicNotCreated(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		cfg := e.config(t)
		typo := testenv.UniqueName(t, "typo")
		cfg.Options.Topics = []string{e.events, typo}
		cfg.ExitAtEnd = true
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		err = svc.Run(ctx)
		var me *detect.MissingInputError
		require.ErrorAs(t, err, &me)
		require.Equal(t, []string{typo}, me.Topics, "the error names the missing topic only")
		require.ErrorContains(t, err, "detect.topics")
		require.NotContains(t, err.Error(), "detect:", "the command adds its name; the error does not repeat it")

		td, err := e.admin(t).ListTopics(ctx, typo)
		require.NoError(t, err)
		require.False(t, td.Has(typo), "the input topic was not created")
	})
}

// TestRegexTopicsNothingMatches: with regex topics nothing is created or
// refused (a topic created later is picked up), but a warning says that
// nothing matches yet.
func TestRegexTopicsNothingMatches(t *testing.T) {
	seeds := testenv.KFake(t)
	e := newEnv(t, seeds, 1)
	cfg := e.config(t)
	cfg.Options.RegexTopics = true
	cfg.Options.Topics = []string{"^" + testenv.UniqueName(t, "nomatch") + "$"}
	var log testenv.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	r := start(t, cfg)
	testenv.Eventually(t, "the warning", func() bool { return strings.Contains(log.String(), "no kafka topic matches detect.topics") })
	require.NoError(t, r.stop(t))
}
