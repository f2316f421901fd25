package pebblestore_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIndexedListObjects lists one pod's events, whose objects an indexed
// list reads candidate by candidate from its index entries: names that
// are prefixes of one another ("e1", "e10"), another pod's
// event between them, one deleted and one in another namespace must give
// exactly the pod's events, in key order, on every page size, and the
// union of the regarding and related indexes (involves) the same.
func TestIndexedListObjects(t *testing.T) {
	s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	create := func(ns, name, pod string) {
		t.Helper()
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Reason: "R",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}
		if _, err := s.Create(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []struct{ ns, name, pod string }{
		{"a", "e1", "x"}, {"a", "e10", "x"}, {"a", "e100", "y"}, {"a", "e1000", "x"}, {"a", "e11", "x"},
		{"a", "e2", "y"}, {"a", "e3", "x"}, {"b", "e1", "x"}, {"a", "e0", "x"},
	} {
		create(e.ns, e.name, e.pod)
	}
	if _, err := s.Delete(ctx, "a", "e11", storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"e0", "e1", "e10", "e1000", "e3"}
	for _, sel := range []string{"involvedObject.name=x", "involves.name=x"} {
		f, err := eventapi.ParseFieldSelector(eventapi.CoreV1, sel, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{0, 1, 2, 4} {
			var got []string
			opts := storage.ListOptions{Selector: storage.Selector{Namespace: "a", Fields: f}, Limit: limit}
			for {
				res, err := s.List(ctx, opts)
				if err != nil {
					t.Fatalf("%s, limit %d: %v", sel, limit, err)
				}
				for _, ev := range res.Items {
					got = append(got, ev.Name)
				}
				if res.Continue == "" {
					break
				}
				opts.Continue = res.Continue
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, limit %d: listed %q, want %q", sel, limit, got, want)
			}
		}
	}
}
