package etcdstore

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIndexRebuiltAfterWatchBreak: when the shared watch breaks, the store
// builds a new index at the current revision and swaps it in; lists
// started after writes made meanwhile (here by another replica) see them,
// deleted events are gone, and the new index follows the watch on.
func TestIndexRebuiltAfterWatchBreak(t *testing.T) {
	ctx, a, b := watchBreakStores(t, "")
	first := a.idx.Load()
	breakAndChange(ctx, t, a, b)
	deadline := time.Now().Add(30 * time.Second)
	for a.indexBuilds.Load() == 0 || a.idx.Load() == first {
		if time.Now().After(deadline) {
			t.Fatal("the index was not rebuilt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkAfterBreak(ctx, t, a, b, "rebuilt")
}

// TestDiskIndexReconciledAfterWatchBreak: with the on-disk index, a break
// in the shared watch reconciles the index in place instead of building a
// new one: the unchanged events are not fetched again (at most the three
// created meanwhile are), lists see the writes made meanwhile and the
// deletes, and the index follows the restarted watch.
func TestDiskIndexReconciledAfterWatchBreak(t *testing.T) {
	ctx, a, b := watchBreakStores(t, t.TempDir())
	breakAndChange(ctx, t, a, b)
	deadline := time.Now().Add(30 * time.Second)
	for a.IndexReconciliations() < 2 { // the first was Open's, of a new index
		if time.Now().After(deadline) {
			t.Fatal("the index was not reconciled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f := a.IndexKeysFetched(); f > 3 {
		t.Errorf("the reconciliation fetched %d keys; at most the 3 created since the break", f)
	}
	checkAfterBreak(ctx, t, a, b, "reconciled")
}

// watchBreakStores opens two stores on a new etcd: a, whose watch the
// test breaks (its index on disk in indexDir, or in memory), and b, the
// other replica that writes; b has written old0..old4 (reason Old), and
// a's indexed list has them.
func watchBreakStores(t *testing.T, indexDir string) (context.Context, *Store, *Store) {
	t.Helper()
	e, endpoint := etcdtest.Start(t, t.TempDir())
	t.Cleanup(e.Close)
	open := func(dir string) *Store {
		s, err := Open(Options{Endpoints: []string{endpoint}, IndexDir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(indexDir), open("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	for i := range 5 {
		if _, err := b.Create(ctx, reasonEvent("old"+strconv.Itoa(i), "Old"), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := indexedListNames(ctx, t, a, "Old"); len(got) != 5 {
		t.Fatalf("before the break: %v", got)
	}
	return ctx, a, b
}

// breakAndChange breaks a's shared watch, then b deletes old0..old2 and
// creates new0..new2.
func breakAndChange(ctx context.Context, t *testing.T, a, b *Store) {
	t.Helper()
	(*a.hubBreak.Load())()
	for i := range 3 {
		if _, err := b.Delete(ctx, "default", "old"+strconv.Itoa(i), storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctx, reasonEvent("new"+strconv.Itoa(i), "New"), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAfterBreak checks, once a's index is rebuilt or reconciled (how:
// for the messages), that a's lists see b's changes made meanwhile and
// follow b's writes after.
func checkAfterBreak(ctx context.Context, t *testing.T, a, b *Store, how string) {
	t.Helper()
	list := func(reason string) []string {
		t.Helper()
		return indexedListNames(ctx, t, a, reason)
	}
	if got := list("Old"); len(got) != 2 {
		t.Fatalf("after the break, Old: %v, want old3 and old4", got)
	}
	if got := list("New"); len(got) != 3 {
		t.Fatalf("after the break, New: %v, want new0..new2", got)
	}
	// The index follows the restarted watch.
	if _, err := b.Create(ctx, reasonEvent("later", "Later"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := list("Later"); len(got) != 1 {
		t.Fatalf("after the restart, Later: %v", got)
	}
	if n := a.idx.Load().m.Len(); n != 6 {
		t.Fatalf("the %s index holds %d events, want 6", how, n)
	}
}

// reasonEvent is an event about pod default/p with the given reason.
func reasonEvent(name, reason string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Reason:         reason,
	}
}

// indexedListNames lists the events of s with the given reason, failing
// unless the list went through the index, and returns their names.
func indexedListNames(ctx context.Context, t *testing.T, s *Store, reason string) []string {
	t.Helper()
	f, err := eventapi.ParseFieldSelector(eventapi.CoreV1, "reason="+reason, true)
	if err != nil {
		t.Fatal(err)
	}
	before := s.IndexedLists()
	res, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Fields: f}})
	if err != nil {
		t.Fatal(err)
	}
	if s.IndexedLists() == before {
		t.Fatal("the list did not go through the index")
	}
	names := []string{}
	for _, it := range res.Items {
		names = append(names, it.Name)
	}
	return names
}
