package controlplane_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
)

// A Topic other than the follower's is refused: changes written there
// would never show, not even on the server's own list.
func TestTopicMustBeTheFollowers(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	_, err := controlplane.New(controlplane.Config{Follower: f, Producer: r.cl, Token: token, Topic: r.topic + "-other"})
	require.ErrorContains(t, err, "is not the registry topic the Follower reads")
	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: r.cl, Token: token, Topic: r.topic})
	require.NoError(t, err)
	s.Close()
}
