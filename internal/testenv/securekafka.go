package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The SASL mechanisms a [SecureKafka] has a user for, by their Kafka
// names (keyheat's kafka.sasl.mechanism is the same name in lower case).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLMechanisms returns the mechanisms every [SecureKafka] has a user for.
func SASLMechanisms() []string { return []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} }

// SecureKafkaOptions say how strict a [SecureKFake] cluster is.
type SecureKafkaOptions struct {
	// RequireClientCert makes the brokers refuse a TLS client without a
	// certificate signed by the test CA (mutual TLS).
	RequireClientCert bool
}

// SecureKafka is a kfake cluster of the test's own that speaks only TLS,
// with a certificate from a CA the test made, and admits only SASL users.
// Its files are PEM, in a folder of the test's.
type SecureKafka struct {
	// Seeds are the brokers' addresses, 127.0.0.1:port.
	Seeds []string
	// CAFile is the test CA's certificate: what a client must trust.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key, signed by
	// the test CA, for mutual TLS.
	CertFile, KeyFile string
	// ServerName is a name the brokers' certificate holds besides the IP
	// address 127.0.0.1.
	ServerName string

	users map[string]SASLUser
	ca    *x509.CertPool
	cert  tls.Certificate
}

// SASLUser is one SASL user of a [SecureKafka].
type SASLUser struct {
	// Mechanism is one of SASLMechanisms.
	Mechanism string
	// User and Password are random per cluster, so a test can look for
	// the password in a program's output.
	User, Password string
}

// SecureKFake starts a three-broker kfake cluster on 127.0.0.1 with TLS
// (a server certificate for 127.0.0.1 and ServerName, signed by a CA made
// for the test) and SASL, with one user for each of SASLMechanisms. It is
// closed when the test ends.
func SecureKFake(t testing.TB, o SecureKafkaOptions) *SecureKafka {
	t.Helper()
	dir := t.TempDir()
	s := &SecureKafka{ServerName: "kafka.keyheat.test", users: map[string]SASLUser{}}

	caKey, caCert := newCA(t)
	s.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	s.ca = x509.NewCertPool()
	s.ca.AddCert(caCert)

	serverTmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: s.ServerName},
		DNSNames:    []string{s.ServerName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	serverCert := newLeaf(t, serverTmpl, caCert, caKey)
	clientTmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "keyheat-test-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	s.cert = newLeaf(t, clientTmpl, caCert, caKey)
	s.CertFile = writePEM(t, dir, "client.pem", "CERTIFICATE", s.cert.Certificate[0])
	keyDER, err := x509.MarshalPKCS8PrivateKey(s.cert.PrivateKey)
	if err != nil {
		t.Fatalf("marshal the client key: %v", err)
	}
	s.KeyFile = writePEM(t, dir, "client-key.pem", "PRIVATE KEY", keyDER)

	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert}}
	if o.RequireClientCert {
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		tc.ClientCAs = s.ca
	}
	opts := []kfake.Opt{kfake.NumBrokers(3), kfake.TLS(tc), kfake.EnableSASL()}
	for _, m := range SASLMechanisms() {
		u := SASLUser{Mechanism: m, User: "keyheat-" + m, Password: randomHex(16)}
		s.users[m] = u
		opts = append(opts, kfake.Superuser(m, u.User, u.Password))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start the TLS and SASL kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	s.Seeds = c.ListenAddrs()
	return s
}

// User returns the cluster's user for mechanism, one of SASLMechanisms.
func (s *SecureKafka) User(t testing.TB, mechanism string) SASLUser {
	t.Helper()
	u, ok := s.users[mechanism]
	if !ok {
		t.Fatalf("no SASL user for mechanism %q; want one of %v", mechanism, SASLMechanisms())
	}
	return u
}

// ClientOpts returns franz-go options that reach the cluster as the
// SCRAM-SHA-512 user over TLS, with the client certificate: what a test
// uses for its own admin calls, reads and writes.
func (s *SecureKafka) ClientOpts(t testing.TB) []kgo.Opt {
	t.Helper()
	u := s.User(t, SASLScramSHA512)
	return []kgo.Opt{
		kgo.SeedBrokers(s.Seeds...),
		kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.ca, Certificates: []tls.Certificate{s.cert}}),
		kgo.SASL(mechanism(u)),
	}
}

func mechanism(u SASLUser) sasl.Mechanism {
	switch u.Mechanism {
	case SASLPlain:
		return plain.Auth{User: u.User, Pass: u.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: u.User, Pass: u.Password}.AsSha256Mechanism()
	default:
		return scram.Auth{User: u.User, Pass: u.Password}.AsSha512Mechanism()
	}
}

// newCA makes a self-signed ECDSA CA certificate valid for a day.
func newCA(t testing.TB) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("make the test CA's key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "keyheat test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("make the test CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse the test CA: %v", err)
	}
	return key, cert
}

// newLeaf makes a certificate of tmpl's names and usages, valid for a day,
// signed by ca, with a new ECDSA key.
func newLeaf(t testing.TB, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("make a key for %s: %v", tmpl.Subject.CommonName, err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("sign a certificate for %s: %v", tmpl.Subject.CommonName, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("certificate serial: %v", err)
	}
	return n
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	return p
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b)
}
