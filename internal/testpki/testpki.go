// Package testpki makes certificate authorities and the certificates they
// sign for tests and test harnesses: ECDSA P-256 keys (fast to make),
// random 128-bit serial numbers, PEM (keys in PKCS#8, which Go's
// crypto/tls, etcd, kube-apiserver and client-go all read), a
// *tls.Certificate and a *x509.CertPool, and files written 0600.
//
// It is for tests only: keys are kept in memory unencrypted and nothing
// is revoked or rotated.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"
)

// DefaultValidity is how long a CA made with a zero CAOptions.Validity is
// valid: longer than any test run.
const DefaultValidity = 24 * time.Hour

// backdate is how far before the clock's now certificates become valid,
// so that a process whose clock lags a little still accepts them.
const backdate = time.Hour

// CAOptions configure NewCAWith.
type CAOptions struct {
	// CommonName is the CA certificate's subject common name; required.
	CommonName string
	// Validity is how long from now the CA certificate is valid;
	// DefaultValidity when zero. The certificates it issues end no
	// later.
	Validity time.Duration
	// Clock gives now for the CA's and its certificates' validity;
	// the real clock when nil.
	Clock clock.PassiveClock
}

// CA is a self-signed certificate authority and its key.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// CertPEM is Cert in PEM.
	CertPEM []byte

	key   *ecdsa.PrivateKey
	clock clock.PassiveClock
}

// NewCA is a CA named commonName, valid for DefaultValidity.
func NewCA(commonName string) (*CA, error) {
	return NewCAWith(CAOptions{CommonName: commonName})
}

// NewCAWith is a CA made with o.
func NewCAWith(o CAOptions) (*CA, error) {
	if o.CommonName == "" {
		return nil, errors.New("testpki: a CA needs a common name")
	}
	if o.Validity < 0 {
		return nil, fmt.Errorf("testpki: CA %q: negative validity %v", o.CommonName, o.Validity)
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: CA %q: key: %w", o.CommonName, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, fmt.Errorf("testpki: CA %q: %w", o.CommonName, err)
	}
	now := o.Clock.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: o.CommonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(o.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testpki: CA %q: %w", o.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testpki: CA %q: %w", o.CommonName, err)
	}
	return &CA{Cert: cert, CertPEM: certPEM(der), key: key, clock: o.Clock}, nil
}

// Pool is a new certificate pool holding only the CA, for a client's
// RootCAs or a server's ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFile writes the CA's certificate (PEM) to dir/base.crt and
// returns the path.
func (ca *CA) WriteFile(dir, base string) (string, error) {
	path := filepath.Join(dir, base+".crt")
	if err := os.WriteFile(path, ca.CertPEM, 0o600); err != nil {
		return "", fmt.Errorf("testpki: %w", err)
	}
	return path, nil
}

// LeafOptions say what certificate (*CA).Issue makes.
type LeafOptions struct {
	// CommonName is the subject common name (a client certificate's
	// user name in Kubernetes); required.
	CommonName string
	// Organizations are the subject organizations (a client
	// certificate's groups in Kubernetes).
	Organizations []string
	// DNSNames are subject alternative names a server certificate is
	// verified against.
	DNSNames []string
	// IPAddresses are subject alternative names a server certificate
	// is verified against when dialled by address.
	IPAddresses []net.IP
	// ExtKeyUsages say what the certificate is for, usually
	// x509.ExtKeyUsageServerAuth or x509.ExtKeyUsageClientAuth; at least
	// one is required (a certificate without any would be good for
	// everything).
	ExtKeyUsages []x509.ExtKeyUsage
	// Validity is how long from now the certificate is valid; until the
	// CA's end when zero. It may not outlast the CA.
	Validity time.Duration
}

// KeyPair is a certificate a CA issued and its private key.
type KeyPair struct {
	// Cert is the certificate.
	Cert *x509.Certificate
	// CertPEM is the certificate in PEM (without its issuer).
	CertPEM []byte
	// KeyPEM is the private key in PKCS#8 PEM ("PRIVATE KEY").
	KeyPEM []byte
	// TLS is the certificate and key for a tls.Config, Leaf set.
	TLS tls.Certificate
}

// Issue makes a new key and a certificate for it that the CA signs.
func (ca *CA) Issue(o LeafOptions) (*KeyPair, error) {
	if o.CommonName == "" {
		return nil, errors.New("testpki: a certificate needs a common name")
	}
	if len(o.ExtKeyUsages) == 0 {
		return nil, fmt.Errorf("testpki: certificate %q: no extended key usage (server or client auth)", o.CommonName)
	}
	if o.Validity < 0 {
		return nil, fmt.Errorf("testpki: certificate %q: negative validity %v", o.CommonName, o.Validity)
	}
	now := ca.clock.Now()
	notAfter := ca.Cert.NotAfter
	if o.Validity > 0 {
		notAfter = now.Add(o.Validity)
		if notAfter.After(ca.Cert.NotAfter) {
			return nil, fmt.Errorf("testpki: certificate %q: valid until %v, after its CA %q (%v)",
				o.CommonName, notAfter, ca.Cert.Subject.CommonName, ca.Cert.NotAfter)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate %q: key: %w", o.CommonName, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate %q: %w", o.CommonName, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: o.Organizations},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  o.ExtKeyUsages,
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPAddresses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate %q: %w", o.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate %q: %w", o.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate %q: key: %w", o.CommonName, err)
	}
	return &KeyPair{
		Cert:    cert,
		CertPEM: certPEM(der),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}, nil
}

// WriteFiles writes the certificate to dir/base.crt and the key to
// dir/base.key (PEM) and returns their paths.
func (k *KeyPair) WriteFiles(dir, base string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := os.WriteFile(certFile, k.CertPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testpki: %w", err)
	}
	if err := os.WriteFile(keyFile, k.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testpki: %w", err)
	}
	return certFile, keyFile, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// serial is a random 128-bit certificate serial number.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}
