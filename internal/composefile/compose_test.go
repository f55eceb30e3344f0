package composefile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/composefile"
)

func write(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "compose.yml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// TestLoadForms: the short and long forms of ports, volumes, environment
// and depends_on read alike, relative bind sources resolve against the
// file's folder, and ${VAR} forms take the environment given, or their
// defaults.
func TestLoadForms(t *testing.T) {
	path := write(t, `
services:
  a:
    image: ${IMAGE:-example/a:1}
    command: ["run", "--x=1"]
    environment:
      KEY: value
      EMPTY: ""
    ports:
      - "127.0.0.1:8081:8080"
      - "9101:9100/udp"
      - target: 7000
        published: "7001"
    volumes:
      - ./conf:/etc/app:ro
      - data:/var/lib/app
    healthcheck:
      test: ["CMD", "wget", "-q", "-O-", "http://127.0.0.1:9100/readyz"]
  b:
    build: .
    command: serve --port 1
    environment:
      - A=1
      - B=two=2
    depends_on:
      a:
        condition: service_healthy
volumes:
  data: {}
`)
	f, err := composefile.Load(path, []string{"IMAGE=example/a:2"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, f.Names())
	require.Equal(t, []string{"data"}, f.Volumes)

	a := f.Services["a"]
	require.Equal(t, "example/a:2", a.Image)
	require.False(t, a.Build)
	require.Equal(t, []string{"run", "--x=1"}, a.Command)
	require.Equal(t, map[string]string{"KEY": "value", "EMPTY": ""}, a.Environment)
	require.ElementsMatch(t, []composefile.Port{
		{HostIP: "127.0.0.1", HostPort: 8081, ContainerPort: 8080, Protocol: "tcp"},
		{HostPort: 9101, ContainerPort: 9100, Protocol: "udp"},
		{HostPort: 7001, ContainerPort: 7000, Protocol: "tcp"},
	}, a.Ports)
	require.Equal(t, []string{"CMD", "wget", "-q", "-O-", "http://127.0.0.1:9100/readyz"}, a.Healthcheck.Test)
	require.False(t, a.Healthcheck.Disable)

	host, ro, ok := f.HostPath(a, "/etc/app/keyheat.yaml")
	require.True(t, ok)
	require.True(t, ro)
	require.Equal(t, filepath.Join(filepath.Dir(path), "conf", "keyheat.yaml"), host)
	_, _, ok = f.HostPath(a, "/var/lib/app/x") // a named volume, not a bind
	require.False(t, ok)
	_, _, ok = f.HostPath(a, "/etc/application")
	require.False(t, ok, "a sibling folder sharing the target's prefix is not under it")

	b := f.Services["b"]
	require.True(t, b.Build)
	require.Equal(t, []string{"serve", "--port", "1"}, b.Command)
	require.Equal(t, map[string]string{"A": "1", "B": "two=2"}, b.Environment)
	require.Equal(t, map[string]string{"a": "service_healthy"}, b.DependsOn)

	f, err = composefile.Load(path, nil)
	require.NoError(t, err)
	require.Equal(t, "example/a:1", f.Services["a"].Image, "the default when the variable is unset")
}

// TestLoadRefuses: what Compose refuses is refused here, with the reason.
func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"misspelt key", "services:\n  a:\n    image: x\n    healtcheck:\n      test: [\"NONE\"]\n", "healtcheck"},
		{"required variable", "services:\n  a:\n    image: ${IMAGE:?set IMAGE}\n", "set IMAGE"},
		{"not a port", "services:\n  a:\n    image: x\n    ports: [\"web:80\"]\n", "web"},
		{"undefined dependency", "services:\n  a:\n    image: x\n    depends_on: [b]\n", "undefined service"},
		{"undefined volume", "services:\n  a:\n    image: x\n    volumes: [\"data:/d\"]\n", "undefined volume"},
		{"not yaml", "services: [\n", "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := composefile.Load(write(t, tc.text), nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
