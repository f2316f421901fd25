package interop_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
	evstorage "github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"
)

// TestInteropFromAPIServer: events kube-apiserver's etcd3 store creates
// (with a TTL) and updates (GuaranteedUpdate) are read by etcdstore with
// the same content and resourceVersion (= the etcd mod_revision): Get,
// List with indexed field selectors (involvedObject.uid and the involves.*
// extension), Watch (ADDED, MODIFIED), and the DELETED of a lease expiry.
func TestInteropFromAPIServer(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaProtobuf, nil)

	w, err := e.es.Watch(e.ctx, evstorage.WatchOptions{Revision: e.es.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	a := e.apiCreate(api, coreEvent("default", "a", "pod-1"), 3600)
	b := coreEvent("default", "b", "pod-2")
	// b is about pod-2 and relates to pod-1: involves.uid=pod-1 selects it.
	b.Related = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod-pod-1", UID: "pod-1"}
	b = e.apiCreate(api, b, 3600)
	other := e.apiCreate(api, coreEvent("kube-system", "c", "pod-3"), 3600)

	// Get: same object, resourceVersion = mod_revision.
	for _, want := range []*corev1.Event{a, b, other} {
		got, err := e.es.Get(e.ctx, want.Namespace, want.Name)
		if err != nil {
			t.Fatalf("etcdstore get %s/%s: %v", want.Namespace, want.Name, err)
		}
		sameEvent(t, "etcdstore Get and the apiserver store's Create", want, got)
		if mod := e.raw(etcdKey(want.Namespace, want.Name)).Kvs[0].ModRevision; rv(t, got.ResourceVersion) != mod {
			t.Fatalf("%s: resourceVersion %s, etcd mod_revision %d", want.Name, got.ResourceVersion, mod)
		}
	}

	// Watch: ADDED for each create, at the apiserver's resourceVersion.
	for _, want := range []*corev1.Event{a, b, other} {
		ev := nextStore(t, w)
		if ev.Type != watch.Added || ev.Object.Name != want.Name || ev.Revision != rv(t, want.ResourceVersion) {
			t.Fatalf("got %s %s at %d, want ADDED %s at %s", ev.Type, ev.Object.Name, ev.Revision, want.Name, want.ResourceVersion)
		}
		sameEvent(t, "watched ADDED object", want, ev.Object)
	}

	// Update through GuaranteedUpdate: MODIFIED, and Get agrees.
	a = e.apiUpdate(api, "default", "a", 3600, func(ev *corev1.Event) {
		ev.Count = 2
		ev.Message = "Started container web again"
	})
	ev := nextStore(t, w)
	if ev.Type != watch.Modified || ev.Revision != rv(t, a.ResourceVersion) {
		t.Fatalf("got %s at %d, want MODIFIED at %s", ev.Type, ev.Revision, a.ResourceVersion)
	}
	sameEvent(t, "watched MODIFIED object", a, ev.Object)
	got, err := e.es.Get(e.ctx, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	sameEvent(t, "etcdstore Get after GuaranteedUpdate", a, got)

	// Lists with indexed field selectors.
	before := e.es.IndexedLists()
	for _, tc := range []struct {
		selector string
		want     []string
	}{
		{"involvedObject.uid=pod-1", []string{"a"}},
		{"involvedObject.name=pod-pod-2", []string{"b"}},
		{"involves.uid=pod-1", []string{"a", "b"}},
	} {
		sel, err := eventapi.ParseFieldSelector(eventapi.CoreV1, tc.selector, true)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.es.List(e.ctx, evstorage.ListOptions{Selector: evstorage.Selector{Fields: sel}})
		if err != nil {
			t.Fatalf("list %s: %v", tc.selector, err)
		}
		var names []string
		for _, it := range res.Items {
			names = append(names, it.Name)
			want := a
			if it.Name == "b" {
				want = b
			}
			sameEvent(t, "listed object", want, it)
		}
		if len(names) != len(tc.want) || (len(names) > 0 && names[0] != tc.want[0]) || (len(names) > 1 && names[1] != tc.want[1]) {
			t.Fatalf("list %s: got %v, want %v", tc.selector, names, tc.want)
		}
		if res.Revision < rv(t, a.ResourceVersion) {
			t.Fatalf("list %s at revision %d, before the update at %s", tc.selector, res.Revision, a.ResourceVersion)
		}
	}
	if n := e.es.IndexedLists() - before; n != 3 {
		t.Fatalf("%d of 3 selector lists went through the index", n)
	}

	// Delete through the apiserver store: DELETED with the last state at
	// the deletion's revision.
	deleted := &corev1.Event{}
	if err := api.Delete(e.ctx, apiKey("kube-system", "c"), deleted, nil, apistorage.ValidateAllObjectFunc, nil, apistorage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = nextStore(t, w)
	if ev.Type != watch.Deleted || ev.Object.Name != "c" {
		t.Fatalf("got %s %v, want DELETED c", ev.Type, ev.Object)
	}
	sameEvent(t, "DELETED object and the apiserver store's Delete", deleted, ev.Object)
	if _, err := e.es.Get(e.ctx, "kube-system", "c"); !errors.Is(err, evstorage.ErrNotFound) {
		t.Fatalf("get of the deleted event: %v, want not found", err)
	}

	// TTL: a 2 s event (lease of 2 s: 5% of 2 s rounds to no reuse window)
	// expires in etcd; the etcdstore watch sees DELETED with its last state.
	short := e.apiCreate(api, coreEvent("default", "short", "pod-4"), 2)
	if ttl := e.grantedTTL(etcdKey("default", "short")); ttl != 2 {
		t.Fatalf("apiserver granted a lease of %ds for a TTL of 2s", ttl)
	}
	// kube-apiserver's own watch, to compare the DELETED it delivers.
	aw, err := api.Watch(e.ctx, resourcePrefix, apistorage.ListOptions{ResourceVersion: short.ResourceVersion,
		Predicate: apistorage.Everything, Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Stop()
	ev = nextStore(t, w)
	if ev.Type != watch.Added || ev.Object.Name != "short" {
		t.Fatalf("got %s %v, want ADDED short", ev.Type, ev.Object)
	}
	ev = nextStore(t, w)
	if ev.Type != watch.Deleted || ev.Object.Name != "short" || ev.Revision <= rv(t, short.ResourceVersion) {
		t.Fatalf("got %s %v at %d, want DELETED short after %s", ev.Type, ev.Object, ev.Revision, short.ResourceVersion)
	}
	apiDel := nextAPI(t, aw)
	if apiDel.Type != watch.Deleted {
		t.Fatalf("apiserver watch: got %s, want DELETED", apiDel.Type)
	}
	// Both carry the last state at the deletion's revision.
	sameEvent(t, "DELETED objects of the apiserver watch and the etcdstore watch", apiDel.Object.(*corev1.Event), ev.Object)
	last := short.DeepCopy()
	last.ResourceVersion = strconv.FormatInt(ev.Revision, 10)
	sameEvent(t, "DELETED object (last state)", last, ev.Object)
	if _, err := e.es.Get(e.ctx, "default", "short"); !errors.Is(err, evstorage.ErrNotFound) {
		t.Fatalf("get of the expired event: %v, want not found", err)
	}
}
