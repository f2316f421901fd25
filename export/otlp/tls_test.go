package otlp_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
	"github.com/kubevents/kubevents/internal/testpki"
)

// tlsFixture is a receiver requiring client certificates, and the files
// a sink needs to reach it.
type tlsFixture struct {
	r                         *otlptest.Receiver
	caFile, certFile, keyFile string
	otherCAFile               string
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	ca, err := testpki.NewCA("kubevents test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(testpki.LeafOptions{CommonName: "collector", DNSNames: []string{"collector.test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(testpki.LeafOptions{CommonName: "kubevents-export", ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	r := otlptest.Start(t, otlptest.Options{TLS: &tls.Config{
		Certificates: []tls.Certificate{server.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
	}})
	dir := t.TempDir()
	f := &tlsFixture{r: r}
	if f.caFile, err = ca.WriteFile(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	if f.otherCAFile, err = other.WriteFile(dir, "other-ca"); err != nil {
		t.Fatal(err)
	}
	if f.certFile, f.keyFile, err = client.WriteFiles(dir, "client"); err != nil {
		t.Fatal(err)
	}
	return f
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
