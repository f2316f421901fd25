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
	corev1 "k8s.io/api/core/v1"
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
	msg := strings.Repeat("m", 2048)
	for i := range stored {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("e%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("p%d", i), Namespace: fmt.Sprintf("ns%d", i%10)},
			Reason:         "Started", Message: msg, Type: corev1.EventTypeNormal}
		if _, err := store.Create(e.ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	heap0 := heapInUse()
	addr := strings.TrimPrefix(e.url, "http://")
	// Clients with a small receive window that never read: the server's
	// writes block once the socket buffers are full (7 MB of initial
	// events each, more than they hold).
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conns := make([]net.Conn, 0, watches)
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	defer closeAll()
	for i := range watches {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "GET /api/v1/events?watch=1 HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", addr); err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	metric := func(name string, labels ...string) float64 { return metricstest.Sum(t, reg, name, labels...) }
	for deadline := time.Now().Add(30 * time.Second); metric("eventsd_rejected_requests_total", "class", "readOnly") < watches-slots; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %v watches refused, %v initializing; want %d refused", metric("eventsd_rejected_requests_total", "class", "readOnly"),
				metric("eventsd_watch_initializations"), watches-slots)
		}
	}
	if n := metric("eventsd_watch_initializations"); n != slots {
		t.Fatalf("%v watches initializing, want %d (one per readOnly slot)", n, slots)
	}
	// Writes go on beside them.
	for i := range 10 {
		body := fmt.Sprintf(`{"metadata":{"name":"w%d"},"involvedObject":{"namespace":"default"},"reason":"Started","message":"m"}`, i)
		if code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "", body); code != http.StatusCreated {
			t.Fatalf("create %d beside the watches: %d %s", i, code, resp)
		}
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
