package ociregistry

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ProxyOptions configure NewProxy.
type ProxyOptions struct {
	// Host is the one host name the proxy tunnels to (a CONNECT to
	// Host:443); required.
	Host string
	// Target is the address (host:port) a tunnel to Host:443 is connected
	// to; required.
	Target string
	// Logf logs each refused request; nothing is logged when nil.
	Logf func(format string, args ...any)
}

// Proxy is an HTTP proxy on 127.0.0.1 that tunnels CONNECTs to one host
// name (Host:443) to one local address and refuses everything else with
// 403 Forbidden, logging and counting each refusal, so that a process
// using it as its HTTPS_PROXY reaches that host's stand-in and nothing off
// the machine.
type Proxy struct {
	o   ProxyOptions
	ln  net.Listener
	srv *http.Server

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{} // both ends of open tunnels
	refused []string
	active  sync.WaitGroup // ServeHTTP calls, which hold tunnels open
	served  chan struct{}  // closed when srv.Serve returns
}

// NewProxy starts a proxy on 127.0.0.1 (an unused port); Close stops it.
func NewProxy(o ProxyOptions) (*Proxy, error) {
	if o.Host == "" || o.Target == "" {
		return nil, errors.New("ociregistry: a proxy needs a host name and a target address")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ociregistry: proxy: %w", err)
	}
	p := &Proxy{o: o, ln: ln, conns: map[net.Conn]struct{}{}, served: make(chan struct{})}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln) // http.ErrServerClosed after Close
	}()
	return p, nil
}

// URL is the proxy's URL, http://127.0.0.1:PORT, for HTTPS_PROXY.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Refused lists the requests the proxy refused, in order ("CONNECT
// example.com:443", "GET http://example.com/").
func (p *Proxy) Refused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refused...)
}

// ServeHTTP tunnels a CONNECT to Host:443 and refuses every other request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		http.Error(w, "the proxy is closed", http.StatusServiceUnavailable)
		return
	}
	p.active.Add(1)
	p.mu.Unlock()
	defer p.active.Done()
	if req.Method != http.MethodConnect || !strings.EqualFold(req.Host, p.o.Host+":443") {
		p.refuse(w, req)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "the proxy cannot take over this connection", http.StatusInternalServerError)
		return
	}
	upstream, err := net.DialTimeout("tcp", p.o.Target, 10*time.Second)
	if err != nil {
		http.Error(w, fmt.Sprintf("the stand-in for %s is not reachable: %v", p.o.Host, err), http.StatusBadGateway)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	if !p.track(client, upstream) {
		return
	}
	defer p.untrack(client, upstream)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	// The client may have sent the start of its TLS handshake with the
	// CONNECT: buf holds what the server read past the request.
	var fromClient io.Reader = client
	if n := buf.Reader.Buffered(); n > 0 {
		head, _ := buf.Reader.Peek(n) // n bytes are buffered: no error
		fromClient = io.MultiReader(strings.NewReader(string(head)), client)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(upstream, fromClient)
	}()
	pipe(client, upstream)
	<-done
}

// pipe copies from src to dst until src ends, then ends dst's writing
// half (or closes it), so that the far side sees the end too.
func pipe(dst net.Conn, src io.Reader) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
		return
	}
	_ = dst.Close()
}

// track registers a tunnel's connections, or closes them when the proxy
// is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) refuse(w http.ResponseWriter, req *http.Request) {
	what := req.Method + " " + req.Host
	if req.Method != http.MethodConnect {
		what = req.Method + " " + req.URL.String()
	}
	p.mu.Lock()
	p.refused = append(p.refused, what)
	p.mu.Unlock()
	if p.o.Logf != nil {
		p.o.Logf("ociregistry proxy: refused %s: only CONNECT %s:443 is tunnelled (to its local stand-in)", what, p.o.Host)
	}
	http.Error(w, fmt.Sprintf("refused: this test proxy only tunnels CONNECT %s:443 (to a local stand-in); nothing leaves this machine", p.o.Host), http.StatusForbidden)
}

// Close stops the proxy, ends its open tunnels and waits for its
// handlers.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	<-p.served
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.active.Wait()
	if err != nil {
		return fmt.Errorf("ociregistry: proxy: %w", err)
	}
	return nil
}
