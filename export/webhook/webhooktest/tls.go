package webhooktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
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
	// certValidity covers any test run.
	certValidity = 24 * time.Hour
)

// GenerateTLS creates a CA and certificates signed by it in dir.
func GenerateTLS(dir string) (*TLSFiles, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "webhooktest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("webhooktest: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(certValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("webhooktest: certificate %s: %w", cn, err)
		}
		return der, key, nil
	}
	serverDER, serverKey, err := leaf(2, "webhooktest server", x509.ExtKeyUsageServerAuth,
		[]string{"localhost", ServerName}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	clientDER, clientKey, err := leaf(3, ClientCN, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}

	f := &TLSFiles{
		CAFile:         filepath.Join(dir, "ca.crt"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
	}
	if err := writePEM(f.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	if err := writePEM(f.ClientCertFile, "CERTIFICATE", clientDER); err != nil {
		return nil, err
	}
	clientKeyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(f.ClientKeyFile, "EC PRIVATE KEY", clientKeyDER); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f.Server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("webhooktest: %w", err)
	}
	return nil
}
