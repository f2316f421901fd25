package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestStoredBytesAccounting: the bytes the committer counts through
// creates, updates (changing indexed fields and sizes) and deletes equal a
// count of the stored objects, and survive a restart.
func TestStoredBytesAccounting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	open := func() *Store {
		s, err := Open(Options{Dir: dir, Clock: clk, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	check := func(s *Store, when string) {
		t.Helper()
		v, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer s.release(v)
		want, err := countStoredBytes(v.snap, s.indexes)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.StoredBytes(); got != want {
			t.Fatalf("%s: StoredBytes %d, the stored objects count %d", when, got, want)
		}
	}
	s := open()
	for i := range 20 {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("e%d", i)},
			InvolvedObject: corev1.ObjectReference{Name: "pod", UID: "u"}, Reason: "R", Type: corev1.EventTypeNormal}
		if _, err := s.Create(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	check(s, "after creates")
	for i := range 10 {
		ev, err := s.Get(ctx, "ns", fmt.Sprintf("e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ev.Reason = "AnotherReason"
		ev.Message = "longer now"
		ev.InvolvedObject.UID = ""
		if _, err := s.Update(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	check(s, "after updates")
	for i := 5; i < 15; i++ {
		if _, err := s.Delete(ctx, "ns", fmt.Sprintf("e%d", i), storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	check(s, "after deletes")
	before := s.StoredBytes()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if got := s.StoredBytes(); got != before {
		t.Fatalf("after a restart: StoredBytes %d, want %d", got, before)
	}
	check(s, "after a restart")
	// A data directory from before the budget has no count: it is made
	// from the objects at open.
	if err := s.db.Delete(metaBytes, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	if got := s.StoredBytes(); got != before {
		t.Fatalf("counted at open without %s: StoredBytes %d, want %d", metaBytes, got, before)
	}
}
