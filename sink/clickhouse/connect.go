package clickhouse

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// dial opens a native-protocol connection pool to database (empty for
// the user's default database) and pings it. Native, not HTTP: ClickHouse
// 18.16 rejects the settings clickhouse-go sends over HTTP.
func dial(ctx context.Context, opts Options, database string) (driver.Conn, error) {
	conn, err := open(opts, database)
	if err != nil {
		return nil, err
	}
	if err := conn.Ping(ctx); err != nil {
		if r := refusal(opts, err); r != nil {
			return nil, errors.Join(r, conn.Close())
		}
		var ex *chgo.Exception
		if errors.As(err, &ex) { // the server answered: its own words say what is wrong
			return nil, errors.Join(fmt.Errorf("clickhouse %v: %w", opts.Addr, err), conn.Close())
		}
		return nil, errors.Join(fmt.Errorf("ping clickhouse %v (is it running, and is that its native port?): %w", opts.Addr, err),
			conn.Close())
	}
	return conn, nil
}

// OpenPool opens a native-protocol connection pool to opts.Database, as
// the sink's own, without contacting the server: a reader that must not
// fail at start when ClickHouse is down (the operator API's history)
// finds out query by query. The caller closes it.
func OpenPool(opts Options) (driver.Conn, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return open(opts, opts.Database)
}

func open(opts Options, database string) (driver.Conn, error) {
	conn, err := chgo.Open(&chgo.Options{
		Protocol: chgo.Native,
		Addr:     opts.Addr,
		Auth: chgo.Auth{
			Database: database,
			Username: opts.User,
			Password: opts.Password,
		},
		// tls.DialWithDialer reads the config, never writes it: one
		// config serves every connection of every pool.
		TLS:         opts.TLS,
		DialTimeout: opts.DialTimeout,
		// LZ4, as clickhouse-client uses by default: report rows are
		// repetitive text (ids, apps, keys), which LZ4 shrinks cheaply
		// on the way to a server across a network.
		Compression: &chgo.Compression{Method: chgo.CompressionLZ4},
	})
	if err != nil {
		return nil, fmt.Errorf("open clickhouse %v: %w", opts.Addr, err)
	}
	return conn, nil
}

// connect opens a pool whose default database is opts.Database, where the
// tables live and the documented queries, which name tables unqualified,
// run.
func connect(ctx context.Context, opts Options) (driver.Conn, error) {
	return dial(ctx, opts, opts.Database)
}

// ensureDatabase creates opts.Database when it is missing. It asks first,
// so a user allowed to use an existing database but not to create one
// gets through.
func ensureDatabase(ctx context.Context, opts Options) (err error) {
	conn, err := dial(ctx, opts, "")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = @db",
		chgo.Named("db", opts.Database)).Scan(&n); err != nil {
		return fmt.Errorf("look up clickhouse database %s: %w", opts.Database, err)
	}
	if n > 0 {
		return nil
	}
	// Database passed Validate: letters, digits and underscores only.
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS `"+opts.Database+"`"); err != nil {
		return fmt.Errorf("create clickhouse database %s: %w", opts.Database, err)
	}
	return nil
}

// ClickHouse error codes that say the server refused the user and
// password: 18.16 answers 192 and 193, later releases 516 for both.
const (
	codeUnknownUser          = 192
	codeWrongPassword        = 193
	codeAuthenticationFailed = 516
)

// RefusedError says that a ClickHouse server refused what Options
// presented: its TLS certificate is not trusted or not for the name
// dialed, TLS is on one side only, or it refused the user and password.
// Setting is the config key to fix (clickhouse.tls.ca_file,
// clickhouse.tls.server_name, clickhouse.tls.enabled,
// clickhouse.tls.cert_file, clickhouse.password); the error never holds
// the password. Open and Connect return it from their first contact, so
// a refusal fails a command at start instead of being retried like a
// server that is down.
type RefusedError struct {
	Setting string
	Problem string
	Err     error
}

func (e *RefusedError) Error() string { return e.Setting + ": " + e.Problem }

func (e *RefusedError) Unwrap() error { return e.Err }

// refusal turns err, the failure of a first ping, into the setting the
// server refused; nil when err is not a refusal (a server that is down
// or slow may come back, a refusal will not).
func refusal(opts Options, err error) *RefusedError {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		op        *net.OpError
		ex        *chgo.Exception
	)
	addr := strings.Join(opts.Addr, ",")
	ref := func(setting, problem string) *RefusedError {
		return &RefusedError{Setting: setting, Problem: problem, Err: err}
	}
	switch {
	case errors.As(err, &unknownCA):
		return ref("clickhouse.tls.ca_file", fmt.Sprintf("the certificate of clickhouse %s is signed by a CA that clickhouse.tls.ca_file "+
			"(or, unset, the system's CA pool) does not hold; set it to the PEM of the CA that signed it (%v)", addr, err))
	case errors.As(err, &hostname):
		return ref("clickhouse.tls.server_name", fmt.Sprintf("the certificate of clickhouse %s is not for the name checked; "+
			"set clickhouse.tls.server_name to a name it holds, or dial that name in clickhouse.addr (%v)", addr, err))
	case errors.As(err, &invalid):
		return ref("clickhouse.tls.ca_file", fmt.Sprintf("the certificate of clickhouse %s is not valid (%v)", addr, err))
	case errors.As(err, &record):
		return ref("clickhouse.tls.enabled", fmt.Sprintf("clickhouse %s does not speak TLS there; name its tcp_port_secure in clickhouse.addr, "+
			"or set clickhouse.tls.enabled: false for its plain tcp_port (%v)", addr, err))
	case errors.As(err, &op) && op.Op == "remote error":
		// With TLS agreed on, what is left for the server to refuse in
		// the handshake is our certificate.
		return ref("clickhouse.tls.cert_file", fmt.Sprintf("clickhouse %s refused the TLS connection (%v); "+
			"does it want a client certificate, in clickhouse.tls.cert_file and key_file?", addr, err))
	case errors.As(err, &ex) && (ex.Code == codeUnknownUser || ex.Code == codeWrongPassword || ex.Code == codeAuthenticationFailed):
		return ref("clickhouse.password", fmt.Sprintf("clickhouse %s refused user %q: check clickhouse.user and clickhouse.password "+
			"(or password_file) (code %d: %s)", addr, opts.User, ex.Code, ex.Message))
	case opts.TLS != nil && cutAtHandshake(err):
		// TLS 1.3 ends the handshake before the server checks the
		// client's certificate; a server that refuses it closes the
		// connection at our first packet instead of sending an alert.
		return ref("clickhouse.tls.cert_file", fmt.Sprintf("clickhouse %s closed the TLS connection at the first packet, as a server "+
			"does to a client without a certificate signed by a CA it trusts: set clickhouse.tls.cert_file and key_file (%v)", addr, err))
	case opts.TLS == nil && cutAtHandshake(err):
		return ref("clickhouse.tls.enabled", fmt.Sprintf("clickhouse %s closed the connection at the first packet, as its tcp_port_secure "+
			"does to a client without TLS: set clickhouse.tls.enabled: true, or name its plain tcp_port in clickhouse.addr (%v)", addr, err))
	}
	return nil
}

// cutAtHandshake reports whether err says the server closed the
// connection during clickhouse-go's protocol handshake, its first packet.
func cutAtHandshake(err error) bool {
	return strings.Contains(err.Error(), "handshake:") &&
		(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF))
}
