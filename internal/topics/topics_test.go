package topics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/internal/topics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnsure(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		require.NoError(t, err)
		defer cl.Close()
		adm := kadm.NewClient(cl)

		events := testenv.UniqueName(t, "ensure-events")
		registry := testenv.UniqueName(t, "ensure-registry")
		existing := testenv.NewTopic(t, seeds, 2)
		specs := []topics.Spec{
			{Name: events, Partitions: 3, ReplicationFactor: -1},
			{Name: registry, Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"cleanup.policy": "compact"}},
			{Name: existing, Partitions: 5, ReplicationFactor: -1},
		}

		err = topics.Ensure(ctx, cl, false, specs...)
		var me *topics.MissingError
		require.ErrorAs(t, err, &me)
		require.Equal(t, []string{events, registry}, me.Topics, "only the missing topics, in order")
		require.ErrorContains(t, err, "kafka.create_topics")

		require.NoError(t, topics.Ensure(ctx, cl, true, specs...))
		// A second client to check with: the first caches the metadata
		// it read before the topics existed for a few seconds.
		check, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		require.NoError(t, err)
		defer check.Close()
		adm = kadm.NewClient(check)
		tds, err := adm.ListTopics(ctx, events, registry, existing)
		require.NoError(t, err)
		require.Len(t, tds[events].Partitions, 3)
		require.Len(t, tds[registry].Partitions, 1)
		require.Len(t, tds[existing].Partitions, 2, "an existing topic is never changed")

		rc, err := adm.DescribeTopicConfigs(ctx, registry)
		require.NoError(t, err)
		cfg, err := rc.On(registry, nil)
		require.NoError(t, err)
		var policy string
		for _, c := range cfg.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		require.Equal(t, "compact", policy)

		// Idempotent, and the topics take records at once.
		require.NoError(t, topics.Ensure(ctx, check, true, specs...))
		require.NoError(t, topics.Ensure(ctx, check, false, specs...))
		res := cl.ProduceSync(ctx, &kgo.Record{Topic: events, Value: []byte("x")}, &kgo.Record{Topic: registry, Key: []byte("k"), Value: []byte("x")})
		require.NoError(t, res.FirstErr())

		for _, n := range []string{events, registry} {
			_, _ = adm.DeleteTopic(ctx, n)
		}
	})
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "": legal
	}{
		{"keyheat.events", ""},
		{"A-b_c.9", ""},
		{strings.Repeat("a", 249), ""},
		{"", "must not be empty"},
		{".", `"." is not a legal topic name`},
		{"..", `".." is not a legal topic name`},
		{strings.Repeat("a", 250), "250 characters; Kafka allows at most 249"},
		{"a b", `"a b" has ' '; Kafka allows only letters, digits, '.', '_' and '-'`},
		{"a/b", `"a/b" has '/'`},
		{"é", `"é" has 'é'`},
	} {
		err := topics.CheckName(tc.name)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}
