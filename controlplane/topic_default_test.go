package controlplane_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
)

// TestTopicDefaultIgnoresFollower: with Topic left empty, the server
// writes to the topic its follower reads, not to hotkeys.DefaultTopic: a
// promote written where no follower of this registry reads (a cluster
// shared with another deployment) would be answered 201 and never
// applied.
func TestTopicDefaultIgnoresFollower(t *testing.T) {
	r := newRegistry(t, 1) // the registry this process follows, not named keyheat.hotkeys
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := kadm.NewClient(r.cl).CreateTopic(ctx, 1, 1, nil, hotkeys.DefaultTopic)
	require.NoError(t, err)
	f := r.follower()

	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: r.cl, Token: token})
	if err != nil {
		t.Logf("New refuses a Topic other than the follower's: %v", err)
		return
	}
	t.Cleanup(s.Close)
	rec := httpRecord(s, "POST", "/api/hotkeys/product:42/promote",
		promoteBody(t, controlplane.PromoteRequest{App: "shop", Mitigation: "coalesce", TTL: "10m"}), token)
	require.Equal(t, http.StatusCreated, rec.Code, "%s", rec.Body)
	pub := decode[controlplane.Published](t, rec.Body.Bytes())
	require.Equal(t, r.topic, pub.Topic, "the promote was written to a topic the server's own follower does not read")
}
