package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestRingBoundedInBytes writes events far larger than usual: the ring of
// recent changes keeps no more than RingBytes of them, and a watcher that
// needs the dropped ones reads them, in full, from the on-disk log.
func TestRingBoundedInBytes(t *testing.T) {
	const (
		ringBytes = 2 << 20
		big       = 300 << 10
		n         = 40 // 12 MiB of events, 24 MiB with their previous states
	)
	s, err := Open(Options{Dir: t.TempDir(), RingBytes: ringBytes, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	msg := strings.Repeat("x", big)
	for i := 0; i < n; i++ {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("big-%02d", i)}, Reason: "Big", Message: msg}
		if _, err := s.Create(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		upd := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ev.Name}, Reason: "Bigger", Message: msg}
		if _, err := s.Update(ctx, upd, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if kept, bytes := s.hub.usage(); bytes > ringBytes || kept == 0 && i > 0 {
			t.Fatalf("after %d writes the ring holds %d changes of %d bytes; budget %d", 2*(i+1), kept, bytes, ringBytes)
		}
	}
	kept, bytes := s.hub.usage()
	t.Logf("ring: %d of %d changes, %d bytes", kept, 2*n, bytes)
	if kept >= 2*n {
		t.Fatalf("ring kept all %d changes", kept)
	}
	w, err := s.Watch(ctx, storage.WatchOptions{Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for r := int64(2); r <= 2*n; r++ {
		e := <-w.ResultChan()
		if e.Err != nil || e.Revision != r || len(e.Object.Message) != big {
			t.Fatalf("change %d: %s at %d, err %v", r, e.Type, e.Revision, e.Err)
		}
		if want := map[bool]watch.EventType{true: watch.Modified, false: watch.Added}[r%2 == 0]; e.Type != want {
			t.Fatalf("change %d: %s, want %s", r, e.Type, want)
		}
	}
}

// TestHubDropsByCountAndBytes checks the ring's bookkeeping directly.
func TestHubDropsByCountAndBytes(t *testing.T) {
	h := newHub(4, 100, 0)
	h.append([]entry{{rev: 1, size: 10}, {rev: 2, size: 10}, {rev: 3, size: 10}, {rev: 4, size: 10}, {rev: 5, size: 10}})
	if n, b := h.usage(); n != 4 || b != 40 {
		t.Fatalf("by count: %d changes, %d bytes; want 4, 40", n, b)
	}
	if _, inRing, _ := h.since(1, 10, nil); inRing {
		t.Fatal("revision 1 still in the ring")
	}
	h.append([]entry{{rev: 6, size: 95}})
	if n, b := h.usage(); n != 1 || b != 95 {
		t.Fatalf("by bytes: %d changes, %d bytes; want 1, 95", n, b)
	}
	h.append([]entry{{rev: 7, size: 500}}) // larger than the budget: not kept
	if n, b := h.usage(); n != 0 || b != 0 {
		t.Fatalf("oversized: %d changes, %d bytes; want 0, 0", n, b)
	}
	if out, inRing, _ := h.since(7, 10, nil); inRing || len(out) != 0 {
		t.Fatalf("revision 7: inRing %v, %d changes", inRing, len(out))
	}
	if out, inRing, _ := h.since(8, 10, nil); !inRing || len(out) != 0 {
		t.Fatalf("revision 8 (next): inRing %v, %d changes", inRing, len(out))
	}
	for i, e := range h.ring {
		if e.obj != nil || e.size != 0 {
			t.Fatalf("slot %d still holds a dropped change", i)
		}
	}
}
