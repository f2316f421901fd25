package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// electionTTL is the session TTL of the election tests: short, so that a
// revoked lease is noticed within a second (a keep-alive per third).
const electionTTL = 3 * time.Second

// replicaWith opens another store on e's etcd, as another eventsd replica.
func (e *env) replicaWith(mod func(*etcdstore.Options)) *etcdstore.Store {
	e.t.Helper()
	opts := etcdstore.Options{Client: e.cli, Clock: e.clock, ElectionTTL: electionTTL, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&opts)
	}
	s, err := etcdstore.Open(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

type leadResult struct {
	leading context.Context
	release func()
	err     error
}

// lead calls Lead in the background.
func lead(ctx context.Context, s *etcdstore.Store, name string) <-chan leadResult {
	ch := make(chan leadResult, 1)
	go func() {
		l, r, err := s.Lead(ctx, name)
		ch <- leadResult{l, r, err}
	}()
	return ch
}

func leads(t *testing.T, ch <-chan leadResult, within time.Duration) leadResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Lead: %v", r.err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("not leading within %v", within)
	}
	return leadResult{}
}

func waits(t *testing.T, ch <-chan leadResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Lead returned (%v) while another replica leads", r.err)
	case <-time.After(300 * time.Millisecond):
	}
}

func ended(t *testing.T, ctx context.Context, within time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("leading context still live after %v", within)
	}
}

// TestLeadOneAtATime: of two replicas one leads; the other takes over
// once the first releases, and again once the first closes, at once (the
// session's lease is revoked, not left to expire); a Lead whose context
// ends while another leads returns its error.
func TestLeadOneAtATime(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.ElectionTTL = electionTTL })
	a := e.s
	b := e.replicaWith(nil)
	ra := leads(t, lead(e.ctx, a, "export"), 10*time.Second)
	bch := lead(e.ctx, b, "export")
	waits(t, bch)
	if got := e.getPrefix("/registry/kubevents.io/leader/export/"); len(got.Kvs) != 2 {
		t.Fatalf("%d candidates' keys under the election, want 2", len(got.Kvs))
	}
	short, cancel := context.WithTimeout(e.ctx, 200*time.Millisecond)
	defer cancel()
	if _, _, err := a.Lead(short, "export"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lead with an ended context: got %v, want its error", err)
	}
	ra.release()
	ended(t, ra.leading, 10*time.Second)
	rb := leads(t, bch, 10*time.Second)
	ach := lead(e.ctx, a, "export")
	waits(t, ach)
	// Less than the TTL: the closing store revoked its session.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ended(t, rb.leading, time.Second)
	ra = leads(t, ach, electionTTL-time.Second)
	// Elections of other names are independent.
	rc := leads(t, lead(e.ctx, e.replicaWith(nil), "other"), 10*time.Second)
	rc.release()
	ra.release()
}

// TestLeadEndsWithStore: a Lead waiting on a store that closes returns
// ErrClosed, and so does a Lead on a closed store.
func TestLeadEndsWithStore(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.ElectionTTL = electionTTL })
	ra := leads(t, lead(e.ctx, e.s, "export"), 10*time.Second)
	b := e.replicaWith(nil)
	bch := lead(e.ctx, b, "export")
	waits(t, bch)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-bch:
		if !errors.Is(r.err, storage.ErrClosed) {
			t.Fatalf("Lead on a closing store: got %v, want ErrClosed", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lead still waiting after its store closed")
	}
	if _, _, err := b.Lead(e.ctx, "export"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Lead on a closed store: got %v, want ErrClosed", err)
	}
	if got := e.getPrefix("/registry/kubevents.io/leader/export/"); len(got.Kvs) != 1 {
		t.Fatalf("%d keys under the election after the waiting candidate closed, want the leader's", len(got.Kvs))
	}
	ra.release()
}

// TestLeadDeposedCursorFenced: a replica whose session is lost (here its
// lease is revoked from outside, as when etcd expires it while the
// replica is cut off) stops leading, and the cursors it saves with its
// leading context fail, even before it notices, while the new leader's
// are saved.
func TestLeadDeposedCursorFenced(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.ElectionTTL = electionTTL })
	a := e.s
	b := e.replicaWith(nil)
	ra := leads(t, lead(e.ctx, a, "export"), 10*time.Second)
	if err := a.SaveCursor(ra.leading, "sink", 5); err != nil {
		t.Fatalf("the leader's cursor: %v", err)
	}
	bch := lead(e.ctx, b, "export")
	waits(t, bch)
	keys := e.getPrefix("/registry/kubevents.io/leader/export/")
	if len(keys.Kvs) != 2 {
		t.Fatalf("%d candidates' keys, want 2", len(keys.Kvs))
	}
	leaderKey := keys.Kvs[0] // the oldest leads
	for _, kv := range keys.Kvs {
		if kv.CreateRevision < leaderKey.CreateRevision {
			leaderKey = kv
		}
	}
	if _, err := e.cli.Revoke(e.ctx, clientv3.LeaseID(leaderKey.Lease)); err != nil {
		t.Fatal(err)
	}
	// Before a notices: its leading context's values, not its liveness.
	err := a.SaveCursor(context.WithoutCancel(ra.leading), "sink", 4)
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a deposed leader's cursor: got %v, want ErrConflict", err)
	}
	ended(t, ra.leading, electionTTL)
	rb := leads(t, bch, 10*time.Second)
	if err := b.SaveCursor(rb.leading, "sink", 7); err != nil {
		t.Fatalf("the new leader's cursor: %v", err)
	}
	if err := a.SaveCursor(context.WithoutCancel(ra.leading), "sink", 6); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a deposed leader's cursor after the new leader's: got %v, want ErrConflict", err)
	}
	if got, _, err := a.Cursor(e.ctx, "sink"); err != nil || got != 7 {
		t.Fatalf("cursor %d, %v; want the new leader's 7", got, err)
	}
	rb.release()
}

// TestCursorLayout: a cursor is <prefix>/kubevents.io/exportcursors/<name>
// holding the revision in decimal, without a lease, outside the events
// prefix kube-apiserver reads.
func TestCursorLayout(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.s.SaveCursor(e.ctx, "loki", 42); err != nil {
		t.Fatal(err)
	}
	resp := e.get("/registry/kubevents.io/exportcursors/loki")
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "42" || resp.Kvs[0].Lease != 0 {
		t.Fatalf("cursor key holds %v, want 42 without a lease", resp.Kvs)
	}
	other := e.replicaWith(func(o *etcdstore.Options) { o.Prefix = "/custom" })
	if err := other.SaveCursor(e.ctx, "loki", 43); err != nil {
		t.Fatal(err)
	}
	if resp := e.get("/custom/kubevents.io/exportcursors/loki"); len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "43" {
		t.Fatalf("cursor under /custom holds %v", resp.Kvs)
	}
	if got, _, _ := e.s.Cursor(e.ctx, "loki"); got != 42 {
		t.Fatalf("prefixes share a cursor: %d", got)
	}
	for _, bad := range []string{"", "a/b"} {
		if err := e.s.SaveCursor(e.ctx, bad, 1); err == nil {
			t.Fatalf("cursor %q saved", bad)
		}
	}
}

// TestHoldAcrossReplicas: the replica that compacts honours the hold of
// another (the exporter runs on one replica; any may win a compaction
// round), until that hold is released.
func TestHoldAcrossReplicas(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.CompactionInterval = -1 }) // holds, never compacts
	compactor := e.replicaWith(func(o *etcdstore.Options) { o.HistoryMaxRevisions = 10 })
	for i := 0; i < 20; i++ {
		if _, err := e.s.Create(e.ctx, event("default", fmt.Sprintf("before%02d", i)), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	created, err := e.s.Create(e.ctx, event("default", "held"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := rev(t, created.ResourceVersion)
	e.s.HoldHistory(held)
	waitFor(t, "the hold published", func() bool {
		kvs := e.getPrefix("/registry/kubevents.io/historyholds/").Kvs
		return len(kvs) == 1 && string(kvs[0].Value) == strconv.FormatInt(held, 10) && kvs[0].Lease != 0
	})
	for i := 0; i < 50; i++ {
		if _, err := e.s.Create(e.ctx, event("default", fmt.Sprintf("e%02d", i)), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oldest := func() int64 { return compactor.Stats().OldestRevision }
	waitFor(t, "compaction up to the hold", func() bool {
		e.clock.Step(etcdstore.DefaultCompactionInterval)
		return oldest() >= held+1
	})
	for i := 0; i < 5; i++ {
		e.clock.Step(etcdstore.DefaultCompactionInterval)
		time.Sleep(20 * time.Millisecond)
	}
	if o := oldest(); o != held+1 {
		t.Fatalf("compacted to %d, want %d: the other replica's hold at %d was not kept", o, held+1, held)
	}
	e.s.HoldHistory(0)
	waitFor(t, "the hold withdrawn", func() bool { return len(e.getPrefix("/registry/kubevents.io/historyholds/").Kvs) == 0 })
	waitFor(t, "compaction past the released hold", func() bool {
		e.clock.Step(etcdstore.DefaultCompactionInterval)
		return oldest() > held+1
	})
}

func (e *env) getPrefix(prefix string) *clientv3.GetResponse {
	e.t.Helper()
	resp, err := e.cli.Get(e.ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
