package server_test

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestInitialStateWatchStormIsBounded: 200 watches of all namespaces
// without a resourceVersion (each starts with every stored event: 3,000
// of 2 KiB) whose clients read nothing. Each holds a readOnly in-flight
// slot until its initial events are sent, so only as many as there are
// slots start (the others get 429, counted), and memory stays within
// what those few hold; creates are answered meanwhile. Once the clients
// go, the slots are free and a watch gets its whole initial state.
func TestInitialStateWatchStormIsBounded(t *testing.T) {
	const (
		slots   = 20
		watches = 200
		stored  = 3000
	)
	reg := prometheus.NewRegistry()
	var store storage.Interface
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Registry, c.MaxRequestsInflight, store = reg, slots, c.Store
	})
	fill(t, e.ctx, store, stored, 2048)
	heap0 := heapInUse()
	closeAll := e.unreadStorm(reg, "/api/v1/events?watch=1", watches, slots)
	metric := func(name string) float64 { return metricstest.Sum(t, reg, name) }
	if n := metric("eventsd_watch_initializations"); n != slots {
		t.Fatalf("%v watches initializing, want %d (one per readOnly slot)", n, slots)
	}
	// What the initializing watches hold: per watch, the store's
	// read-ahead (up to 384 decoded events of about 3 KiB) and a chunk
	// of encoded frames (256 KiB), about 1.4 MiB, and the in-memory
	// store's own churn. The 200 watches started at once held 280 MB.
	grown := int64(heapInUse()) - int64(heap0)
	const limit = 100 << 20
	if grown > limit {
		t.Fatalf("the heap grew by %d MiB with %d watches initializing, want at most %d MiB", grown>>20, slots, limit>>20)
	}
	t.Logf("heap grew by %d MiB with %d watches initializing", grown>>20, slots)

	closeAll()
	for deadline := time.Now().Add(30 * time.Second); metric("eventsd_watch_initializations") > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the watches of closed connections still initialize after 30s: %v", metric("eventsd_watch_initializations"))
		}
	}
	long := int64(3 * 3600)
	w, err := e.cs.CoreV1().Events("").Watch(e.ctx, metav1.ListOptions{TimeoutSeconds: &long})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for n := 0; n < stored+10; n++ {
		if ev, ok := e.next(w, 0); !ok || ev.Type != watch.Added {
			t.Fatalf("initial event %d: %v %v", n, ev.Type, ok)
		}
	}
	if n := metric("eventsd_watch_initializations"); n != 0 {
		t.Fatalf("%v watches initializing after the last one sent its initial events", n)
	}
}

// unreadStorm sends n GETs of path at once from clients with a small
// receive window that never read the answers (so the server's writes block
// once the socket buffers are full), waits until all but slots of them
// are refused with 429 (readOnly in-flight), and checks that creates are
// answered beside them. It returns a function that closes the clients.
func (e *env) unreadStorm(reg *prometheus.Registry, path string, n, slots int) (closeAll func()) {
	t := e.t
	t.Helper()
	addr := strings.TrimPrefix(e.url, "http://")
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conns := make([]net.Conn, 0, n)
	closeAll = func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	t.Cleanup(closeAll)
	for i := range n {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", path, addr); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	rejected := func() float64 { return metricstest.Sum(t, reg, "eventsd_rejected_requests_total", "class", "readOnly") }
	for deadline := time.Now().Add(30 * time.Second); rejected() < float64(n-slots); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %v of %d requests refused, want %d", rejected(), n, n-slots)
		}
	}
	for i := range 10 {
		body := fmt.Sprintf(`{"metadata":{"name":"w%d"},"involvedObject":{"namespace":"default"},"reason":"Started","message":"m"}`, i)
		if code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "", body); code != http.StatusCreated {
			t.Fatalf("create %d beside the unread requests: %d %s", i, code, resp)
		}
	}
	return closeAll
}
