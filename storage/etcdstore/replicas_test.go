package etcdstore_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"k8s.io/apimachinery/pkg/watch"
)

// TestReplicas: two stores on one etcd, as two eventsd replicas: a watch
// on one sees the other's writes, revision preconditions hold across them,
// and each one's Revision follows the other's writes.
func TestReplicas(t *testing.T) {
	e := newEnv(t, nil)
	b, err := etcdstore.Open(etcdstore.Options{Client: e.cli, Clock: e.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w, err := b.Watch(e.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := e.s.Create(e.ctx, event("default", "x"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := func(typ watch.EventType) storage.Event {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			if ev.Type != typ || ev.Object == nil || ev.Object.Name != "x" {
				t.Fatalf("got %s %v, want %s x", ev.Type, ev.Object, typ)
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s x", typ)
		}
		return storage.Event{}
	}
	if ev := next(watch.Added); ev.Object.ResourceVersion != created.ResourceVersion {
		t.Fatalf("replica b saw revision %s, replica a wrote %s", ev.Object.ResourceVersion, created.ResourceVersion)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.Revision() < rev(t, created.ResourceVersion) {
		if time.Now().After(deadline) {
			t.Fatalf("replica b at revision %d, a wrote %s", b.Revision(), created.ResourceVersion)
		}
		time.Sleep(10 * time.Millisecond)
	}
	upd := event("default", "x")
	upd.Count = 2
	if _, err := b.Update(e.ctx, upd, storage.WriteOptions{Precondition: storage.Preconditions{Revision: rev(t, created.ResourceVersion)}}); err != nil {
		t.Fatal(err)
	}
	next(watch.Modified)
	upd.Count = 3
	if _, err := e.s.Update(e.ctx, upd, storage.WriteOptions{Precondition: storage.Preconditions{Revision: rev(t, created.ResourceVersion)}}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale update through replica a: got %v, want ErrConflict", err)
	}
	if _, err := e.s.Delete(e.ctx, "default", "x", storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next(watch.Deleted); ev.Object.Count != 2 {
		t.Fatalf("DELETED carries count %d, want the last state's 2", ev.Object.Count)
	}
}
