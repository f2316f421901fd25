package server

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// blockingStore holds every Create until release is closed.
type blockingStore struct {
	storage.Interface
	entered chan struct{}
	release chan struct{}
}

func (b *blockingStore) Create(ctx context.Context, ev *corev1.Event, o storage.WriteOptions) (*corev1.Event, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Interface.Create(ctx, ev, o)
}

// TestMutatingInflightLimit: a write beyond the limit is refused with 429
// and Retry-After, counted, and the write in flight still succeeds; reads
// have their own limit.
func TestMutatingInflightLimit(t *testing.T) {
	base, err := pebblestore.Open(pebblestore.Options{Dir: "d", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	store := &blockingStore{Interface: base, entered: make(chan struct{}, 1), release: make(chan struct{})}
	var logs bytes.Buffer
	srv, err := New(Config{Store: store, MaxMutatingRequestsInflight: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		_ = srv.Drain(context.Background())
	}()
	post := func(name string) *http.Response {
		resp, err := http.Post(hs.URL+"/api/v1/namespaces/default/events", "application/json",
			strings.NewReader(`{"metadata":{"name":"`+name+`"},"involvedObject":{"namespace":"default"}}`))
		if err != nil {
			t.Error(err)
			return nil
		}
		resp.Body.Close()
		return resp
	}
	first := make(chan *http.Response)
	go func() { first <- post("a") }()
	<-store.entered // a holds the only write slot
	if resp := post("b"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second write: %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, err := http.Get(hs.URL + "/api/v1/namespaces/default/events"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a read while writes are full: %v %v", resp, err)
	}
	close(store.release)
	if resp := <-first; resp.StatusCode != http.StatusCreated {
		t.Fatalf("the write in flight: %d", resp.StatusCode)
	}
	if n := testutil.ToFloat64(srv.metrics.rejected.WithLabelValues("mutating")); n != 1 {
		t.Fatalf("rejected counter %v, want 1", n)
	}
	if !strings.Contains(logs.String(), "too many requests in flight") {
		t.Fatalf("the refusal was not logged: %s", logs.String())
	}
}

func TestLogLimiter(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var buf bytes.Buffer
	l := newLogLimiter(clk, slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	for i := 0; i < 5; i++ {
		l.Warn("storm")
	}
	clk.Step(11 * time.Second)
	l.Warn("storm")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "similarSinceLastLog=4") {
		t.Fatalf("logged %q; want 2 lines, the second counting 4 suppressed", lines)
	}
}
