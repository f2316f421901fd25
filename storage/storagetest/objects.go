package storagetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// objectSet is a storage.ObjectSet of pod names that can grow, as a
// family does while ownership is learned.
type objectSet struct {
	mu    sync.Mutex
	names []string
}

func (s *objectSet) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.names)
}

func (s *objectSet) Involves(ev *corev1.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ev.InvolvedObject.Kind == "Pod" && slices.Contains(s.names, ev.InvolvedObject.Name) ||
		ev.Related != nil && ev.Related.Kind == "Pod" && slices.Contains(s.names, ev.Related.Name)
}

func (s *objectSet) add(name string) {
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
}

// testObjectSet: a selector's object set is planned through the name
// indexes (regarding and related), combines with the other selectors and
// with pagination, and a watch follows the set as it grows.
func testObjectSet(t *testing.T, h Harness) {
	f := open(t, h, nil)
	set := &objectSet{names: []string{"pod-a", "pod-c", "pod-x"}}
	for i, n := range []string{"a", "b", "c", "d"} {
		f.create(ev("ns1", n))
		f.create(ev("ns2", n, func(e *corev1.Event) { e.Reason = fmt.Sprint("R", i) }))
	}
	// Related to a member; a Node with a member's name is not one.
	f.create(ev("ns1", "rel", func(e *corev1.Event) {
		e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
		e.Related = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns1", Name: "pod-c"}
	}))
	f.create(ev("ns1", "node", func(e *corev1.Event) { e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "pod-a"} }))
	for _, c := range []struct {
		ns, fields string
		limit      int64
		want       []string
	}{
		{"", "", 0, []string{"ns1/a", "ns1/c", "ns1/rel", "ns2/a", "ns2/c"}},
		{"ns1", "", 0, []string{"ns1/a", "ns1/c", "ns1/rel"}},
		{"", "reason=Started", 2, []string{"ns1/a", "ns1/c", "ns1/rel"}},
		{"", "", 2, []string{"ns1/a", "ns1/c", "ns1/rel", "ns2/a", "ns2/c"}},
		{"", "involves.uid=pod-uid-c", 0, []string{"ns1/c", "ns2/c"}},
	} {
		opts := storage.ListOptions{Selector: storage.Selector{Namespace: c.ns, Objects: set}, Limit: c.limit}
		if c.fields != "" {
			opts.Fields = sel(t, eventapi.CoreV1, c.fields)
		}
		var got []*corev1.Event
		for {
			res, err := f.s.List(f.ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, res.Items...)
			if opts.Continue = res.Continue; res.Continue == "" {
				break
			}
		}
		equal(t, fmt.Sprintf("ns %q, %q, limit %d", c.ns, c.fields, c.limit), names(got), c.want)
	}
	res, err := f.s.List(f.ctx, storage.ListOptions{Selector: storage.Selector{Objects: &objectSet{}}})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("an empty set listed %v, %v", names(res.Items), err)
	}
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{Selector: storage.Selector{Namespace: "ns1", Objects: set}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// A change is judged against the set as it is when the watch looks
	// at it: pod-e's first event may or may not come, but once a later
	// member's event came, pod-e's next one does.
	f.create(ev("ns1", "e"))
	f.create(ev("ns1", "a2", func(e *corev1.Event) { e.InvolvedObject.Name = "pod-a" }))
	expect(t, w, watch.Added, "a2")
	set.add("pod-e")
	f.create(ev("ns1", "e2", func(e *corev1.Event) { e.InvolvedObject.Name = "pod-e" }))
	expect(t, w, watch.Added, "e2")
	expectNone(t, w)
}
