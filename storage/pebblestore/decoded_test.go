package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecodedCache: a list an index serves, asked again, gets the events
// decoded the first time (the same objects); an updated event is decoded
// again at its new revision, never served stale; the cache holds at most
// its capacity; concurrent lists and updates agree with the store.
func TestDecodedCache(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Options{Dir: "d", FS: vfs.NewMem(), DecodedCacheEvents: 32, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 100 {
		if _, err := s.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("e%03d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("p%d", i%4), UID: "u"},
			Reason:         "Started", Message: "m", Count: 1,
		}, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	byName := func(name string) []*corev1.Event {
		t.Helper()
		res, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvedName, Value: name}}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Items
	}
	first, again := byName("p1"), byName("p1")
	if len(first) != 25 || len(again) != 25 {
		t.Fatalf("%d and %d events", len(first), len(again))
	}
	shared := 0
	for i := range first {
		if first[i] == again[i] {
			shared++
		}
	}
	if shared == 0 {
		t.Fatal("a list asked again decoded every event again")
	}
	if n := s.decoded.len(); n > 32 {
		t.Fatalf("the cache keeps %d events, more than its 32", n)
	}

	// An update is served at its new revision.
	up := first[0].DeepCopy()
	up.Count = 7
	if _, err := s.Update(ctx, up, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range byName("p1") {
		if ev.Name == up.Name && ev.Count != 7 {
			t.Fatalf("%s served with count %d after its update to 7", ev.Name, ev.Count)
		}
	}

	// Concurrent lists (the two index paths: one lookup, and a union)
	// and updates agree with the store.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				ev := byName(fmt.Sprintf("p%d", (w+i)%4))
				if len(ev) != 25 {
					t.Errorf("%d events", len(ev))
					return
				}
				res, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvesName, Value: "p2"}}}})
				if err != nil || len(res.Items) != 25 {
					t.Errorf("involves: %v, %d events", err, len(res.Items))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			cur, err := s.Get(ctx, "ns", "e002")
			if err != nil {
				t.Error(err)
				return
			}
			cur.Count = int32(100 + i)
			if _, err := s.Update(ctx, cur, storage.WriteOptions{}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	for _, ev := range byName("p2") {
		if ev.Name == "e002" && ev.Count != 149 {
			t.Fatalf("e002 served with count %d, want its last, 149", ev.Count)
		}
	}
}
