package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
)

// TestCerts are PEM files in a folder of one test's: a CA made for the
// test, a server certificate and a client certificate it signed.
type TestCerts struct {
	// CAFile is the CA's certificate: what a client must trust.
	CAFile string
	// ServerName is a name the server certificate holds besides
	// localhost and the IP address 127.0.0.1.
	ServerName string
	// ServerCertFile and ServerKeyFile are the server's certificate and
	// its key (PKCS #8).
	ServerCertFile, ServerKeyFile string
	// CertFile and KeyFile are a client certificate and its key, for
	// mutual TLS.
	CertFile, KeyFile string
	// Pool holds the CA's certificate.
	Pool *x509.CertPool
}

// NewTestCerts makes a CA, and a server and a client certificate signed
// by it, all valid for a day, with ECDSA P-256 keys; the server
// certificate is for serverName, localhost and 127.0.0.1.
func NewTestCerts(t testing.TB, serverName string) *TestCerts {
	t.Helper()
	dir := t.TempDir()
	c := &TestCerts{ServerName: serverName, Pool: x509.NewCertPool()}
	caKey, caCert := newCA(t)
	c.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	c.Pool.AddCert(caCert)
	server := newLeaf(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: serverName},
		DNSNames:    []string{serverName, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
	c.ServerCertFile, c.ServerKeyFile = writeLeaf(t, dir, "server", server)
	client := newLeaf(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "keyheat-test-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
	c.CertFile, c.KeyFile = writeLeaf(t, dir, "client", client)
	return c
}

// writeLeaf writes cert and its key as name.pem and name-key.pem.
func writeLeaf(t testing.TB, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatalf("marshal the %s key: %v", name, err)
	}
	return writePEM(t, dir, name+".pem", "CERTIFICATE", cert.Certificate[0]),
		writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", keyDER)
}
