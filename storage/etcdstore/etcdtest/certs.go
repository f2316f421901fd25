package etcdtest

import (
	"crypto/x509"
	"net"
	"testing"

	"github.com/kubevents/kubevents/internal/testpki"
)

// writeCerts writes a CA, a serving certificate for 127.0.0.1 and a client
// certificate under dir, returning the CA and client files and the
// serving ones.
func writeCerts(t testing.TB, dir string) (client, server TLSFiles) {
	t.Helper()
	ca, err := testpki.NewCA("etcdtest CA")
	if err != nil {
		t.Fatal(err)
	}
	if client.CAFile, err = ca.WriteFile(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	server.CAFile = client.CAFile
	for _, c := range []struct {
		files *TLSFiles
		leaf  testpki.LeafOptions
	}{
		{&server, testpki.LeafOptions{CommonName: "server", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}},
		{&client, testpki.LeafOptions{CommonName: "client", ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
	} {
		kp, err := ca.Issue(c.leaf)
		if err != nil {
			t.Fatal(err)
		}
		if c.files.CertFile, c.files.KeyFile, err = kp.WriteFiles(dir, c.leaf.CommonName); err != nil {
			t.Fatal(err)
		}
	}
	return client, server
}
