package kubeapiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/kubevents/kubevents/internal/testpki"
)

// pki is the files kube-apiserver's TLS and service-account flags name,
// made in Go (no openssl) under one directory.
type pki struct {
	caPEM []byte // the CA that signed the serving certificate

	servingCert, servingKey string // --tls-cert-file, --tls-private-key-file
	saPrivate, saPublic     string // --service-account-signing-key-file, --service-account-key-file

	// The front proxy's, when asked for (newFrontProxy): its own CA
	// (--requestheader-client-ca-file) and the client certificate it
	// signs for the aggregator (--proxy-client-cert-file,
	// --proxy-client-key-file).
	frontProxyCA, proxyClientCert, proxyClientKey string
}

// ServiceClusterIPRange is kube-apiserver's --service-cluster-ip-range,
// and KubernetesServiceIP the kubernetes Service's address in it (the
// range's first), which its serving certificate names.
const (
	ServiceClusterIPRange = "10.96.0.0/16"
	KubernetesServiceIP   = "10.96.0.1"
)

// FrontProxyClientName is the common name of the certificate
// kube-apiserver's aggregator presents to aggregated API servers
// (Options.FrontProxy), the one --requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// certValidity is how long the generated certificates are valid: far
// longer than any test, short enough that a leaked one is soon useless.
const certValidity = 7 * 24 * time.Hour

// newPKI writes a self-signed CA, a serving certificate it signs for
// 127.0.0.1, ::1, localhost, the kubernetes Service's names and its
// first address in the service range (10.96.0.1) and bind, and a
// service-account key pair, into dir.
// All keys are ECDSA P-256 (fast to make; kube-apiserver signs
// service-account tokens with ES256).
func newPKI(dir string, bind net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := testpki.NewCAWith(testpki.CAOptions{CommonName: "kubevents-test-ca", Validity: certValidity})
	if err != nil {
		return nil, err
	}
	srv, err := ca.Issue(testpki.LeafOptions{
		CommonName:   "kube-apiserver",
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(KubernetesServiceIP), bind},
		ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	p := &pki{
		caPEM:     ca.CertPEM,
		saPrivate: filepath.Join(dir, "sa.key"),
		saPublic:  filepath.Join(dir, "sa.pub"),
	}
	if _, err := ca.WriteFile(dir, "ca"); err != nil {
		return nil, err
	}
	if p.servingCert, p.servingKey, err = srv.WriteFiles(dir, "serving"); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	for path, data := range map[string][]byte{
		p.saPrivate: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKeyDER}),
		p.saPublic:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// newFrontProxy adds to p, in dir, a front-proxy CA of its own (as
// kubeadm makes one apart from the cluster's CA) and a client
// certificate it signs for FrontProxyClientName.
func (p *pki) newFrontProxy(dir string) error {
	ca, err := testpki.NewCAWith(testpki.CAOptions{CommonName: "kubevents-test-front-proxy-ca", Validity: certValidity})
	if err != nil {
		return err
	}
	client, err := ca.Issue(testpki.LeafOptions{
		CommonName:   FrontProxyClientName,
		ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	if p.frontProxyCA, err = ca.WriteFile(dir, "front-proxy-ca"); err != nil {
		return err
	}
	p.proxyClientCert, p.proxyClientKey, err = client.WriteFiles(dir, "front-proxy-client")
	return err
}

// newToken is a random bearer token (128 bits, hex).
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
