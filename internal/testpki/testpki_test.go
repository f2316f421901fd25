package testpki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func mustCA(t *testing.T, cn string) *CA {
	t.Helper()
	ca, err := NewCA(cn)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t *testing.T, ca *CA, o LeafOptions) *KeyPair {
	t.Helper()
	kp, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

var (
	serverOpts = LeafOptions{CommonName: "server", DNSNames: []string{"svc.test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	clientOpts = LeafOptions{CommonName: "alice", Organizations: []string{"dev", "ops"},
		ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	bothOpts = LeafOptions{CommonName: "both", DNSNames: []string{"svc.test"},
		ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
)

// TestIssueVerify: what a CA issues verifies against its pool for the
// usages and names asked for, and for no other usage, name or CA.
func TestIssueVerify(t *testing.T) {
	ca, other := mustCA(t, "test CA"), mustCA(t, "other CA")
	for _, c := range []struct {
		name    string
		leaf    LeafOptions
		pool    *x509.CertPool
		usage   x509.ExtKeyUsage
		dnsName string // "" verifies no name (as a server verifies a client)
		wantErr string // "" when it verifies
	}{
		{"server by DNS name", serverOpts, ca.Pool(), x509.ExtKeyUsageServerAuth, "svc.test", ""},
		{"server by IP", serverOpts, ca.Pool(), x509.ExtKeyUsageServerAuth, "127.0.0.1", ""},
		{"server, another name", serverOpts, ca.Pool(), x509.ExtKeyUsageServerAuth, "elsewhere.test", "not elsewhere.test"},
		{"server as a client", serverOpts, ca.Pool(), x509.ExtKeyUsageClientAuth, "", "incompatible key usage"},
		{"server, another CA", serverOpts, other.Pool(), x509.ExtKeyUsageServerAuth, "svc.test", "unknown authority"},
		{"client", clientOpts, ca.Pool(), x509.ExtKeyUsageClientAuth, "", ""},
		{"client as a server", clientOpts, ca.Pool(), x509.ExtKeyUsageServerAuth, "", "incompatible key usage"},
		{"client, another CA", clientOpts, other.Pool(), x509.ExtKeyUsageClientAuth, "", "unknown authority"},
		{"both as a server", bothOpts, ca.Pool(), x509.ExtKeyUsageServerAuth, "svc.test", ""},
		{"both as a client", bothOpts, ca.Pool(), x509.ExtKeyUsageClientAuth, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			kp := mustIssue(t, ca, c.leaf)
			_, err := kp.Cert.Verify(x509.VerifyOptions{Roots: c.pool, DNSName: c.dnsName, KeyUsages: []x509.ExtKeyUsage{c.usage}})
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("verify: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("verify: %v, want an error containing %q", err, c.wantErr)
			}
			if got := kp.Cert.Subject; got.CommonName != c.leaf.CommonName || strings.Join(got.Organization, ",") != strings.Join(c.leaf.Organizations, ",") {
				t.Errorf("subject %v, want CN %q O %v", got, c.leaf.CommonName, c.leaf.Organizations)
			}
			if kp.Cert.IsCA {
				t.Error("a leaf certificate is a CA")
			}
			// The PEM and the tls.Certificate are the same certificate
			// and a matching key.
			pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
			if err != nil {
				t.Fatalf("PEM pair: %v", err)
			}
			if !bytes.Equal(pair.Certificate[0], kp.Cert.Raw) || !bytes.Equal(kp.TLS.Certificate[0], kp.Cert.Raw) || kp.TLS.Leaf != kp.Cert {
				t.Error("CertPEM, TLS and Cert differ")
			}
		})
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "test CA" {
		t.Errorf("CA certificate: IsCA %v, subject %v", ca.Cert.IsCA, ca.Cert.Subject)
	}
	if a, b := mustIssue(t, ca, clientOpts), mustIssue(t, ca, clientOpts); a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0 {
		t.Errorf("two certificates with serial %v", a.Cert.SerialNumber)
	}
}

// TestHandshake: over loopback, a server with the CA's server certificate
// that requires client certificates from the CA accepts its client
// certificate (read back from the files WriteFiles wrote) and refuses its
// server certificate presented as a client's.
func TestHandshake(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	ca := mustCA(t, "test CA")
	server := mustIssue(t, ca, serverOpts)
	caFile, err := ca.WriteFile(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The server writes each client's common name back, or nothing when
	// its handshake fails.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			tc := conn.(*tls.Conn)
			if err := tc.Handshake(); err == nil {
				_, _ = io.WriteString(tc, tc.ConnectionState().PeerCertificates[0].Subject.CommonName)
			}
			_ = tc.Close()
		}
	}()
	defer func() { l.Close(); <-done }()

	dial := func(cert tls.Certificate) (string, error) {
		conn, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{
			RootCAs: roots, ServerName: "svc.test", Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(conn)
		return string(b), err
	}
	certFile, keyFile, err := mustIssue(t, ca, clientOpts).WriteFiles(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{caFile, certFile, keyFile} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi, err)
		}
	}
	client, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := dial(client); err != nil || got != "alice" {
		t.Errorf("the client certificate: %q %v, want the server to see alice", got, err)
	}
	// TLS 1.3 reports a refused client certificate on the first read.
	if got, err := dial(server.TLS); err == nil || got != "" {
		t.Errorf("the server certificate as a client's: %q %v, want refused", got, err)
	}
}

// TestValidity: certificates are valid from an hour before the clock's
// now until the validity asked for, by default the CA's end, and not
// past it.
func TestValidity(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	ca, err := NewCAWith(CAOptions{CommonName: "short", Validity: 2 * time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.NotBefore.Equal(t0.Add(-time.Hour)) || !ca.Cert.NotAfter.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("CA valid %v to %v, want %v to %v", ca.Cert.NotBefore, ca.Cert.NotAfter, t0.Add(-time.Hour), t0.Add(2*time.Hour))
	}
	clk.SetTime(t0.Add(10 * time.Minute))
	def := mustIssue(t, ca, clientOpts)
	if !def.Cert.NotBefore.Equal(t0.Add(-50*time.Minute)) || !def.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("default leaf valid %v to %v, want %v to the CA's end %v", def.Cert.NotBefore, def.Cert.NotAfter, t0.Add(-50*time.Minute), ca.Cert.NotAfter)
	}
	o := clientOpts
	o.Validity = 30 * time.Minute
	short := mustIssue(t, ca, o)
	if want := t0.Add(40 * time.Minute); !short.Cert.NotAfter.Equal(want) {
		t.Errorf("30m leaf ends %v, want %v", short.Cert.NotAfter, want)
	}
	verifyAt := func(kp *KeyPair, at time.Time) error {
		_, err := kp.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verifyAt(short, t0.Add(39*time.Minute)); err != nil {
		t.Errorf("30m leaf before its end: %v", err)
	}
	var invalid x509.CertificateInvalidError
	if err := verifyAt(short, t0.Add(41*time.Minute)); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("30m leaf after its end: %v, want expired", err)
	}
	o.Validity = 2 * time.Hour
	if _, err := ca.Issue(o); err == nil || !strings.Contains(err.Error(), `after its CA "short"`) {
		t.Errorf("a leaf outlasting its CA: %v", err)
	}
	if ca, err := NewCA("default"); err != nil || ca.Cert.NotAfter.Sub(ca.Cert.NotBefore) != DefaultValidity+time.Hour {
		t.Errorf("NewCA: %v to %v, %v; want DefaultValidity", ca.Cert.NotBefore, ca.Cert.NotAfter, err)
	}
}

// TestOptionErrors: options that cannot make a useful certificate are
// refused, saying why.
func TestOptionErrors(t *testing.T) {
	ca := mustCA(t, "test CA")
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"CA without a name", func() error { _, err := NewCA(""); return err }, "a CA needs a common name"},
		{"CA negative validity", func() error { _, err := NewCAWith(CAOptions{CommonName: "x", Validity: -time.Second}); return err }, "negative validity"},
		{"leaf without a name", func() error { _, err := ca.Issue(LeafOptions{ExtKeyUsages: serverOpts.ExtKeyUsages}); return err }, "a certificate needs a common name"},
		{"leaf without a usage", func() error { _, err := ca.Issue(LeafOptions{CommonName: "x"}); return err }, "no extended key usage"},
		{"leaf negative validity", func() error {
			_, err := ca.Issue(LeafOptions{CommonName: "x", ExtKeyUsages: serverOpts.ExtKeyUsages, Validity: -time.Second})
			return err
		}, "negative validity"},
		{"write into a missing directory", func() error { _, err := ca.WriteFile("/nonexistent/testpki", "ca"); return err }, "no such file or directory"},
	} {
		if err := c.err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
