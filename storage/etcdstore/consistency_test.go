package etcdstore_test

import (
	"errors"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"strconv"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"k8s.io/apimachinery/pkg/watch"
)

// nextEvent is the watcher's next event, failing the test after 10 s.
func nextEvent(t *testing.T, w storage.Watcher) storage.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
	}
	return storage.Event{}
}

// TestWatchOnReplicaFromOtherReplicasRevision: a watch on replica b from
// a revision replica a just returned, which b's shared watch may not have
// delivered yet, gets exactly the changes after it: no duplicate of the
// write that returned the revision, nothing missed, no error.
func TestWatchOnReplicaFromOtherReplicasRevision(t *testing.T) {
	e := newEnv(t, nil)
	b := e.replica()
	const rounds = 100
	for i := range rounds {
		first, err := e.s.Create(e.ctx, event("default", "a"+strconv.Itoa(i)), storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := b.Watch(e.ctx, storage.WatchOptions{Revision: rev(t, first.ResourceVersion)})
		if err != nil {
			t.Fatal(err)
		}
		second, err := e.s.Create(e.ctx, event("default", "b"+strconv.Itoa(i)), storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev := nextEvent(t, w)
		if ev.Err != nil || ev.Type != watch.Added || ev.Object.Name != second.Name || ev.Revision != rev(t, second.ResourceVersion) {
			t.Fatalf("round %d: watch on b from a's revision %s: got %s %v (err %v), want ADDED %s at %s",
				i, first.ResourceVersion, ev.Type, ev.Object, ev.Err, second.Name, second.ResourceVersion)
		}
		w.Stop()
	}
	if n := b.CatchUpWatches(); n != 0 {
		t.Fatalf("%d catch-up watches on b, want 0: every watch started within its shared watch's reach", n)
	}
}

// TestWatchOnReplicaBookmarks: a watch on replica b with progress
// bookmarks gets bookmarks carrying revisions at least that of a write
// made through replica a, from etcd's progress notifications.
func TestWatchOnReplicaBookmarks(t *testing.T) {
	e := newEnv(t, nil)
	b := e.replica()
	w, err := b.Watch(e.ctx, storage.WatchOptions{Revision: b.Revision(), ProgressInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := e.s.Create(e.ctx, event("default", "x"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev.Type != watch.Added || ev.Object.Name != "x" {
		t.Fatalf("got %s %v, want ADDED x", ev.Type, ev.Object)
	}
	// A write outside the prefix moves etcd's revision on: the bookmark
	// carries etcd's revision, not only the last event's.
	resp, err := e.cli.Put(e.ctx, "/elsewhere", "v")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.clock.Step(time.Second)
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Bookmark {
				t.Fatalf("got %s %v, want BOOKMARK", ev.Type, ev.Object)
			}
			if ev.Revision < resp.Header.Revision {
				t.Fatalf("bookmark at %d, want at least %d (a's write at %s)", ev.Revision, resp.Header.Revision, created.ResourceVersion)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no bookmark on replica b in 10s")
		}
	}
}

// TestWatchFromRevisionCompactedElsewhere: once etcd has compacted past a
// revision (here directly, as another replica or a kube-apiserver would),
// a watch from it on a replica that did not compact, and still holds the
// changes in its ring, gets ErrCompacted as from etcd; a watch from the
// compacted revision itself still works.
func TestWatchFromRevisionCompactedElsewhere(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.CompactionInterval = -1 })
	var revs []int64
	for _, n := range []string{"x1", "x2", "x3"} {
		c, err := e.s.Create(e.ctx, event("default", n), storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev(t, c.ResourceVersion))
	}
	if _, err := e.cli.Compact(e.ctx, revs[2]); err != nil {
		t.Fatal(err)
	}
	w, err := e.s.Watch(e.ctx, storage.WatchOptions{Revision: revs[0]})
	if err == nil {
		ev := nextEvent(t, w)
		w.Stop()
		err = ev.Err
		if err == nil {
			t.Fatalf("watch from %d after etcd compacted at %d: got %s %v, want ErrCompacted", revs[0], revs[2], ev.Type, ev.Object)
		}
	}
	if !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from %d after etcd compacted at %d: got %v, want ErrCompacted", revs[0], revs[2], err)
	}
	// Changes after revs[1] start at the compacted revision: still there.
	w, err = e.s.Watch(e.ctx, storage.WatchOptions{Revision: revs[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := nextEvent(t, w); ev.Err != nil || ev.Object == nil || ev.Object.Name != "x3" {
		t.Fatalf("watch from %d: got %+v, want ADDED x3", revs[1], ev)
	}
}

// TestOneEtcdWatchPerReplica: many watches on a replica, from now on and
// from a revision another replica returned, open no etcd watch besides
// the replica's shared one, by etcd's own count of watchers.
func TestOneEtcdWatchPerReplica(t *testing.T) {
	e := newEnv(t, nil)
	b := e.replica()
	created, err := e.s.Create(e.ctx, event("default", "x"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := etcdtest.Watchers(t)
	const n = 50
	var ws []storage.Watcher
	for i := range n {
		opts := storage.WatchOptions{SendInitialEvents: i%2 == 0}
		if i%2 == 1 {
			opts.Revision = rev(t, created.ResourceVersion)
		}
		w, err := b.Watch(e.ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	later, err := e.s.Create(e.ctx, event("default", "y"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		for {
			ev := nextEvent(t, w)
			if ev.Err != nil {
				t.Fatalf("watcher %d: %v", i, ev.Err)
			}
			if ev.Object.Name == "y" {
				if ev.Object.ResourceVersion != later.ResourceVersion {
					t.Fatalf("watcher %d: y at %s, want %s", i, ev.Object.ResourceVersion, later.ResourceVersion)
				}
				break
			}
		}
	}
	if after := etcdtest.Watchers(t); after != before {
		t.Fatalf("etcd has %v watchers with %d watches on replica b, %v before: want no more", after, n, before)
	}
	if c := b.CatchUpWatches(); c != 0 {
		t.Fatalf("%d catch-up watches on b, want 0", c)
	}
}

// TestIndexedListAfterWriteOutsidePrefix: etcd's revision also moves on
// with writes outside the events prefix (compact_rev_key, other
// resources of a shared etcd), which the store's shared watch does not
// see as events. An indexed list, which waits for the index to reach
// etcd's current revision, still answers at once, on this replica and
// on another.
func TestIndexedListAfterWriteOutsidePrefix(t *testing.T) {
	e := newEnv(t, nil)
	b := e.replica()
	if _, err := e.s.Create(e.ctx, event("default", "x"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		put, err := e.cli.Put(e.ctx, "/registry/pods/default/p"+strconv.Itoa(i), "v")
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*etcdstore.Store{"a": e.s, "b": b} {
			start := time.Now()
			res, err := s.List(e.ctx, storage.ListOptions{Selector: fieldSel(t, "reason=Started")})
			if err != nil || len(res.Items) != 1 {
				t.Fatalf("indexed list on %s after a write outside the prefix: %v, %v", name, res, err)
			}
			if res.Revision < put.Header.Revision {
				t.Fatalf("list on %s at %d, before etcd's revision %d when it started", name, res.Revision, put.Header.Revision)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("indexed list on %s took %v after a write outside the prefix", name, d)
			}
		}
	}
}
