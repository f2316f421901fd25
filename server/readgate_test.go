package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// TestInitGate: permits are handed to waiting watches oldest first,
// whatever order they came in; a waiter that times out or whose watch
// ends leaves the queue, and a permit granted as it gave up goes on to
// the next.
func TestInitGate(t *testing.T) {
	g := newReadGate(1)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	never := make(chan struct{})
	tickets := []uint64{g.ticket(), g.ticket(), g.ticket(), g.ticket()}
	if err := g.acquire(tickets[0], never, nil); err != nil {
		t.Fatal(err)
	}
	// The youngest comes first, then the oldest waiting: the oldest is
	// served first.
	order := make(chan uint64, 3)
	wait := func(tk uint64, done <-chan struct{}, stop <-chan time.Time) chan error {
		res := make(chan error, 1)
		go func() {
			err := g.acquire(tk, done, stop)
			if err == nil {
				order <- tk
			}
			res <- err
		}()
		return res
	}
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			g.mu.Lock()
			l := g.waiting.Len()
			g.mu.Unlock()
			if l == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", l, n)
			}
		}
	}
	youngest := wait(tickets[3], never, nil)
	waiting(1)
	timer := clk.NewTimer(time.Minute)
	timedOut := wait(tickets[1], never, timer.C())
	waiting(2)
	ended := make(chan struct{})
	endedRes := wait(tickets[2], ended, nil)
	waiting(3)

	// The oldest waiter (ticket 1) times out, ticket 2's watch ends:
	// both leave the queue without a permit.
	clk.Step(time.Minute)
	if err := <-timedOut; !errors.Is(err, errGateTimeout) {
		t.Fatalf("timed-out waiter: %v", err)
	}
	close(ended)
	if err := <-endedRes; err == nil || errors.Is(err, errGateTimeout) {
		t.Fatalf("ended waiter: %v", err)
	}
	waiting(1)
	g.release()
	if err := <-youngest; err != nil {
		t.Fatal(err)
	}
	if got := <-order; got != tickets[3] {
		t.Fatalf("granted to ticket %d, want %d", got, tickets[3])
	}

	// Oldest first: ticket 5 and 6 wait, 6 arriving first.
	t5, t6 := g.ticket(), g.ticket()
	r6 := wait(t6, never, nil)
	waiting(1)
	r5 := wait(t5, never, nil)
	waiting(2)
	g.release()
	if got := <-order; got != t5 {
		t.Fatalf("granted to ticket %d, want the older %d", got, t5)
	}
	g.release()
	if got := <-order; got != t6 {
		t.Fatalf("granted to ticket %d, want %d", got, t6)
	}
	if err := <-r5; err != nil {
		t.Fatal(err)
	}
	if err := <-r6; err != nil {
		t.Fatal(err)
	}
	g.release()
	if g.free != 1 || g.waiting.Len() != 0 {
		t.Fatalf("after all releases: %d free, %d waiting; want 1, 0", g.free, g.waiting.Len())
	}
}

// TestWatchWaitingForItsTurnTimesOut: a watch that cannot get a turn to
// send its initial events within the request timeout gets 429 before it
// starts (as a request queued too long by kube-apiserver's priority and
// fairness), is counted, and gives its in-flight slot back.
func TestWatchWaitingForItsTurnTimesOut(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := prometheus.NewRegistry()
	s, err := New(Config{Store: store, Clock: clk, Registry: reg, Logger: slog.New(slog.DiscardHandler), ReadConcurrency: 1, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer func() {
		s.BeginShutdown()
		hs.Close()
		_ = s.Drain(context.Background())
	}()
	// Every permit is taken.
	if err := s.readGate.acquire(s.readGate.ticket(), nil, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Get(hs.URL + "/api/v1/events?watch=1")
		if err != nil {
			t.Error(err)
			resp = nil
		}
		done <- resp
	}()
	var resp *http.Response
	func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case resp = <-done:
				return
			case <-time.After(20 * time.Millisecond):
				clk.Step(time.Second)
			}
		}
		t.Fatal("no answer within 10s")
	}()
	if resp == nil {
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("watch waiting past the request timeout: %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := metricstest.Sum(t, reg, "eventsd_watch_initialization_timeouts_total"); n != 1 {
		t.Fatalf("%v initialization timeouts counted, want 1", n)
	}
	if n := metricstest.Sum(t, reg, "eventsd_watch_initializations"); n != 0 {
		t.Fatalf("%v watches initializing, want 0", n)
	}
	if len(s.readOnly) != 0 {
		t.Fatalf("%d readOnly slots still taken", len(s.readOnly))
	}
}
