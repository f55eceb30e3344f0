package controlplane_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
)

func TestConfigValidate(t *testing.T) {
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(testenv.FreeAddr(t)))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	txn, err := kgo.NewClient(kgo.SeedBrokers(testenv.FreeAddr(t)), kgo.TransactionalID("tx"))
	require.NoError(t, err)
	t.Cleanup(txn.Close)
	ok := func() controlplane.Config { return controlplane.Config{Follower: f, Producer: cl} }
	for _, tc := range []struct {
		name string
		edit func(*controlplane.Config)
		want string // "" for valid
	}{
		{"zero extras", func(*controlplane.Config) {}, ""},
		{"everything", func(c *controlplane.Config) {
			c.Token, c.ProtectReads, c.MaxTTL, c.MaxKeyBytes, c.PublishTimeout = "tok", true, time.Hour, 4096, time.Second
		}, ""},
		{"no follower", func(c *controlplane.Config) { c.Follower = nil }, "Follower is nil"},
		{"no producer", func(c *controlplane.Config) { c.Producer = nil }, "Producer is nil"},
		{"transactional producer", func(c *controlplane.Config) { c.Producer = txn }, "transactional"},
		{"protect reads without token", func(c *controlplane.Config) { c.ProtectReads = true }, "ProtectReads needs a Token (api.token or api.token_file)"},
		{"token with a space", func(c *controlplane.Config) { c.Token = "a b" }, "visible ASCII"},
		{"negative MaxTTL", func(c *controlplane.Config) { c.MaxTTL = -time.Second }, "MaxTTL"},
		{"MaxTTL below MinTTL", func(c *controlplane.Config) { c.MaxTTL = time.Millisecond }, "MaxTTL"},
		{"negative MaxKeyBytes", func(c *controlplane.Config) { c.MaxKeyBytes = -1 }, "MaxKeyBytes"},
		{"negative PublishTimeout", func(c *controlplane.Config) { c.PublishTimeout = -1 }, "PublishTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				s, err := controlplane.New(c)
				require.NoError(t, err)
				s.Close()
				return
			}
			require.ErrorContains(t, err, tc.want)
			_, err = controlplane.New(c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	for _, tc := range []struct {
		name, value, file string
		want, err         string
	}{
		{name: "none"},
		{name: "value", value: "abc", want: "abc"},
		{name: "file with newline", file: write("nl", "abc\n"), want: "abc"},
		{name: "file with CRLF", file: write("crlf", "abc\r\n"), want: "abc"},
		{name: "file without newline", file: write("bare", "abc"), want: "abc"},
		{name: "every trailing line break trimmed", file: write("two", "abc\n\r\n"), want: "abc"},
		{name: "line break inside", file: write("inside", "abc\ndef\n"), err: "api.token_file"},
		{name: "both", value: "abc", file: write("both", "abc"), err: "api.token and api.token_file are both set"},
		{name: "empty file", file: write("empty", "\n"), err: "is empty"},
		{name: "missing file", file: filepath.Join(dir, "nope"), err: "api.token_file"},
		{name: "space in value", value: "ab c", err: "api.token: "},
		{name: "non-ASCII", value: "abcé", err: "visible ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := controlplane.LoadToken(tc.value, tc.file)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "abc", "an error must not quote the token")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
