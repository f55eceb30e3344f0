package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// SecureClickHouseOptions say how strict a [SecureClickHouse] is.
type SecureClickHouseOptions struct {
	// RequireClientCert makes the server refuse a TLS client without a
	// certificate signed by the test CA (mutual TLS).
	RequireClientCert bool
}

// SecureClickHouse is a ClickHouse server of a test's own whose native
// port speaks TLS, with a certificate from a CA the test made, and whose
// one user has a password.
type SecureClickHouse struct {
	// Addr is the TLS native port (tcp_port_secure), 127.0.0.1:port.
	Addr string
	// PlainAddr is the same server's plain native port (tcp_port).
	PlainAddr string
	// Certs are the CA, server and client certificates; Certs.ServerName
	// is a name the server certificate holds.
	Certs *TestCerts
	// User and Password are the server's one user; the password is random
	// per server, so a test can look for it in a program's output.
	User, Password string
}

// PrivateClickHouseTLS starts a ClickHouse server of the test's own on
// 127.0.0.1, on ports the kernel found free (outside the fixed ranges of
// scripts/services.sh), with the packaged config.xml and these overrides:
// tcp_port_secure with a server certificate NewTestCerts made, and a
// users.xml whose one user, keyheat, has a random password. It returns
// once a TLS client authenticated as that user is answered, and stops
// the server (TERM, then KILL) and removes its data when the test ends.
// Like [PrivateClickHouse] it skips the test when KEYHEAT_TEST_CLICKHOUSE
// is unset (fails under CI=true): a machine with the shared server has
// the clickhouse-server binary this one runs.
func PrivateClickHouseTLS(t testing.TB, o SecureClickHouseOptions) *SecureClickHouse {
	t.Helper()
	Require(t, EnvClickHouse)
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		t.Fatalf("clickhouse-server: %v (scripts/services.sh up installs it)", err)
	}
	s := &SecureClickHouse{Certs: NewTestCerts(t, "clickhouse.keyheat.test"), User: "keyheat", Password: randomHex(16)}
	dir := t.TempDir()
	users := filepath.Join(dir, "users.xml")
	if err := os.WriteFile(users, []byte(usersXML(s.User, s.Password)), 0o600); err != nil {
		t.Fatalf("write %s: %v", users, err)
	}
	// A port found free may be taken before the server binds it; a server
	// that exits during start is tried again on other ports.
	for attempt := 1; ; attempt++ {
		ports := FreePorts(t, 4)
		s.PlainAddr = "127.0.0.1:" + strconv.Itoa(ports[0])
		s.Addr = "127.0.0.1:" + strconv.Itoa(ports[1])
		data := filepath.Join(dir, fmt.Sprintf("run%d", attempt))
		args := []string{"--config-file=/etc/clickhouse-server/config.xml", "--",
			"--path=" + data + "/data/", "--tmp_path=" + data + "/tmp/",
			"--user_files_path=" + data + "/user_files/", "--format_schema_path=" + data + "/format_schemas/",
			"--listen_host=127.0.0.1",
			"--tcp_port=" + strconv.Itoa(ports[0]), "--tcp_port_secure=" + strconv.Itoa(ports[1]),
			"--http_port=" + strconv.Itoa(ports[2]), "--interserver_http_port=" + strconv.Itoa(ports[3]),
			"--openSSL.server.certificateFile=" + s.Certs.ServerCertFile,
			"--openSSL.server.privateKeyFile=" + s.Certs.ServerKeyFile,
			// The packaged file names a DH parameters file that is not
			// installed; empty uses OpenSSL's built-in groups.
			"--openSSL.server.dhParamsFile=",
			"--users_config=" + users,
			"--logger.log=" + data + "/server.log", "--logger.errorlog=" + data + "/server.err.log",
		}
		if o.RequireClientCert {
			args = append(args, "--openSSL.server.verificationMode=strict", "--openSSL.server.caConfig="+s.Certs.CAFile,
				"--openSSL.server.loadDefaultCAFile=false")
		}
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatalf("make %s: %v", data, err)
		}
		out, err := os.Create(filepath.Join(data, "stdout.log"))
		if err != nil {
			t.Fatalf("server output: %v", err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start clickhouse-server: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); _ = out.Close(); close(exited) }()
		t.Cleanup(func() { stopServer(t, cmd, exited) })
		err = s.waitReady(t, exited)
		if err == nil {
			return s
		}
		logs, _ := os.ReadFile(filepath.Join(data, "server.err.log"))
		if attempt == 3 || !errors.Is(err, errServerExited) {
			t.Fatalf("private TLS clickhouse on %s: %v\n%s", s.Addr, err, tail(string(logs), 3000))
		}
		t.Logf("private TLS clickhouse exited during start (a port taken?), trying other ports:\n%s", tail(string(logs), 1000))
	}
}

var errServerExited = errors.New("the server exited during start")

// waitReady waits until the server answers a TLS client as its user; a
// start takes a few seconds, longer on a loaded machine.
func (s *SecureClickHouse) waitReady(t testing.TB, exited <-chan struct{}) error {
	t.Helper()
	guard := time.After(3 * time.Minute) // hang guard only
	var last error
	for {
		conn, err := s.dial()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = conn.Ping(ctx)
			cancel()
			_ = conn.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-exited:
			return errServerExited
		case <-guard:
			return fmt.Errorf("no answer over TLS: %w", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *SecureClickHouse) dial() (driver.Conn, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.Certs.Pool}
	cert, err := tls.LoadX509KeyPair(s.Certs.CertFile, s.Certs.KeyFile)
	if err != nil {
		return nil, err
	}
	tc.Certificates = []tls.Certificate{cert}
	return clickhouse.Open(&clickhouse.Options{Protocol: clickhouse.Native, Addr: []string{s.Addr},
		Auth: clickhouse.Auth{Username: s.User, Password: s.Password}, TLS: tc, DialTimeout: 10 * time.Second})
}

// Conn returns a connection pool to the server over TLS as its user,
// with the client certificate, closed when the test ends: what a test
// uses to look at what a program wrote.
func (s *SecureClickHouse) Conn(t testing.TB) driver.Conn {
	t.Helper()
	conn, err := s.dial()
	if err != nil {
		t.Fatalf("open the private TLS clickhouse: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// stopServer ends the server's process group with TERM, and KILL after
// half a minute.
func stopServer(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Logf("clickhouse-server pid %d did not stop on TERM in 30s; killing it", cmd.Process.Pid)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// usersXML is a users.xml (ClickHouse 18.16's format) with one user,
// allowed from anywhere, with the default profile and no quota limit.
func usersXML(user, password string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	return `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default></default>
    </profiles>
    <users>
        <` + user + `>
            <password>` + r.Replace(password) + `</password>
            <networks><ip>::/0</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </` + user + `>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`
}
