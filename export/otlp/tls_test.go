package otlp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and key (PEM) for the given usage.
func (ca *testCA) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "leaf"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// writeFile writes b into dir/name and returns its path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsFixture is a receiver requiring client certificates, and the files
// a sink needs to reach it.
type tlsFixture struct {
	r                         *otlptest.Receiver
	caFile, certFile, keyFile string
	otherCAFile               string
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	ca := newTestCA(t, "kubevents test CA")
	serverCert, serverKey := ca.issue(t, 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, []string{"collector.test"})
	clientCert, clientKey := ca.issue(t, 3, x509.ExtKeyUsageClientAuth, nil, nil)
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	r := otlptest.Start(t, otlptest.Options{TLS: &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clients,
		MinVersion:   tls.VersionTLS12,
	}})
	dir := t.TempDir()
	return &tlsFixture{
		r:           r,
		caFile:      writeFile(t, dir, "ca.pem", ca.pem),
		certFile:    writeFile(t, dir, "client.pem", clientCert),
		keyFile:     writeFile(t, dir, "client-key.pem", clientKey),
		otherCAFile: writeFile(t, dir, "other-ca.pem", newTestCA(t, "other CA").pem),
	}
}

func TestSendTLS(t *testing.T) {
	f := newTLSFixture(t)
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			ok := func(tc *otlp.TLSConfig) otlp.Config {
				return otlp.Config{Protocol: proto, Endpoint: f.r.Endpoint(proto), TLS: tc}
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			before := len(f.r.Records())

			s := newSink(t, ok(&otlp.TLSConfig{CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile}))
			if err := s.Send(ctx, testBatch()); err != nil {
				t.Fatalf("Send over mutual TLS: %v", err)
			}
			if n := len(f.r.Records()) - before; n != 3 {
				t.Fatalf("%d records, want 3", n)
			}

			// The server name may be overridden (the certificate also
			// names collector.test).
			s = newSink(t, ok(&otlp.TLSConfig{CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile, ServerName: "collector.test"}))
			if err := s.Send(ctx, testBatch()); err != nil {
				t.Fatalf("Send with serverName: %v", err)
			}

			for name, tc := range map[string]*otlp.TLSConfig{
				"untrusted server":  {CAFile: f.otherCAFile, CertFile: f.certFile, KeyFile: f.keyFile},
				"wrong server name": {CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile, ServerName: "elsewhere.test"},
				"no client cert":    {CAFile: f.caFile},
				"system roots only": nil,
			} {
				s := newSink(t, ok(tc))
				err := s.Send(ctx, testBatch())
				if err == nil {
					t.Errorf("%s: Send succeeded", name)
				} else if errors.Is(err, export.ErrRejected) {
					t.Errorf("%s: %v wraps ErrRejected; a TLS failure refuses every batch, not this one", name, err)
				}
			}
			if n := len(f.r.Records()) - before; n != 6 {
				t.Fatalf("%d records, want 6 (from the two good sinks)", n)
			}
		})
	}
}
