package deploy_test

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/composefile"
)

// The files under test, relative to this package's folder.
const (
	composePath    = "../docker-compose.yml"
	dockerfilePath = "../Dockerfile"
	sharedConfig   = "keyheat.yaml"
)

func loadCompose(t *testing.T) *composefile.File {
	t.Helper()
	f, err := composefile.Load(composePath, nil) // no variable set: every ${VAR:-default} takes its default, as where only `docker compose up` was typed
	require.NoError(t, err)
	require.NotEmpty(t, f.Services, "%s has no services", composePath)
	return f
}

// keyheatCommand returns the config command a service runs (ingest or
// detect, by its command's first word), or "" for another image's service.
func keyheatCommand(s *composefile.Service) config.Command {
	if len(s.Command) == 0 {
		return ""
	}
	for _, c := range config.Commands() {
		if filepath.Base(s.Command[0]) == string(c) {
			return c
		}
	}
	return ""
}

func TestEveryServiceHasAnImageAndAHealthcheck(t *testing.T) {
	f := loadCompose(t)
	for _, name := range f.Names() {
		s := f.Services[name]
		if s.Image == "" && !s.Build {
			t.Errorf("service %s: neither image nor build", name)
		}
		if s.Image != "" && !s.Build && !pinned(s.Image) {
			t.Errorf("service %s: image %q is not pinned to a version tag or digest", name, s.Image)
		}
		switch h := s.Healthcheck; {
		case h == nil:
			t.Errorf("service %s: no healthcheck", name)
		case h.Disable || len(h.Test) < 2:
			t.Errorf("service %s: healthcheck disabled or empty: %q", name, h.Test)
		}
	}
}

// pinned reports whether image names a version (a tag with a digit that is
// not latest) or a digest.
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return false // no tag: latest
	}
	tag := image[i+1:]
	return tag != "latest" && strings.ContainsAny(tag, "0123456789")
}

func TestHostPortsAreUnique(t *testing.T) {
	f := loadCompose(t)
	type binding struct {
		service string
		port    composefile.Port
	}
	var seen []binding
	for _, name := range f.Names() {
		for _, p := range f.Services[name].Ports {
			if p.HostPort == 0 {
				continue // Docker picks a free one
			}
			for _, b := range seen {
				if b.port.HostPort == p.HostPort && b.port.Protocol == p.Protocol && sameHost(b.port.HostIP, p.HostIP) {
					t.Errorf("host port %d/%s is published twice: by %s (%s) and %s (%s)",
						p.HostPort, p.Protocol, b.service, b.port, name, p)
				}
			}
			seen = append(seen, binding{name, p})
		}
	}
}

// sameHost reports whether two host addresses of a published port can
// collide: they are equal, or either is every address.
func sameHost(a, b string) bool {
	any := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	return a == b || any(a) || any(b)
}

func TestDependenciesExistAndHaveNoCycle(t *testing.T) {
	f := loadCompose(t)
	conditions := []string{"service_started", "service_healthy", "service_completed_successfully"}
	for _, name := range f.Names() {
		for dep, cond := range f.Services[name].DependsOn {
			d, ok := f.Services[dep]
			switch {
			case !ok:
				t.Errorf("service %s depends on %s, which is not a service of %s", name, dep, composePath)
			case !slices.Contains(conditions, cond):
				t.Errorf("service %s: depends_on %s: condition %q is none of %q", name, dep, cond, conditions)
			case cond == "service_healthy" && d.Healthcheck == nil:
				t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
	// Depth-first, naming the first cycle found.
	state := map[string]int{} // 1: on the path, 2: done
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		switch state[name] {
		case 1:
			t.Errorf("depends_on cycle: %s", strings.Join(append(path, name), " -> "))
			return
		case 2:
			return
		}
		state[name] = 1
		if s, ok := f.Services[name]; ok {
			for _, dep := range slices.Sorted(mapKeys(s.DependsOn)) {
				visit(dep, append(path, name))
			}
		}
		state[name] = 2
	}
	for _, name := range f.Names() {
		visit(name, nil)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestKeyheatServices loads the configuration each ingest and detect
// service runs with, the way the command does, and checks the compose
// file against it. The commands' own flags (ingest gen's --hot, detect
// run's --exit-at-end) are parsed by the real command trees in the tests
// of cmd/ingest and cmd/detect (TestComposeServices).
func TestKeyheatServices(t *testing.T) {
	f := loadCompose(t)
	var ran []string
	for _, name := range f.Names() {
		s := f.Services[name]
		cmd := keyheatCommand(s)
		if cmd == "" {
			continue
		}
		ran = append(ran, name)
		t.Run(name, func(t *testing.T) {
			cfg := loadServiceConfig(t, f, s, cmd)
			checkEnvironment(t, s, cmd)
			checkListeners(t, s, cmd, cfg)
			if cmd == config.CmdDetect {
				checkArchive(t, f, s, cfg)
				if _, ok := s.Environment[config.EnvName("api.token")]; !ok {
					t.Errorf("service %s: no %s: the API token comes from the environment", s.Name, config.EnvName("api.token"))
				}
			}
		})
	}
	for _, c := range config.Commands() {
		found := slices.ContainsFunc(ran, func(n string) bool { return keyheatCommand(f.Services[n]) == c })
		require.True(t, found, "no service of %s runs %s", composePath, c)
	}
}

// loadServiceConfig checks that s names the shared config file with
// --config, mounted read-only from deploy/keyheat.yaml, and returns what
// config.Load makes of that file, the service's environment and the
// command's flags that are config keys.
func loadServiceConfig(t *testing.T, f *composefile.File, s *composefile.Service, cmd config.Command) *config.Config {
	t.Helper()
	fs := pflag.NewFlagSet(s.Name, pflag.ContinueOnError)
	config.AddFlags(fs, cmd)
	// The subcommand's own flags are the command tree's business (see
	// TestKeyheatServices); here only the config keys matter.
	fs.ParseErrorsAllowlist.UnknownFlags = true
	require.NoError(t, fs.Parse(s.Command[1:]), "service %s: command %q", s.Name, s.Command)
	inContainer, _ := fs.GetString("config")
	require.NotEmpty(t, inContainer, "service %s: command %q has no --config", s.Name, s.Command)
	onHost, readOnly, ok := f.HostPath(s, inContainer)
	require.True(t, ok, "service %s: --config=%s is not on a bind mount", s.Name, inContainer)
	require.True(t, readOnly, "service %s: --config=%s is mounted writable; mount it read_only", s.Name, inContainer)
	want, err := filepath.Abs(sharedConfig)
	require.NoError(t, err)
	got, err := filepath.Abs(onHost)
	require.NoError(t, err)
	require.Equal(t, want, got, "service %s: --config=%s is not the shared deploy/keyheat.yaml", s.Name, inContainer)

	cfg, err := config.Load(cmd, config.Source{File: onHost, Flags: fs, Environ: environ(s)})
	require.NoError(t, err, "service %s: %s does not accept its configuration", s.Name, cmd)
	return cfg
}

func environ(s *composefile.Service) []string {
	env := []string{} // not nil: nil would read this process's environment
	for k, v := range s.Environment {
		env = append(env, k+"="+v)
	}
	return env
}

// checkEnvironment: every variable of a keyheat service sets a key its
// command reads. config.Load accepts another command's key (one file and
// environment serve both), which would silently do nothing here.
func checkEnvironment(t *testing.T, s *composefile.Service, cmd config.Command) {
	t.Helper()
	reads := map[string]bool{}
	for _, k := range cmd.Keys() {
		reads[config.EnvName(k)] = true
	}
	for _, name := range slices.Sorted(mapKeys(s.Environment)) {
		if !reads[name] {
			t.Errorf("service %s: environment variable %s is not a key %s reads (%s --help lists them)", s.Name, name, cmd, cmd)
		}
	}
}

// checkListeners: the healthcheck asks /readyz on metrics.addr's port,
// and every published port is one the process listens on.
func checkListeners(t *testing.T, s *composefile.Service, cmd config.Command, cfg *config.Config) {
	t.Helper()
	metricsPort := portOf(t, s, "metrics.addr", cfg.Metrics.Addr)
	listens := map[int]string{metricsPort: "metrics.addr"}
	// The shared file sets api.addr for detect; ingest does not read it.
	if cmd.Reads("api.addr") && cfg.API.Addr != "" {
		listens[portOf(t, s, "api.addr", cfg.API.Addr)] = "api.addr"
	}
	want := fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort)
	if h := s.Healthcheck; h == nil || !slices.Contains(h.Test, want) {
		var test []string
		if h != nil {
			test = h.Test
		}
		t.Errorf("service %s: healthcheck %q does not ask %s (metrics.addr is %s)", s.Name, test, want, cfg.Metrics.Addr)
	}
	for _, p := range s.Ports {
		if _, ok := listens[p.ContainerPort]; !ok {
			t.Errorf("service %s: publishes container port %d, which neither metrics.addr (%s) nor api.addr (%s) listens on",
				s.Name, p.ContainerPort, cfg.Metrics.Addr, cfg.API.Addr)
		}
	}
	for port, key := range listens {
		if !slices.ContainsFunc(s.Ports, func(p composefile.Port) bool { return p.ContainerPort == port }) {
			t.Errorf("service %s: %s (port %d) is not published", s.Name, key, port)
		}
	}
}

func portOf(t *testing.T, s *composefile.Service, key, addr string) int {
	t.Helper()
	require.NotEmpty(t, addr, "service %s: %s is empty; the healthcheck and ports need it", s.Name, key)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, "service %s: %s", s.Name, key)
	if host == "127.0.0.1" || host == "localhost" {
		t.Errorf("service %s: %s=%s listens on the container's loopback only; published ports cannot reach it", s.Name, key, addr)
	}
	n, err := strconv.Atoi(port)
	require.NoError(t, err, "service %s: %s", s.Name, key)
	return n
}

// checkArchive: archive.root is a named volume, declared at the top level.
func checkArchive(t *testing.T, f *composefile.File, s *composefile.Service, cfg *config.Config) {
	t.Helper()
	root := cfg.Archive.Root
	if root == "" {
		t.Errorf("service %s: archive.root is empty", s.Name)
		return
	}
	i := slices.IndexFunc(s.Mounts, func(m composefile.Mount) bool { return filepath.Clean(m.Target) == filepath.Clean(root) })
	switch {
	case i < 0:
		t.Errorf("service %s: nothing is mounted at archive.root %s", s.Name, root)
	case s.Mounts[i].Type != "volume":
		t.Errorf("service %s: archive.root %s is a %s mount, not a named volume", s.Name, root, s.Mounts[i].Type)
	case s.Mounts[i].ReadOnly:
		t.Errorf("service %s: archive.root %s is mounted read-only", s.Name, root)
	case !slices.Contains(f.Volumes, s.Mounts[i].Source):
		t.Errorf("service %s: volume %s (archive.root) is not declared under volumes:", s.Name, s.Mounts[i].Source)
	}
}

// TestSharedConfigHoldsNoSecret: the token and passwords come from the
// environment, never from the file every service mounts.
func TestSharedConfigHoldsNoSecret(t *testing.T) {
	for _, cmd := range config.Commands() {
		cfg, err := config.Load(cmd, config.Source{File: sharedConfig, Environ: []string{}})
		require.NoError(t, err, "%s does not accept %s alone", cmd, sharedConfig)
		require.Empty(t, cfg.API.Token, "api.token is set in %s; set it with %s", sharedConfig, config.EnvName("api.token"))
		require.Empty(t, cfg.ClickHouse.Password, "clickhouse.password is set in %s", sharedConfig)
		require.Empty(t, cfg.Kafka.SASL.Password, "kafka.sasl.password is set in %s", sharedConfig)
	}
}

// TestDockerfile: the builder's Go is go.mod's, the image runs as a
// non-root user, and the healthchecks' tool is in it.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(dockerfilePath)
	require.NoError(t, err)
	df := string(b)
	gomod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(string(gomod))
	require.NotNil(t, goVersion, "no go line in go.mod")
	builder := regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?golang:([0-9.]+)\S*\s`).FindStringSubmatch(df)
	require.NotNil(t, builder, "%s: no FROM golang:VERSION stage", dockerfilePath)
	require.Equal(t, goVersion[1], builder[1], "%s builds with Go %s, go.mod says %s", dockerfilePath, builder[1], goVersion[1])

	stages := regexp.MustCompile(`(?m)^FROM\s.*$`).FindAllStringIndex(df, -1)
	final := df[stages[len(stages)-1][0]:]
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(final)
	require.NotNil(t, user, "%s: the final stage sets no USER", dockerfilePath)
	require.NotContains(t, []string{"root", "0", "0:0"}, user[1], "%s: the final stage runs as root", dockerfilePath)

	f := loadCompose(t)
	for _, name := range f.Names() {
		s := f.Services[name]
		if keyheatCommand(s) == "" || s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 {
			continue
		}
		tool := s.Healthcheck.Test[1]
		if strings.HasPrefix(tool, "/busybox/") {
			require.Regexp(t, `(?m)^FROM gcr\.io/distroless/\S+:debug`, final,
				"service %s: healthcheck runs %s, which only distroless' debug images have", name, tool)
		} else {
			t.Errorf("service %s: healthcheck runs %s; %s has no such tool (want /busybox/wget)", name, tool, dockerfilePath)
		}
	}
}

// TestKeyheatReachesKafka: every broker a keyheat service is given
// (kafka.brokers) is a service of the file, waited for until healthy, and
// one of the addresses that broker advertises on a listener it has:
// the broker's metadata answer sends clients to its advertised address,
// so a listener advertised as localhost, or the host's port, would send
// the containers away after the first request.
func TestKeyheatReachesKafka(t *testing.T) {
	f := loadCompose(t)
	for _, name := range f.Names() {
		s := f.Services[name]
		cmd := keyheatCommand(s)
		if cmd == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			cfg := loadServiceConfig(t, f, s, cmd)
			require.NotEmpty(t, cfg.Kafka.Brokers)
			for _, b := range cfg.Kafka.Brokers {
				host, _, err := net.SplitHostPort(b)
				require.NoError(t, err)
				k, ok := f.Services[host]
				if !ok {
					t.Errorf("service %s: kafka.brokers %s: %s is not a service of %s", name, b, host, composePath)
					continue
				}
				if s.DependsOn[host] != "service_healthy" {
					t.Errorf("service %s: does not wait for %s to be healthy (depends_on)", name, host)
				}
				advertised := listeners(k.Environment["KAFKA_ADVERTISED_LISTENERS"])
				bound := listeners(k.Environment["KAFKA_LISTENERS"])
				l, ok := advertised[b]
				if !ok {
					t.Errorf("service %s: kafka.brokers %s is none of the addresses %s advertises (KAFKA_ADVERTISED_LISTENERS=%q)",
						name, b, host, k.Environment["KAFKA_ADVERTISED_LISTENERS"])
					continue
				}
				_, port, _ := net.SplitHostPort(b)
				if bport, ok := listenerPort(bound, l); !ok || bport != port {
					t.Errorf("service %s: %s advertises %s as listener %s, which KAFKA_LISTENERS=%q does not bind on port %s",
						name, host, b, l, k.Environment["KAFKA_LISTENERS"], port)
				}
			}
		})
	}
}

// listeners maps each address of a Kafka listener list
// (NAME://host:port,…) to the listener's name.
func listeners(list string) map[string]string {
	m := map[string]string{}
	for l := range strings.SplitSeq(list, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(l), "://")
		if ok {
			m[addr] = name
		}
	}
	return m
}

func listenerPort(bound map[string]string, name string) (string, bool) {
	for addr, n := range bound {
		if n == name {
			_, port, err := net.SplitHostPort(addr)
			return port, err == nil
		}
	}
	return "", false
}

// TestDetectReachesClickHouse: each detect service's clickhouse section
// names the ClickHouse service of the file on its native port, with the
// user, database and password that the image's entrypoint creates from
// CLICKHOUSE_USER, CLICKHOUSE_DB and CLICKHOUSE_PASSWORD, whether
// KEYHEAT_CLICKHOUSE_PASSWORD is set on the host or not.
func TestDetectReachesClickHouse(t *testing.T) {
	for _, hostEnv := range [][]string{nil, {"KEYHEAT_CLICKHOUSE_PASSWORD=from-the-host"}} {
		f, err := composefile.Load(composePath, hostEnv)
		require.NoError(t, err)
		n := 0
		for _, name := range f.Names() {
			s := f.Services[name]
			if keyheatCommand(s) != config.CmdDetect {
				continue
			}
			n++
			cfg := loadServiceConfig(t, f, s, config.CmdDetect)
			if !cfg.ClickHouse.Enabled {
				continue
			}
			for _, a := range cfg.ClickHouse.Addr {
				host, port, err := net.SplitHostPort(a)
				require.NoError(t, err)
				ch, ok := f.Services[host]
				if !ok {
					t.Errorf("service %s: clickhouse.addr %s: %s is not a service of %s", name, a, host, composePath)
					continue
				}
				if port != "9000" {
					t.Errorf("service %s: clickhouse.addr %s: the image's native protocol is on 9000", name, a)
				}
				if s.DependsOn[host] != "service_healthy" {
					t.Errorf("service %s: does not wait for %s to be healthy (depends_on)", name, host)
				}
				env := ch.Environment
				user := cmp.Or(env["CLICKHOUSE_USER"], "default")
				require.Equal(t, user, cfg.ClickHouse.User, "service %s (host env %q): clickhouse.user is not %s's CLICKHOUSE_USER", name, hostEnv, host)
				require.Equal(t, env["CLICKHOUSE_PASSWORD"], cfg.ClickHouse.Password, "service %s (host env %q): the ClickHouse password differs from %s's CLICKHOUSE_PASSWORD", name, hostEnv, host)
				if db := env["CLICKHOUSE_DB"]; db != "" {
					require.Equal(t, db, cfg.ClickHouse.Database, "service %s: clickhouse.database is not %s's CLICKHOUSE_DB", name, host)
				}
			}
		}
		require.NotZero(t, n)
	}
}

// TestDockerfileBuildsWhatComposeRuns: every keyheat command a service
// runs is built by the Dockerfile's go build and copied into a folder on
// the final image's PATH (the services name it without a folder), and
// archive.root is made in the image owned by its USER: a named volume
// starts as a copy of the image's folder, owner included, and the
// non-root user must write there.
func TestDockerfileBuildsWhatComposeRuns(t *testing.T) {
	b, err := os.ReadFile(dockerfilePath)
	require.NoError(t, err)
	df := strings.ReplaceAll(string(b), "\\\n", " ") // one line per instruction
	stages := regexp.MustCompile(`(?m)^FROM\s.*$`).FindAllStringIndex(df, -1)
	final := df[stages[len(stages)-1][0]:]

	build := regexp.MustCompile(`(?m)^RUN .*\bgo build\b.*$`).FindString(df)
	require.NotEmpty(t, build, "%s: no RUN go build", dockerfilePath)
	out := regexp.MustCompile(`\s-o\s+(\S+)`).FindStringSubmatch(build)
	require.NotNil(t, out, "%s: go build has no -o", dockerfilePath)
	cp := regexp.MustCompile(`(?m)^COPY\s+--from=\S+\s+` + regexp.QuoteMeta(out[1]) + `\s+(\S+)\s*$`).FindStringSubmatch(final)
	require.NotNil(t, cp, "%s: the final stage does not copy %s (go build's -o)", dockerfilePath, out[1])
	onPath := []string{"/usr/local/bin", "/usr/bin", "/bin"} // distroless's PATH, /busybox aside
	require.Contains(t, onPath, strings.TrimSuffix(cp[1], "/"), "%s: the binaries go to %s, not on the image's PATH", dockerfilePath, cp[1])

	f := loadCompose(t)
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(final)
	require.NotNil(t, user)
	for _, name := range f.Names() {
		s := f.Services[name]
		cmd := keyheatCommand(s)
		if cmd == "" {
			continue
		}
		require.Regexp(t, `\s\./cmd/`+regexp.QuoteMeta(s.Command[0])+`(\s|$)`, build, "service %s runs %s, which %s does not build", name, s.Command[0], dockerfilePath)
		if cmd != config.CmdDetect {
			continue
		}
		cfg := loadServiceConfig(t, f, s, cmd)
		owned := false
		for _, m := range regexp.MustCompile(`(?m)^COPY\s+(?:--from=\S+\s+)?--chown=(\S+)\s+(\S+)\s+(\S+)\s*$`).FindAllStringSubmatch(final, -1) {
			// COPY src/ dst/ puts src's content in dst: dst/x for src/x.
			dst := filepath.Clean(m[3])
			rel, err := filepath.Rel(dst, cfg.Archive.Root)
			if m[1] != user[1] || err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			// The folder itself must be in what is copied.
			made := filepath.Join(m[2], rel)
			owned = regexp.MustCompile(`(?m)^RUN .*\bmkdir -p\s+(\S+\s+)*` + regexp.QuoteMeta(made) + `/?(\s|$)`).MatchString(df)
			require.True(t, owned, "%s: copies %s to %s owned by %s, but makes no %s for archive.root %s", dockerfilePath, m[2], m[3], m[1], made, cfg.Archive.Root)
		}
		require.True(t, owned, "service %s: archive.root %s is not made in the image owned by USER %s", name, cfg.Archive.Root, user[1])
	}
}
