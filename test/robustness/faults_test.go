package robustness

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// proxy is a TCP proxy on loopback in front of one address, whose network
// the test cuts (every connection reset, new ones refused) and restores.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	cut    atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's address.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			reset(c)
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			reset(c)
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Go(func() { p.pipe(c, up) })
		p.wg.Go(func() { p.pipe(up, c) })
	}
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut.Load() {
		for _, c := range cs {
			reset(c)
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// reset closes c with a RST, as a cut link's peer would see it.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		reset(c)
	}
	p.conns = map[net.Conn]bool{}
}

// Cut resets every connection and refuses new ones until Restore.
func (p *proxy) Cut() {
	p.cut.Store(true)
	p.closeAll()
}

// Restore lets connections through again.
func (p *proxy) Restore() { p.cut.Store(false) }

// diskFS reports a full disk (no space available) while full is set, so
// that the store refuses writes (507) as it does below its free-space
// reserve; the files themselves are on the real disk.
type diskFS struct {
	vfs.FS
	full atomic.Bool
}

// GetDiskUsage implements vfs.FS.
func (fs *diskFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := fs.FS.GetDiskUsage(path)
	if fs.full.Load() {
		u.UsedBytes, u.AvailBytes = u.TotalBytes, 0
	}
	return u, err
}

// Unwrap is the wrapped filesystem.
func (fs *diskFS) Unwrap() vfs.FS { return fs.FS }

// inProcess serves a pebblestore opened with opts through a server with
// cfg on loopback until the test ends or stop is called, returning its
// URL.
func inProcess(t *testing.T, opts pebblestore.Options, cfg server.Config) (url string, stop func()) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Clock = clock.RealClock{}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.BeginShutdown()
			hs.CloseClientConnections()
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Drain(ctx)
			_ = store.Close()
		})
	}
	t.Cleanup(stop)
	return hs.URL, stop
}

// pause stops process pid (SIGSTOP) and returns the function that resumes
// it (SIGCONT), which also runs when the test ends.
func pause(t *testing.T, pid int) func() {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", pid, err)
	}
	var once sync.Once
	resume := func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}
