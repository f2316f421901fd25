package ociregistry

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// connect sends a CONNECT for target to the proxy at proxyURL and returns
// the answer's status and the connection.
func connect(t *testing.T, proxyURL, target string) (int, net.Conn, *bufio.Reader) {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
	}
	return resp.StatusCode, conn, br
}

// countingListener is a loopback listener that counts the connections
// it accepts and closes them.
type countingListener struct {
	ln       net.Listener
	accepted atomic.Int64
	done     chan struct{}
}

func newCountingListener(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &countingListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-c.done
	})
	return c
}

func TestProxyRefusesEveryOtherDestinationWithoutConnecting(t *testing.T) {
	target := newCountingListener(t)
	var logged atomic.Int64
	p, err := NewProxy(ProxyOptions{Host: "ghcr.io", Target: target.ln.Addr().String(), Logf: func(f string, a ...any) {
		logged.Add(1)
		t.Logf(f, a...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, dest := range []string{"example.com:443", "ghcr.io:80", "ghcr.io.example.com:443", "192.0.2.10:443", "127.0.0.1:443", "[::1]:443"} {
		if status, _, _ := connect(t, p.URL(), dest); status != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d, want 403", dest, status)
		}
	}
	// A plain request through the proxy (HTTP_PROXY) is refused too.
	pu, _ := url.Parse(p.URL())
	tr := &http.Transport{Proxy: http.ProxyURL(pu)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://example.com/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "only tunnels CONNECT ghcr.io:443") {
		t.Errorf("GET http://example.com/x through the proxy: %d %q", resp.StatusCode, body)
	}
	want := []string{"CONNECT example.com:443", "CONNECT ghcr.io:80", "CONNECT ghcr.io.example.com:443", "CONNECT 192.0.2.10:443", "CONNECT 127.0.0.1:443", "CONNECT [::1]:443", "GET http://example.com/x"}
	if got := p.Refused(); !slices.Equal(got, want) || logged.Load() != int64(len(want)) {
		t.Errorf("refused %q (%d logged), want %q", got, logged.Load(), want)
	}
	if n := target.accepted.Load(); n != 0 {
		t.Errorf("the proxy connected to its target %d times for refused requests", n)
	}
	// The one allowed destination is tunnelled (any case of the name).
	status, conn, _ := connect(t, p.URL(), "GHCR.io:443")
	if status != http.StatusOK {
		t.Fatalf("CONNECT GHCR.io:443: %d", status)
	}
	// The target closes at once: the tunnel passes that on.
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("reading the tunnel after the target closed: %v, want EOF", err)
	}
	if n := target.accepted.Load(); n != 1 {
		t.Errorf("the target accepted %d connections, want 1", n)
	}
}

func TestCloseEndsOpenTunnels(t *testing.T) {
	s := newServer(t, Options{})
	status, conn, br := connect(t, s.ProxyURL(), "ghcr.io:443")
	if status != http.StatusOK {
		t.Fatalf("CONNECT: %d", status)
	}
	tc := tls.Client(&bufferedConn{conn, br}, &tls.Config{ServerName: "ghcr.io", RootCAs: s.CertPool(), MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the tunnel: %v", err)
	}
	if got := tc.ConnectionState().PeerCertificates[0].DNSNames; !slices.Equal(got, []string{"ghcr.io"}) {
		t.Fatalf("the certificate is for %v", got)
	}
	// The tunnel is open and idle; Close must end it and return
	// (goleak in TestMain checks that nothing is left running).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the tunnel is still open after Close")
	}
}

// bufferedConn is a net.Conn whose reads start with what a bufio.Reader
// over it holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func TestEnvSendsOnlyTheHostThroughTheProxy(t *testing.T) {
	s := newServer(t, Options{NoProxy: []string{"172.31.0.0/16", " 10.96.0.1 ", "cluster.local"}})
	env := map[string]string{}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	wantNoProxy := "127.0.0.1,localhost,172.31.0.0/16,10.96.0.1,cluster.local"
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if env[k] != s.ProxyURL() {
			t.Errorf("%s=%q, want %q", k, env[k], s.ProxyURL())
		}
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		if env[k] != wantNoProxy {
			t.Errorf("%s=%q, want %q", k, env[k], wantNoProxy)
		}
	}
	if env["SSL_CERT_FILE"] != s.CAFile() {
		t.Errorf("SSL_CERT_FILE=%q, want %q", env["SSL_CERT_FILE"], s.CAFile())
	}
	// As a Go program (helm, kubectl) reads that environment.
	cfg := httpproxy.Config{HTTPSProxy: env["HTTPS_PROXY"], HTTPProxy: env["HTTP_PROXY"], NoProxy: env["NO_PROXY"]}
	proxyFor := cfg.ProxyFunc()
	for target, viaProxy := range map[string]bool{
		"https://ghcr.io/v2/":                 true,
		"https://example.com/":                true,
		"http://example.com/":                 true,
		"https://172.31.0.2:6443/api":         false,
		"https://10.96.0.1/":                  false,
		"https://kube-dns.cluster.local/":     false,
		"https://127.0.0.1:6443/":             false,
		"https://localhost:6443/":             false,
		"https://ghcr.io.cluster.local:443/x": false,
	} {
		u, _ := url.Parse(target)
		via, err := proxyFor(u)
		if err != nil || (via != nil) != viaProxy {
			t.Errorf("%s: through %v (%v), want through the proxy: %v", target, via, err, viaProxy)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{NoProxy: []string{"ghcr.io"}}, `NO_PROXY entry "ghcr.io" would send ghcr.io around the proxy`},
		{Options{NoProxy: []string{".io"}}, "around the proxy"},
		{Options{NoProxy: []string{"*"}}, "around the proxy"},
		{Options{NoProxy: []string{"a,b"}}, "one host, address or range"},
		{Options{NoProxy: []string{""}}, "one host, address or range"},
		{Options{Host: "ghcr.io:443"}, "without port or scheme"},
		{Options{Host: "127.0.0.1"}, "never sent through a proxy"},
		{Options{Host: "localhost"}, "never sent through a proxy"},
		{Options{Dir: "/nonexistent/dir"}, "no such file"},
	} {
		s, err := New(tc.o)
		if err == nil {
			_ = s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error saying %q", tc.o, err, tc.want)
		}
	}
}

func TestCloseRemovesOnlyItsOwnDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.CAFile(), dir+"/") {
		t.Fatalf("CA file %s is not in %s", s.CAFile(), dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.CAFile()); err != nil {
		t.Fatalf("Close removed the caller's directory's CA file: %v", err)
	}

	own, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(own.CAFile())); !os.IsNotExist(err) {
		t.Fatalf("Close left its temporary directory: %v", err)
	}
}
