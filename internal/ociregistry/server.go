package ociregistry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/testpki"
)

// DefaultHost is the registry host a Server stands in for when
// Options.Host is empty: the one the README's install line names.
const DefaultHost = "ghcr.io"

// Options configure New.
type Options struct {
	// Host is the registry host name the Server stands in for;
	// DefaultHost when empty.
	Host string
	// NoProxy are NO_PROXY entries (host names, IP addresses, CIDR
	// ranges, as Go's net/http reads them) that Env keeps direct besides
	// 127.0.0.1 and localhost: such as the address of a cluster's API
	// server, which kubectl and helm reach in the same environment. An
	// entry that would take Host around the proxy is an error.
	NoProxy []string
	// Dir is where the CA certificate (SSL_CERT_FILE) is written; a new
	// temporary directory, removed by Close, when empty.
	Dir string
	// Logf logs the proxy's refusals and the HTTPS server's errors;
	// nothing is logged when nil (t.Logf in a test).
	Logf func(format string, args ...any)
	// Clock is the registry's (RegistryOptions.Clock); the real clock
	// when nil.
	Clock clock.PassiveClock
}

// Server is the stand-in for a registry host: a Registry served over
// HTTPS on 127.0.0.1 with a certificate for Host from a CA of its own,
// and a Proxy that tunnels Host:443 to it and refuses everything else.
// Env is the environment a child process needs to use it by Host's name.
type Server struct {
	registry *Registry
	host     string
	ca       *testpki.CA
	caFile   string
	tempDir  string // removed by Close; empty when Options.Dir was given
	noProxy  string

	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed when srv.ServeTLS returns
	proxy  *Proxy
}

// New starts a Server: its HTTPS registry and its proxy, each on an
// unused port of 127.0.0.1. It serves no chart until AddChart. Close stops
// it.
func New(o Options) (_ *Server, err error) {
	host := strings.ToLower(o.Host)
	if host == "" {
		host = DefaultHost
	}
	if err := checkHost(host); err != nil {
		return nil, err
	}
	s := &Server{registry: NewRegistry(RegistryOptions{Clock: o.Clock}), host: host, served: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	dir := o.Dir
	if dir == "" {
		if s.tempDir, err = os.MkdirTemp("", "ociregistry-"); err != nil {
			return nil, fmt.Errorf("ociregistry: %w", err)
		}
		dir = s.tempDir
	}
	if s.ca, err = testpki.NewCA("ociregistry CA for " + host); err != nil {
		return nil, fmt.Errorf("ociregistry: %w", err)
	}
	if s.caFile, err = s.ca.WriteFile(dir, host+"-ca"); err != nil {
		return nil, fmt.Errorf("ociregistry: %w", err)
	}
	leaf, err := s.ca.Issue(testpki.LeafOptions{CommonName: host, DNSNames: []string{host}, ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return nil, fmt.Errorf("ociregistry: %w", err)
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ociregistry: %w", err)
	}
	s.srv = &http.Server{
		Handler:           s.registry,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(logfWriter{o.Logf}, "ociregistry https: ", 0),
	}
	go func() {
		defer close(s.served)
		_ = s.srv.ServeTLS(s.ln, "", "") // http.ErrServerClosed after Close
	}()
	if s.proxy, err = NewProxy(ProxyOptions{Host: host, Target: s.ln.Addr().String(), Logf: o.Logf}); err != nil {
		return nil, err
	}
	if s.noProxy, err = noProxy(host, s.proxy.URL(), o.NoProxy); err != nil {
		return nil, err
	}
	return s, nil
}

// checkHost accepts a DNS name that is neither loopback nor an address
// (which Go's clients never send through a proxy).
func checkHost(host string) error {
	switch {
	case strings.ContainsAny(host, ":/@ ,"):
		return fmt.Errorf("ociregistry: host %q: a host name, without port or scheme", host)
	case net.ParseIP(host) != nil, host == "localhost", strings.HasSuffix(host, ".localhost"):
		return fmt.Errorf("ociregistry: host %q: an address or loopback name is never sent through a proxy; give a DNS name", host)
	}
	return nil
}

// noProxy is NO_PROXY: loopback and extra, after checking that no entry
// takes host around the proxy (as Go's net/http would read it).
func noProxy(host, proxyURL string, extra []string) (string, error) {
	entries := []string{"127.0.0.1", "localhost"}
	target := &url.URL{Scheme: "https", Host: host}
	for _, e := range extra {
		e = strings.TrimSpace(e)
		if e == "" || strings.Contains(e, ",") {
			return "", fmt.Errorf("ociregistry: NO_PROXY entry %q: one host, address or range, not empty", e)
		}
		cfg := httpproxy.Config{HTTPSProxy: proxyURL, NoProxy: e}
		via, err := cfg.ProxyFunc()(target)
		if err != nil {
			return "", fmt.Errorf("ociregistry: NO_PROXY entry %q: %w", e, err)
		}
		if via == nil {
			return "", fmt.Errorf("ociregistry: NO_PROXY entry %q would send %s around the proxy (to the real registry)", e, host)
		}
		entries = append(entries, e)
	}
	return strings.Join(entries, ","), nil
}

// AddChart serves a chart packaged by `helm package` (see
// Registry.AddChart): oci://<Host>/<repo> --version <its version>.
func (s *Server) AddChart(repo, tgzPath string) (Chart, error) {
	return s.registry.AddChart(repo, tgzPath)
}

// Registry is the registry the Server serves.
func (s *Server) Registry() *Registry { return s.registry }

// Host is the host name the Server stands in for.
func (s *Server) Host() string { return s.host }

// Addr is the HTTPS registry's address, 127.0.0.1:PORT (its certificate
// is for Host, not for the address).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ProxyURL is the proxy's URL, http://127.0.0.1:PORT.
func (s *Server) ProxyURL() string { return s.proxy.URL() }

// CAFile is the path of the CA's certificate (PEM), SSL_CERT_FILE in Env.
func (s *Server) CAFile() string { return s.caFile }

// CertPool holds the CA's certificate only, for a client's RootCAs.
func (s *Server) CertPool() *x509.CertPool { return s.ca.Pool() }

// Refused lists the requests the proxy refused (Proxy.Refused).
func (s *Server) Refused() []string { return s.proxy.Refused() }

// Env is the environment a child process needs to reach the Server by
// Host's name, to append to os.Environ() (exec.Cmd takes the last of
// duplicate names): HTTPS_PROXY and HTTP_PROXY the proxy, NO_PROXY
// 127.0.0.1, localhost and Options.NoProxy (each in both cases, since Go
// reads whichever upper-case one is set, else the lower-case one), and
// SSL_CERT_FILE the CA's certificate (Go programs on Linux then trust it
// instead of the system's bundle file; a system certificate directory,
// SSL_CERT_DIR, still counts).
func (s *Server) Env() []string {
	u := s.proxy.URL()
	return []string{
		"HTTPS_PROXY=" + u, "https_proxy=" + u,
		"HTTP_PROXY=" + u, "http_proxy=" + u,
		"NO_PROXY=" + s.noProxy, "no_proxy=" + s.noProxy,
		"SSL_CERT_FILE=" + s.caFile,
	}
}

// Transport is an HTTP transport for tests in this process that reaches
// the Server as a child with Env would: through the proxy, trusting the
// CA. Close its idle connections when done.
func (s *Server) Transport() *http.Transport {
	proxyURL, _ := url.Parse(s.proxy.URL()) // made by Proxy.URL: cannot fail
	return &http.Transport{
		Proxy:             http.ProxyURL(proxyURL),
		TLSClientConfig:   &tls.Config{RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
}

// Close stops the proxy and the HTTPS server, waits for their goroutines
// and removes the temporary directory New made.
func (s *Server) Close() error {
	var errs []error
	if s.proxy != nil {
		errs = append(errs, s.proxy.Close())
	}
	if s.srv != nil {
		if err := s.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ociregistry: https server: %w", err))
		}
		<-s.served
	} else if s.ln != nil {
		_ = s.ln.Close()
	}
	if s.tempDir != "" {
		if err := os.RemoveAll(s.tempDir); err != nil {
			errs = append(errs, fmt.Errorf("ociregistry: %w", err))
		}
	}
	return errors.Join(errs...)
}

// logfWriter is an io.Writer for log.Logger that writes each line to a
// Logf function, or nowhere.
type logfWriter struct{ logf func(string, ...any) }

func (w logfWriter) Write(b []byte) (int, error) {
	if w.logf != nil {
		w.logf("%s", strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}
