package webhooktest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	"github.com/kubevents/kubevents/internal/testpki"
)

// TLSFiles are a test CA, a server configuration it signed and a client
// certificate it signed, for tests of https webhooks.
type TLSFiles struct {
	// CAFile is the CA's certificate, PEM.
	CAFile string
	// ClientCertFile and ClientKeyFile are a client certificate with
	// common name ClientCN and its key, PEM.
	ClientCertFile, ClientKeyFile string
	// Server serves a certificate for 127.0.0.1, localhost and
	// ServerName, and verifies client certificates the CA signed when a
	// client presents one.
	Server *tls.Config
}

// Names in the generated certificates.
const (
	// ServerName is a DNS name of the server certificate that does not
	// resolve: a client must set it as its TLS server name.
	ServerName = "webhook.test"
	// ClientCN is the common name of the client certificate.
	ClientCN = "kubevents-export"
)

// GenerateTLS creates a CA and certificates signed by it in dir.
func GenerateTLS(dir string) (*TLSFiles, error) {
	ca, err := testpki.NewCA("webhooktest CA")
	if err != nil {
		return nil, fmt.Errorf("webhooktest: %w", err)
	}
	server, err := ca.Issue(testpki.LeafOptions{
		CommonName:   "webhooktest server",
		DNSNames:     []string{"localhost", ServerName},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("webhooktest: %w", err)
	}
	client, err := ca.Issue(testpki.LeafOptions{
		CommonName:   ClientCN,
		ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("webhooktest: %w", err)
	}
	f := &TLSFiles{}
	if f.CAFile, err = ca.WriteFile(dir, "ca"); err != nil {
		return nil, fmt.Errorf("webhooktest: %w", err)
	}
	if f.ClientCertFile, f.ClientKeyFile, err = client.WriteFiles(dir, "client"); err != nil {
		return nil, fmt.Errorf("webhooktest: %w", err)
	}
	f.Server = &tls.Config{
		Certificates: []tls.Certificate{server.TLS},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
	}
	return f, nil
}
