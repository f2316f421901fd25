package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// Timeouts of the failure tests: short, so that a request to a dead etcd
// fails quickly, with room for a loaded test machine.
const (
	failRequestTimeout = 500 * time.Millisecond
	failReadycheck     = 500 * time.Millisecond
	// failBound is how long a request may take while etcd is down: the
	// request timeout plus scheduling slack.
	failBound = failRequestTimeout + 2*time.Second
	// recoverTimeout bounds waiting for the store to recover.
	recoverTimeout = 30 * time.Second
)

// openFailing opens a store on endpoints with the failure tests'
// timeouts and a fake clock for Health's cache.
func openFailing(t *testing.T, endpoints []string) (*etcdstore.Store, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := etcdstore.Open(etcdstore.Options{
		Endpoints:          endpoints,
		DialTimeout:        etcdtest.StartTimeout,
		RequestTimeout:     failRequestTimeout,
		ReadycheckTimeout:  failReadycheck,
		CompactionInterval: -1,
		Clock:              clk,
		Logger:             slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

// wantUnreachable checks that err is the store's answer while etcd is
// unavailable, given within failBound of start, naming an endpoint.
func wantUnreachable(t *testing.T, what string, start time.Time, err error, endpoints []string) {
	t.Helper()
	took := time.Since(start)
	if !errors.Is(err, storage.ErrUnreachable) || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("%s while etcd is down: %v, want storage.ErrUnreachable", what, err)
	}
	if took > failBound {
		t.Fatalf("%s took %v while etcd is down, want at most %v", what, took, failBound)
	}
	named := false
	for _, ep := range endpoints {
		named = named || strings.Contains(err.Error(), "etcd at "+ep)
	}
	if !named || !strings.Contains(err.Error(), "is unavailable") {
		t.Fatalf("%s: %q does not say which etcd is unavailable", what, err)
	}
}

// checkAllFail checks that Get, List, Create and a new Watch fail with
// ErrUnreachable in bounded time, and so does Health.
func checkAllFail(t *testing.T, s *etcdstore.Store, clk *clocktesting.FakeClock, endpoints []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := s.Get(ctx, "default", "x")
	wantUnreachable(t, "Get", start, err, endpoints)
	start = time.Now()
	_, err = s.List(ctx, storage.ListOptions{})
	wantUnreachable(t, "List", start, err, endpoints)
	start = time.Now()
	_, err = s.List(ctx, storage.ListOptions{Selector: fieldSel(t, "reason=Started")})
	wantUnreachable(t, "indexed List", start, err, endpoints)
	start = time.Now()
	_, err = s.Create(ctx, event("default", "during-outage"), storage.WriteOptions{})
	wantUnreachable(t, "Create", start, err, endpoints)
	start = time.Now()
	_, err = s.Watch(ctx, storage.WatchOptions{})
	wantUnreachable(t, "Watch", start, err, endpoints)
	start = time.Now()
	err = s.SaveRecords(ctx, "lineage", []storage.RecordWrite{{Key: "k", Value: []byte("v")}})
	wantUnreachable(t, "SaveRecords", start, err, endpoints)
	start = time.Now()
	err = s.Records(ctx, "lineage", func(string, []byte) error { return nil })
	wantUnreachable(t, "Records", start, err, endpoints)
	// A caller whose own deadline comes first (the server's request
	// timeout, a client's timeout parameter) gets its context's error:
	// the server answers that with its own 504.
	short, cancelShort := context.WithTimeout(ctx, failRequestTimeout/5)
	_, err = s.Get(short, "default", "x")
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("Get with a caller's deadline shorter than the request timeout: %v, want the caller's context.DeadlineExceeded", err)
	}
	clk.Step(2 * time.Second) // past Health's cache
	start = time.Now()
	wantUnreachable(t, "Health", start, s.Health(), endpoints)
	// Once Health has seen etcd unavailable, Stats (metrics scrapes)
	// keeps its last figures rather than waiting for etcd's timeouts.
	start = time.Now()
	s.Stats()
	if took := time.Since(start); took > failRequestTimeout/2 {
		t.Fatalf("Stats took %v while etcd is known to be down", took)
	}
}

// waitRecovered waits until Health and a Create succeed again, stepping
// the fake clock past Health's cache between tries.
func waitRecovered(t *testing.T, s *etcdstore.Store, clk *clocktesting.FakeClock, name string) {
	t.Helper()
	deadline := time.Now().Add(recoverTimeout)
	for {
		clk.Step(2 * time.Second)
		herr := s.Health()
		var cerr error
		if herr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, cerr = s.Create(ctx, event("default", name), storage.WriteOptions{})
			cancel()
			if cerr == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover: health %v, create %v", herr, cerr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nextAdded waits for w to deliver name ADDED, skipping other events.
func nextAdded(t *testing.T, w storage.Watcher, name string) {
	t.Helper()
	timeout := time.After(recoverTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended waiting for %s", name)
			}
			if ev.Err != nil {
				t.Fatalf("the watch ended waiting for %s: %v", name, ev.Err)
			}
			if ev.Type == watch.Added && ev.Object.Name == name {
				return
			}
		case <-timeout:
			t.Fatalf("no ADDED %s", name)
		}
	}
}

// TestEtcdDownAndBack: with its only etcd member stopped, the store
// answers every request with ErrUnreachable within the request timeout
// and Health reports it; once etcd is back on the same data and port,
// everything works again without reopening the store: writes succeed, a
// watch opened before the outage resumes and sees writes made after it,
// and indexed lists (fed by the shared watch) see another client's
// writes.
func TestEtcdDownAndBack(t *testing.T) {
	dir := t.TempDir()
	e, endpoint := etcdtest.Start(t, dir)
	t.Cleanup(func() { e.Close() }) // after the store's Cleanup
	s, clk := openFailing(t, []string{endpoint})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Create(ctx, event("default", "before"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("health with etcd up: %v", err)
	}
	w, err := s.Watch(ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	closed := etcdtest.Kill(e)
	// Within its cache interval on the store's clock, Health answers from
	// its last check, without asking etcd.
	if err := s.Health(); err != nil {
		t.Fatalf("health within the cache interval: %v, want the cached nil", err)
	}
	checkAllFail(t, s, clk, []string{endpoint})

	<-closed
	e, _ = etcdtest.Start(t, dir)
	waitRecovered(t, s, clk, "after")
	nextAdded(t, w, "after")
	if got, err := s.Get(ctx, "default", "before"); err != nil || got.Message != "started before" {
		t.Fatalf("get of a write from before the outage: %v, %v", got, err)
	}

	// Another client writes; the index catches up with it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	other, err := etcdstore.Open(etcdstore.Options{Client: cli, CompactionInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ev := event("default", "other")
	ev.Reason = "OtherClient"
	if _, err := other.Create(ctx, ev, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := s.IndexedLists()
	res, err := s.List(ctx, storage.ListOptions{Selector: fieldSel(t, "reason=OtherClient")})
	if err != nil || len(res.Items) != 1 || res.Items[0].Name != "other" {
		t.Fatalf("indexed list after recovery: %v, %v", res, err)
	}
	if s.IndexedLists() == before {
		t.Fatal("the list after recovery was not served by the index")
	}
	nextAdded(t, w, "other")
}

// TestEtcdQuorumLoss: with two of three members stopped, the store
// answers with ErrUnreachable in bounded time (no request hangs), and
// Health reports it; restarting one member restores a quorum and the
// store recovers by itself.
func TestEtcdQuorumLoss(t *testing.T) {
	c := etcdtest.StartCluster(t, t.TempDir(), 3)
	s, clk := openFailing(t, c.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Create(ctx, event("default", "before"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	c.Stop(0)
	c.Stop(1)
	checkAllFail(t, s, clk, c.Endpoints())

	c.Restart(1, true)
	waitRecovered(t, s, clk, "after")
	nextAdded(t, w, "after")
	if got, err := s.Get(ctx, "default", "before"); err != nil || got.Message != "started before" {
		t.Fatalf("get of a write from before the quorum loss: %v, %v", got, err)
	}
}

// Load of TestKillMemberUnderLoad.
const (
	loadWriters  = 8
	loadMaxTotal = 2000
	loadDuration = 4 * time.Second
	loadKillAt   = time.Second
)

// TestKillMemberUnderLoad: writers create events through the store while
// the leader of a three-member cluster is killed; every create that
// succeeded is readable afterwards with its content (failed ones may or
// may not exist).
func TestKillMemberUnderLoad(t *testing.T) {
	c := etcdtest.StartCluster(t, t.TempDir(), 3)
	s, _ := openFailing(t, c.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var (
		mu      sync.Mutex
		acked   = map[string]string{} // name -> message
		failed  atomic.Int64
		total   atomic.Int64
		stopped atomic.Bool
		wg      sync.WaitGroup
		errs    sync.Map // distinct failure messages
	)
	start := time.Now()
	for wi := range loadWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopped.Load(); i++ {
				if total.Add(1) > loadMaxTotal {
					return
				}
				name := fmt.Sprintf("w%d-%d", wi, i)
				ev := event("load", name)
				ev.Message = "message of " + name
				_, err := s.Create(ctx, ev, storage.WriteOptions{})
				if err != nil {
					failed.Add(1)
					errs.Store(err.Error(), true)
					continue
				}
				mu.Lock()
				acked[name] = ev.Message
				mu.Unlock()
			}
		}()
	}
	time.Sleep(loadKillAt)
	leader := c.Leader()
	if leader < 0 {
		leader = 0
	}
	c.Stop(leader)
	killedAt := time.Since(start)
	time.Sleep(loadDuration - loadKillAt)
	stopped.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("killed member %d (leader) after %v; %d creates acknowledged, %d failed", leader, killedAt.Round(time.Millisecond), len(acked), failed.Load())
	errs.Range(func(k, _ any) bool {
		t.Logf("failure: %s", k)
		return true
	})
	// Read back through a store that has never seen the writes.
	r, _ := openFailing(t, c.Endpoints())
	res, err := r.List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "load"}})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, ev := range res.Items {
		stored[ev.Name] = ev.Message
	}
	lost := 0
	for name, msg := range acked {
		if got, ok := stored[name]; !ok || got != msg {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged create %s: stored %q (present %v), want %q", name, got, ok, msg)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged creates lost", lost, len(acked))
	}
	if len(acked) == 0 {
		t.Fatal("no create succeeded")
	}
	t.Logf("all %d acknowledged creates read back; %d events stored in all", len(acked), len(stored))
}

// TestLeadLostWithEtcd: a leader cut off from etcd stops leading once
// its session's lease could not be kept alive for its TTL, its fenced
// cursor saves fail meanwhile, and once etcd is back it can lead again
// (after the old lease expires in etcd).
func TestLeadLostWithEtcd(t *testing.T) {
	const ttl = 2 * time.Second
	dir := t.TempDir()
	e, endpoint := etcdtest.Start(t, dir)
	t.Cleanup(func() { e.Close() }) // after the store's Cleanup
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := etcdstore.Open(etcdstore.Options{
		Endpoints:          []string{endpoint},
		DialTimeout:        etcdtest.StartTimeout,
		RequestTimeout:     failRequestTimeout,
		CompactionInterval: -1,
		ElectionTTL:        ttl,
		Clock:              clk,
		Logger:             slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := leads(t, lead(ctx, s, "export"), 10*time.Second)
	closed := etcdtest.Kill(e)
	ended(t, r.leading, ttl+failBound)
	if err := s.SaveCursor(context.WithoutCancel(r.leading), "sink", 1); !errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("cursor save with etcd down: got %v, want ErrUnreachable", err)
	}
	<-closed
	e, _ = etcdtest.Start(t, dir)
	ch := lead(ctx, s, "export")
	deadline := time.Now().Add(recoverTimeout)
	for {
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("Lead after etcd returned: %v", r.err)
			}
			if err := s.SaveCursor(r.leading, "sink", 2); err != nil {
				t.Fatalf("cursor save as the leader again: %v", err)
			}
			r.release()
			return
		case <-time.After(50 * time.Millisecond):
			clk.Step(time.Second) // Lead's retries wait on the store's clock
		}
		if time.Now().After(deadline) {
			t.Fatalf("not leading within %v of etcd's return", recoverTimeout)
		}
	}
}
