package etcdstore_test

import (
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
)

// TestCompactionOncePerInterval: two stores on one etcd (two eventsd
// replicas) compact once per interval between them, through
// compact_rev_key, to the revision seen one interval earlier; a watch
// from before it gets ErrCompacted.
func TestCompactionOncePerInterval(t *testing.T) {
	e := newEnv(t, nil)
	other, err := etcdstore.Open(etcdstore.Options{Client: e.cli, Clock: e.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	first, err := e.s.Create(e.ctx, event("default", "first"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		resp := e.get("compact_rev_key")
		if len(resp.Kvs) == 0 {
			return 0
		}
		return resp.Kvs[0].Version
	}
	// Each interval's tick reaches both stores; exactly one claims it.
	step := func(wantVersion int64) {
		t.Helper()
		e.clock.Step(etcdstore.DefaultCompactionInterval)
		deadline := time.Now().Add(10 * time.Second)
		for version() < wantVersion {
			if time.Now().After(deadline) {
				t.Fatalf("compact_rev_key at version %d, want %d", version(), wantVersion)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // let the loser try and fail
		if v := version(); v != wantVersion {
			t.Fatalf("compact_rev_key at version %d after one interval, want %d: both stores compacted", v, wantVersion)
		}
	}
	step(1) // the first round only records the revision
	if _, err := e.s.Create(e.ctx, event("default", "second"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	step(2) // compacts to the revision recorded in round 1
	deadline := time.Now().Add(10 * time.Second)
	for e.s.Stats().OldestRevision <= rev(t, first.ResourceVersion) || other.Stats().OldestRevision <= rev(t, first.ResourceVersion) {
		if time.Now().After(deadline) {
			t.Fatalf("oldest revisions %d and %d, want past %s", e.s.Stats().OldestRevision, other.Stats().OldestRevision, first.ResourceVersion)
		}
		e.clock.Step(etcdstore.DefaultCompactionInterval)
		time.Sleep(10 * time.Millisecond)
	}
	w, err := e.s.Watch(e.ctx, storage.WatchOptions{Revision: rev(t, first.ResourceVersion) - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if !errors.Is(ev.Err, storage.ErrCompacted) {
			t.Fatalf("watch from a compacted revision: got %+v, want ErrCompacted", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error from a watch at a compacted revision")
	}
	// The second item survives; it was written after the compaction point.
	if _, err := e.s.Get(e.ctx, "default", "second"); err != nil {
		t.Fatal(err)
	}
}

func rev(t *testing.T, rv string) int64 {
	t.Helper()
	r, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestContinueExpiresByCompaction: a continue token is served at its
// list's revision until etcd compacts past it, then gets kube-apiserver's
// 410 with a token to continue inconsistently.
func TestContinueExpiresByCompaction(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := e.s.Create(e.ctx, event("default", n), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := e.s.List(e.ctx, storage.ListOptions{Limit: 1})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, first.Continue)
	}
	later, err := e.s.Create(e.ctx, event("default", "later"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next, err := e.s.List(e.ctx, storage.ListOptions{Continue: first.Continue})
	if err != nil {
		t.Fatalf("before compaction: %v", err)
	}
	if next.Revision != first.Revision || len(next.Items) != 2 {
		t.Fatalf("second page at revision %d with %d items, want revision %d and b, c", next.Revision, len(next.Items), first.Revision)
	}
	rev, err := strconv.ParseInt(later.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.Compact(e.ctx, rev); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.List(e.ctx, storage.ListOptions{Continue: first.Continue})
	var expired *storage.ContinueExpiredError
	if !errors.As(err, &expired) || !errors.Is(err, storage.ErrCompacted) || expired.Inconsistent == "" {
		t.Fatalf("after compaction: got %v, want ErrCompacted with an inconsistent continue token", err)
	}
}
