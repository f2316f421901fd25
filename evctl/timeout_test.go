package evctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/internal/syncbuf"
)

// silentServer accepts connections and never answers; it returns its URL.
// The connections are closed when the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// TestRequestTimeoutSilentServer: against a server that accepts the
// connection and never answers, each command gives up after
// --request-timeout with an error that names it, instead of hanging.
func TestRequestTimeoutSilentServer(t *testing.T) {
	url := silentServer(t)
	for _, args := range [][]string{
		{"get"},
		{"get", "--for", "pod/web-1"},
		{"watch"},
		{"timeline", "pod/web-1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut syncbuf.Buffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs(append([]string{"--server", url, "--request-timeout=1s"}, args...))
			// The bound of the test, far beyond the timeout: the command
			// must not be the one to need it.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			err := cmd.ExecuteContext(ctx)
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("evctl %v hung until the test's own deadline (%v): %v", args, took, err)
			}
			if err == nil || !strings.Contains(err.Error(), "--request-timeout=1s") {
				t.Fatalf("evctl %v = %v, want an error naming --request-timeout=1s", args, err)
			}
			var te *timeoutError
			if !errors.As(err, &te) {
				t.Errorf("error %v is not a timeoutError", err)
			}
			if took < time.Second {
				t.Errorf("gave up after %v, before the timeout", took)
			}
		})
	}
}

// TestRequestTimeoutSyntax: kubectl's syntax (whole seconds, a duration,
// 0 for none) is accepted; anything else is refused before connecting.
func TestRequestTimeoutSyntax(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "5": 5 * time.Second, "1m": time.Minute, "250ms": 250 * time.Millisecond} {
		c := connFlags{server: "http://127.0.0.1:1", timeout: in}
		got, err := c.client()
		if err != nil {
			t.Fatalf("--request-timeout=%s: %v", in, err)
		}
		if got.timeout != want {
			t.Errorf("--request-timeout=%s = %v, want %v", in, got.timeout, want)
		}
	}
	c := connFlags{server: "http://127.0.0.1:1", timeout: "soon"}
	if _, err := c.client(); err == nil || !strings.Contains(err.Error(), "--request-timeout") {
		t.Errorf("--request-timeout=soon: %v, want an error naming the flag", err)
	}
	var fs = NewCommand(nil, nil).PersistentFlags()
	if def := fs.Lookup("request-timeout").DefValue; def != "0" {
		t.Errorf("default --request-timeout = %q, want kubectl's 0", def)
	}
}

func watchQuerier(t *testing.T, url string, timeout time.Duration, clk *clocktesting.FakeClock) *querier {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &querier{cs: cs, events: upstreamEvents(cs), watchEvents: upstreamEvents(cs), timeout: timeout, clock: clk}
}

// TestWatchStartBounded: a watch whose server never answers is given up
// after the timeout, on the querier's clock.
func TestWatchStartBounded(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	q := watchQuerier(t, srv.URL, 5*time.Second, clk)
	done := make(chan error, 1)
	go func() {
		w, err := q.watch(context.Background(), "default", metav1.ListOptions{})
		if w != nil {
			w.Stop()
		}
		done <- err
	}()
	<-arrived
	select {
	case err := <-done:
		t.Fatalf("watch ended before its timeout: %v", err)
	default:
	}
	clk.Step(5 * time.Second)
	select {
	case err := <-done:
		var te *timeoutError
		if !errors.As(err, &te) || te.timeout != 5*time.Second {
			t.Fatalf("watch = %v, want a timeoutError of 5s", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch was not given up when its timeout passed")
	}
}

// TestWatchOutlivesTimeout: once the server streams, the watch lives on
// past the timeout.
func TestWatchOutlivesTimeout(t *testing.T) {
	send := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-send:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"late","namespace":"default","resourceVersion":"7"}}}`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	q := watchQuerier(t, srv.URL, 5*time.Second, clk)
	w, err := q.watch(context.Background(), "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	clk.Step(time.Minute)
	close(send)
	select {
	case e, ok := <-w.ResultChan():
		if !ok || e.Type != "ADDED" {
			t.Fatalf("got %v %v, want the ADDED event sent after the timeout", e, ok)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no event after the timeout had passed")
	}
}

// TestWatchCommandOutlivesTimeout: evctl watch with a short
// --request-timeout still prints an event that comes three timeouts later,
// on the same stream: the timeout cuts neither the stream (client-go's
// overall timeout) nor its start once the headers came.
func TestWatchCommandOutlivesTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	var watches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			fmt.Fprint(w, `{"kind":"EventList","apiVersion":"events.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":[]}`)
			return
		}
		watches.Add(1)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(3 * timeout):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"late-event","namespace":"default","uid":"u1","resourceVersion":"7"},"reason":"Late","type":"Normal","eventTime":"2026-11-20T10:00:00.000000Z","reportingController":"c","reportingInstance":"i","action":"A"}}`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	var out, errOut syncbuf.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs([]string{"--server", srv.URL, "--request-timeout=" + timeout.String(), "watch"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(out.String(), "late-event") && !strings.Contains(out.String(), "Late") {
		select {
		case err := <-done:
			t.Fatalf("evctl watch ended: %v\n%s", err, errOut.String())
		case <-deadline:
			t.Fatalf("the event sent after the timeout was not printed:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := watches.Load(); n != 1 {
		t.Errorf("%d watch requests, want the one stream kept", n)
	}
}
