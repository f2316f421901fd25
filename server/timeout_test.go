package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/kubevents/kubevents/internal/metricstest"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
)

// TestSlowBodiesDoNotHoldWriteSlots: 250 clients that send a write's
// headers and one byte of its body (more than the 200 mutating in-flight
// slots) do not keep other writes out: the body is read before a slot is
// taken.
func TestSlowBodiesDoNotHoldWriteSlots(t *testing.T) {
	e := newEnv(t, time.Hour)
	addr := strings.TrimPrefix(e.url, "http://")
	const slowClients = 250
	for i := range slowClients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := fmt.Fprintf(c, "POST /api/v1/namespaces/default/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr); err != nil {
			t.Fatalf("slow client %d: %v", i, err)
		}
	}
	// Writes keep succeeding at once while the slow clients hang on
	// (client-go is not used: it would retry a 429).
	body := `{"metadata":{"name":"n%d"},"involvedObject":{"namespace":"default"},"reason":"Started","message":"m"}`
	for i := 0; i < 20; i++ {
		start := time.Now()
		if code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "", fmt.Sprintf(body, i)); code != http.StatusCreated {
			t.Fatalf("create %d beside %d slow clients: %d %s", i, slowClients, code, resp)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("create %d took %v", i, took)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blockingStore is a store whose Get waits until its request is cancelled.
type blockingStore struct{ storage.Interface }

func (blockingStore) Get(ctx context.Context, _, _ string) (*corev1.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRequestTimeout: a request that is not answered within the request
// timeout (on the server's clock) gets kube-apiserver's 504, and its
// handler's context is cancelled.
func TestRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		query string
		after time.Duration
	}{{"", server.DefaultRequestTimeout}, {"?timeout=10s", 10 * time.Second}, {"?timeout=5m", server.DefaultRequestTimeout}} {
		t.Run(tc.query, func(t *testing.T) { testRequestTimeout(t, tc.query, tc.after) })
	}
	e := newEnv(t, time.Hour)
	if code, body := e.do(http.MethodGet, "/api/v1/namespaces/default/events?timeout=soon", "", "", ""); code != http.StatusBadRequest ||
		!strings.Contains(body, "invalid timeout specified in the request URL") {
		t.Fatalf("invalid timeout: %d %s, want 400", code, body)
	}
}

// testRequestTimeout asks for a request the store never answers, with
// query, and checks it gets 504 no sooner than after.
func testRequestTimeout(t *testing.T, query string, after time.Duration) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.Store = blockingStore{c.Store} })
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, e.url+"/api/v1/namespaces/default/events/a"+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, string(b)}
	}()
	var r result
	func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case r = <-done:
				return
			case <-time.After(20 * time.Millisecond):
				e.clock.Step(time.Second)
			}
		}
		t.Fatal("no answer within 10s")
	}()
	if r.code != http.StatusGatewayTimeout || !strings.Contains(r.body, `"reason":"Timeout"`) ||
		!strings.Contains(r.body, "Timeout: request did not complete within requested timeout - context deadline exceeded") {
		t.Fatalf("got %d %s, want kube-apiserver's 504", r.code, r.body)
	}
	// The clock moves on while the request reaches its handler, so the
	// wait may be longer than the timeout; a shorter timeout parameter
	// must still end the request before the server's own.
	waited := e.clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if waited < after || (after < server.DefaultRequestTimeout && waited >= server.DefaultRequestTimeout) {
		t.Fatalf("timed out after %v, want %v", waited, after)
	}
}

// TestIdleConnectionsAreClosed: the server closes a keep-alive connection
// that sends no request within the idle timeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.IdleTimeout = 200 * time.Millisecond })
	hs := e.srv.NewHTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		_ = hs.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A generous bound: the server must close well before it.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read gave %v, want EOF (closed by the server)", err)
	}
}

// TestSlowReaderIsCutOff: a client that asks for a large list and does
// not read it is cut off by the write deadline; the request ends instead
// of holding its handler (and the response) forever.
func TestSlowReaderIsCutOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	var store storage.Interface
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.WriteTimeout = 200 * time.Millisecond
		c.Registry = reg
		store = c.Store
	})
	// 12 MiB of events: more than loopback socket buffers hold for a
	// client that does not read (4 MiB to send, 128 KiB to receive).
	// Written to the store directly: a create's answer echoes its
	// megabyte, which a loaded machine may not send within the 200 ms
	// write deadline this test sets for the list.
	for i := range 12 {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big%d", i), Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason:         "Started", Message: strings.Repeat("m", 1<<20), Type: corev1.EventTypeNormal}
		if _, err := store.Create(e.ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addr := strings.TrimPrefix(e.url, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET /api/v1/namespaces/default/events HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", addr); err != nil {
		t.Fatal(err)
	}
	lists := func() float64 {
		return metricstest.Sum(t, reg, "eventsd_requests_total", "verb", "list")
	}

	// Without the write timeout the handler would wait for ever; the bound
	// only ends the test, and is generous for a saturated machine (with
	// -race, encoding 12 MiB takes seconds there).
	for deadline := time.Now().Add(60 * time.Second); lists() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the unread list still holds its handler after 60s")
		}
	}
}

// stuckStore is a store whose creates wait, ignoring their context, until
// release is closed: a handler that outlives its request's timeout.
type stuckStore struct {
	storage.Interface
	entered chan struct{}
	release chan struct{}
}

func (s stuckStore) Create(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Interface.Create(context.WithoutCancel(ctx), ev, opts)
}

// TestTimedOutHandlerIsAnsweredOnTime: a write whose handler is stuck past
// the request timeout is answered 504 when the timeout fires, not when the
// handler returns (kube-apiserver's timeout filter); the handler goes on
// in the background and keeps its in-flight slot until it returns, so
// work that outlives its answer still counts against the limits; Drain
// waits for it.
func TestTimedOutHandlerIsAnsweredOnTime(t *testing.T) {
	stuck := stuckStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		stuck.Interface = c.Store
		c.Store = stuck
		c.MaxMutatingRequestsInflight = 1
	})
	released := false
	defer func() {
		if !released {
			close(stuck.release)
		}
	}()
	body := `{"metadata":{"name":"%s"},"involvedObject":{"namespace":"default"},"reason":"Started","message":"m"}`
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events?timeout=5s", "application/json", "", fmt.Sprintf(body, "stuck"))
		done <- result{code, resp}
	}()
	<-stuck.entered
	var r result
	func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case r = <-done:
				return
			case <-time.After(20 * time.Millisecond):
				e.clock.Step(time.Second)
			}
		}
		t.Fatal("no answer within 10s while the handler is stuck")
	}()
	if r.code != http.StatusGatewayTimeout || !strings.Contains(r.body, "request did not complete within requested timeout") {
		t.Fatalf("stuck create: %d %s, want 504", r.code, r.body)
	}
	// The stuck handler still holds the one mutating slot.
	if code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "", fmt.Sprintf(body, "next")); code != http.StatusTooManyRequests {
		t.Fatalf("create beside the stuck handler: %d %s, want 429", code, resp)
	}
	close(stuck.release)
	released = true
	if err := e.srv.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	// Once it returns, the slot is free again; the write it was given
	// reached the store before its answer timed out, so it is stored: a
	// 504 says nothing of whether a write was applied.
	if code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "", fmt.Sprintf(body, "after")); code != http.StatusCreated {
		t.Fatalf("create after the stuck handler returned: %d %s", code, resp)
	}
	if _, err := e.cs.CoreV1().Events("default").Get(e.ctx, "stuck", metav1.GetOptions{}); err != nil {
		t.Fatalf("the timed-out create: %v", err)
	}
}
