package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientOpts returns the franz-go options that connect to k's brokers with
// its client id, SASL and TLS. Callers append their own producer or
// consumer options.
func (k *Kafka) ClientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.Brokers...),
		kgo.ClientID(k.ClientID),
	}
	if k.TLS.Enabled {
		tc, err := k.TLS.config("kafka.tls")
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := k.SASL.Mechanism; m != "" {
		i := slices.IndexFunc(saslMechanisms(), func(s saslMechanism) bool { return s.name == m })
		if i < 0 {
			return nil, &FieldError{Key: "kafka.sasl.mechanism", Problem: fmt.Sprintf("%q is not supported", m)}
		}
		opts = append(opts, kgo.SASL(saslMechanisms()[i].auth(k.SASL.User, k.SASL.Password)))
	}
	return opts, nil
}

type saslMechanism struct {
	name string
	auth func(user, pass string) sasl.Mechanism
}

// saslMechanisms are the SASL mechanisms by the name kafka.sasl.mechanism
// gives them.
func saslMechanisms() []saslMechanism {
	return []saslMechanism{
		{"plain", func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() }},
		{"scram-sha-256", func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }},
		{"scram-sha-512", func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }},
	}
}

// SASLMechanisms are the values kafka.sasl.mechanism accepts besides
// empty (no SASL).
func SASLMechanisms() []string {
	var names []string
	for _, m := range saslMechanisms() {
		names = append(names, m.name)
	}
	return names
}

// config builds the tls.Config t describes; its errors name the keys
// under section (kafka.tls, clickhouse.tls).
func (t *TLS) config(section string) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as tests only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &FieldError{Key: section + ".ca_file", Problem: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &FieldError{Key: section + ".ca_file", Problem: t.CAFile + " holds no PEM certificate"}
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &FieldError{Key: section + ".cert_file", Problem: fmt.Sprintf("cert_file and key_file: %v", err)}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// CheckAccess asks the brokers once, with k's TLS and SASL settings, for
// their API versions, trying each seed broker at most once. It returns nil
// when one answers, and a *FieldError naming the setting to fix when the
// brokers refuse what k presents: a certificate signed by a CA that
// kafka.tls.ca_file does not hold, a name kafka.tls.server_name does not
// match, a missing or refused client certificate, TLS on one side only, a
// SASL mechanism they do not offer or SASL on a listener without it, or a
// user and password they reject. Any other failure (no broker reachable,
// ctx done) is returned as it is: a broker that is down may come back, a
// refusal will not. The errors never hold the password.
//
// Commands call it at start, so that a wrong password fails at once
// instead of being waited on like a broker that is away.
func (k *Kafka) CheckAccess(ctx context.Context) error {
	opts, err := k.ClientOpts()
	if err != nil {
		return err
	}
	var h saslReadHook
	cl, err := kgo.NewClient(append(opts, kgo.WithHooks(&h), kgo.DialTimeout(10*time.Second))...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	err = cl.Ping(ctx)
	if err == nil {
		return nil
	}
	if fe := k.refusal(err, h.failed()); fe != nil {
		return fe
	}
	return err
}

// saslReadHook notes a connection that the brokers closed while a
// SASLAuthenticate answer was awaited: brokers before Kafka 1.0 (and
// kfake) close the connection on a wrong password instead of answering
// SASL_AUTHENTICATION_FAILED. A read that timed out is not noted: a
// broker slow to answer refused nothing.
type saslReadHook struct {
	mu  sync.Mutex
	err error
}

func (h *saslReadHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.SASLAuthenticate.Int16() && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
	}
}

func (h *saslReadHook) failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err != nil
}

// refusal turns err, the failure of a first request, into the setting the
// brokers refused; nil when err is not a refusal. saslCut says a
// connection ended in the middle of SASL authentication.
func (k *Kafka) refusal(err error, saslCut bool) *FieldError {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		firstRead *kgo.ErrFirstReadEOF
		ke        *kerr.Error
		op        *net.OpError
	)
	ca := "the system's CA pool"
	if k.TLS.CAFile != "" {
		ca = k.TLS.CAFile
	}
	user := fmt.Sprintf("user %q with %s", k.SASL.User, k.SASL.Mechanism)
	switch {
	case errors.As(err, &unknownCA):
		return &FieldError{Key: "kafka.tls.ca_file", Problem: fmt.Sprintf(
			"the brokers' certificate is signed by a CA that %s does not hold; set kafka.tls.ca_file to the PEM of the CA that signed it (%v)", ca, err)}
	case errors.As(err, &hostname):
		return &FieldError{Key: "kafka.tls.server_name", Problem: fmt.Sprintf(
			"the brokers' certificate is not for the name dialed; set kafka.tls.server_name to a name it holds (%v)", err)}
	case errors.As(err, &invalid):
		return &FieldError{Key: "kafka.tls.ca_file", Problem: fmt.Sprintf("the brokers' certificate is not valid (%v)", err)}
	case errors.As(err, &record):
		return &FieldError{Key: "kafka.tls.enabled", Problem: fmt.Sprintf(
			"the brokers do not speak TLS on %s; set kafka.tls.enabled: false or name their TLS listener (%v)", strings.Join(k.Brokers, ","), err)}
	case errors.As(err, &op) && op.Op == "remote error":
		// The broker sent a TLS alert: with TLS itself agreed on, the
		// one thing left for it to refuse is our certificate.
		return &FieldError{Key: "kafka.tls.cert_file", Problem: fmt.Sprintf(
			"the brokers refused the TLS connection (%v); they want a client certificate signed by a CA they trust in kafka.tls.cert_file and key_file", op.Err)}
	case errors.As(err, &firstRead) && k.TLS.Enabled && strings.Contains(err.Error(), "is TLS misconfigured"):
		// A broker without TLS reads the ClientHello as a request of
		// hundreds of megabytes and closes the connection during the
		// handshake.
		return &FieldError{Key: "kafka.tls.enabled", Problem: fmt.Sprintf(
			"the brokers closed the connection during the TLS handshake, as brokers without TLS do; set kafka.tls.enabled: false or name their TLS listener in kafka.brokers (%s)", strings.Join(k.Brokers, ","))}
	case errors.As(err, &firstRead) && strings.Contains(err.Error(), "is TLS missing?"):
		return &FieldError{Key: "kafka.tls.enabled", Problem: "the brokers closed the connection at once, as brokers that require TLS do: set kafka.tls.enabled: true"}
	case errors.As(err, &firstRead) && strings.Contains(err.Error(), "is SASL missing?"):
		return &FieldError{Key: "kafka.sasl.mechanism", Problem: "the brokers closed the connection at the first request, as brokers that require SASL do: set kafka.sasl.mechanism, user and password"}
	case errors.As(err, &ke) && ke == kerr.UnsupportedSaslMechanism:
		return &FieldError{Key: "kafka.sasl.mechanism", Problem: fmt.Sprintf("the brokers do not offer %s (%v)", k.SASL.Mechanism, err)}
	case errors.As(err, &ke) && ke == kerr.IllegalSaslState:
		// Kafka's answer to a SASL handshake on a listener without SASL:
		// no password was asked for.
		return &FieldError{Key: "kafka.sasl.mechanism", Problem: fmt.Sprintf(
			"the brokers take no SASL on this listener; leave kafka.sasl.mechanism empty or name their SASL listener in kafka.brokers (%s) (%v)", strings.Join(k.Brokers, ","), err)}
	case errors.As(err, &ke) && ke == kerr.SaslAuthenticationFailed:
		return &FieldError{Key: "kafka.sasl.password", Problem: fmt.Sprintf(
			"the brokers refused %s: check kafka.sasl.user and kafka.sasl.password (or password_file) (%v)", user, err)}
	case saslCut && k.SASL.Mechanism != "":
		return &FieldError{Key: "kafka.sasl.password", Problem: fmt.Sprintf(
			"the brokers closed the connection while authenticating %s, as they do on a wrong user or password: check kafka.sasl.user and kafka.sasl.password (or password_file)", user)}
	}
	return nil
}
