package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
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
		tc, err := k.TLS.config()
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

func (t *TLS) config() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as tests only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
