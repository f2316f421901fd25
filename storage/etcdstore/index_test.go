package etcdstore_test

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// replica opens a second store on e's etcd: another eventsd replica.
func (e *env) replica() *etcdstore.Store {
	e.t.Helper()
	b, err := etcdstore.Open(etcdstore.Options{Client: e.cli, Clock: e.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { b.Close() })
	return b
}

func fieldSel(t *testing.T, raw string) storage.Selector {
	t.Helper()
	f, err := eventapi.ParseFieldSelector(eventapi.CoreV1, raw, true)
	if err != nil {
		t.Fatal(err)
	}
	return storage.Selector{Fields: f}
}

// randomEvent is an event of one of a few pods, with values drawn from
// small sets so that every indexed selector has several matches.
func randomEvent(rng *rand.Rand, ns, name string) *corev1.Event {
	pod := "pod" + strconv.Itoa(rng.IntN(6))
	ev := event(ns, name)
	ev.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, UID: types.UID("uid-" + ns + "-" + pod)}
	ev.Reason = []string{"Started", "Pulled", "Killing", "BackOff"}[rng.IntN(4)]
	ev.Type = []string{corev1.EventTypeNormal, corev1.EventTypeWarning}[rng.IntN(2)]
	ev.Source.Component = []string{"kubelet", "scheduler"}[rng.IntN(2)]
	ev.ReportingController = ev.Source.Component
	ev.ReportingInstance = "node" + strconv.Itoa(rng.IntN(3))
	ev.Action = []string{"Create", "Kill"}[rng.IntN(2)]
	if rng.IntN(3) == 0 {
		ev.Related = &corev1.ObjectReference{Kind: "Node", Name: ev.ReportingInstance, UID: types.UID("uid-" + ev.ReportingInstance)}
	}
	return ev
}

// TestIndexedListsMatchRangeReads: lists with indexed selectors, through
// two replicas, return exactly what a range read at the same revision
// filtered with the selector returns, page by page, after random creates,
// updates and deletes through both replicas and TTL expiries, and with
// writes between pages.
func TestIndexedListsMatchRangeReads(t *testing.T) {
	e := newEnv(t, nil)
	stores := []*etcdstore.Store{e.s, e.replica()}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	nss := []string{"ns-a", "ns-b", "ns-c"}
	var live []string // ns/name
	n := 0
	write := func() {
		t.Helper()
		s := stores[rng.IntN(len(stores))]
		switch op := rng.IntN(10); {
		case op < 6 || len(live) == 0:
			n++
			ns := nss[rng.IntN(len(nss))]
			name := "e" + strconv.Itoa(n)
			if _, err := s.Create(e.ctx, randomEvent(rng, ns, name), storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			live = append(live, ns+"/"+name)
		case op < 8:
			ns, name := splitKey(live[rng.IntN(len(live))])
			if _, err := s.Update(e.ctx, randomEvent(rng, ns, name), storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		default:
			i := rng.IntN(len(live))
			ns, name := splitKey(live[i])
			if _, err := s.Delete(e.ctx, ns, name, storage.Preconditions{}); err != nil {
				t.Fatal(err)
			}
			live = slices.Delete(live, i, i+1)
		}
	}
	// A few events expire: their lease is short.
	var expiring []string
	for i := range 4 {
		name := "ttl" + strconv.Itoa(i)
		if _, err := e.s.Create(e.ctx, randomEvent(rng, "ns-a", name), storage.WriteOptions{TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		expiring = append(expiring, name)
	}
	for range 300 {
		write()
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range expiring {
		for {
			if _, err := e.s.Get(e.ctx, "ns-a", name); errors.Is(err, storage.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ns-a/%s did not expire", name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	sels := []string{
		"reason=Killing",
		"type=Warning",
		"involvedObject.uid=uid-ns-b-pod3",
		"involvedObject.kind=Pod,involvedObject.namespace=ns-a,involvedObject.name=pod1",
		"involves.uid=uid-node1",
		"involves.name=pod2",
		"related.uid=uid-node0",
		"source=scheduler",
		"reportingComponent=kubelet,type=Normal",
		"reportingInstance=node2",
		"action=Kill,reason=Started",
		"metadata.namespace=ns-c,reason=BackOff",
		"reason=Nothing",
	}
	before := e.s.IndexedLists() + stores[1].IndexedLists()
	for i, raw := range sels {
		for _, limit := range []int64{0, 1, 3, 10} {
			s := stores[(i+int(limit))%len(stores)]
			sel := fieldSel(t, raw)
			if raw == "reason=Killing" && limit == 3 {
				sel.Namespace = "ns-b"
			}
			var got []string
			var listRev int64
			opts := storage.ListOptions{Selector: sel, Limit: limit}
			for page := 0; ; page++ {
				res, err := s.List(e.ctx, opts)
				if err != nil {
					t.Fatalf("%s limit %d page %d: %v", raw, limit, page, err)
				}
				if page == 0 {
					listRev = res.Revision
				} else if res.Revision != listRev {
					t.Fatalf("%s limit %d page %d at revision %d, first page at %d", raw, limit, page, res.Revision, listRev)
				}
				if limit > 0 && int64(len(res.Items)) > limit {
					t.Fatalf("%s limit %d: page of %d", raw, limit, len(res.Items))
				}
				for _, ev := range res.Items {
					got = append(got, ev.Namespace+"/"+ev.Name+"@"+ev.ResourceVersion)
				}
				if res.Continue == "" {
					break
				}
				write() // the next page stays at the list's revision
				opts.Continue = res.Continue
			}
			all, err := e.s.List(e.ctx, storage.ListOptions{Revision: listRev, Exact: true})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{}
			for _, ev := range all.Items {
				if sel.Matches(ev) {
					want = append(want, ev.Namespace+"/"+ev.Name+"@"+ev.ResourceVersion)
				}
			}
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s (namespace %q) limit %d at %d:\n got %v\nwant %v", raw, sel.Namespace, limit, listRev, got, want)
			}
		}
	}
	if after := e.s.IndexedLists() + stores[1].IndexedLists(); after == before {
		t.Fatal("no list went through the index")
	}
}

func splitKey(k string) (string, string) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	panic(k)
}

// TestIndexedListSeesOtherReplicasWrites: a list started after a write
// acknowledged by another replica returns it, with no retry: the list
// waits for its replica's index to reach etcd's current revision.
func TestIndexedListSeesOtherReplicasWrites(t *testing.T) {
	e := newEnv(t, nil)
	b := e.replica()
	for i := range 50 {
		ev := event("default", "x"+strconv.Itoa(i))
		ev.Reason = "Reason" + strconv.Itoa(i)
		created, err := b.Create(e.ctx, ev, storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.s.List(e.ctx, storage.ListOptions{Selector: fieldSel(t, "reason="+ev.Reason)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 1 || res.Items[0].ResourceVersion != created.ResourceVersion {
			t.Fatalf("list after replica b's write %d: %d items, want the one at %s", i, len(res.Items), created.ResourceVersion)
		}
		if _, err := b.Delete(e.ctx, "default", ev.Name, storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
		if res, err := e.s.List(e.ctx, storage.ListOptions{Selector: fieldSel(t, "reason="+ev.Reason)}); err != nil || len(res.Items) != 0 {
			t.Fatalf("list after replica b's delete %d: %v, %v", i, res, err)
		}
	}
}

// TestIndexedListFetchesOnlyCandidates: listing one pod's events among
// many reads only that pod's keys from etcd; a range read reads them all.
func TestIndexedListFetchesOnlyCandidates(t *testing.T) {
	e := newEnv(t, nil)
	const pods, perPod = 20, 5
	for p := range pods {
		for i := range perPod {
			ev := event("default", fmt.Sprintf("p%d-%d", p, i))
			ev.InvolvedObject.Name = fmt.Sprintf("pod%d", p)
			ev.InvolvedObject.UID = types.UID(fmt.Sprintf("uid-pod%d", p))
			if _, err := e.s.Create(e.ctx, ev, storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := e.s.ListKeysRead()
	res, err := e.s.List(e.ctx, storage.ListOptions{Selector: fieldSel(t, "involvedObject.uid=uid-pod7")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != perPod {
		t.Fatalf("%d items, want %d", len(res.Items), perPod)
	}
	if read := e.s.ListKeysRead() - before; read != perPod {
		t.Fatalf("indexed list read %d keys, want %d", read, perPod)
	}
	// Deleted events leave the index: they are not fetched any more.
	for i := range 2 {
		if _, err := e.s.Delete(e.ctx, "default", fmt.Sprintf("p7-%d", i), storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	before = e.s.ListKeysRead()
	if res, err = e.s.List(e.ctx, storage.ListOptions{Selector: fieldSel(t, "involvedObject.uid=uid-pod7")}); err != nil || len(res.Items) != perPod-2 {
		t.Fatalf("after deletes: %v, %v", res, err)
	}
	if read := e.s.ListKeysRead() - before; read != perPod-2 {
		t.Fatalf("indexed list after deletes read %d keys, want %d", read, perPod-2)
	}
	// The namespace alone plans no lookup: a range read of every key.
	before = e.s.ListKeysRead()
	if res, err = e.s.List(e.ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "default"}}); err != nil || len(res.Items) != pods*perPod-2 {
		t.Fatalf("range read: %v, %v", res, err)
	}
	if read := e.s.ListKeysRead() - before; read != pods*perPod-2 {
		t.Fatalf("range read read %d keys, want %d", read, pods*perPod-2)
	}
}

// TestIndexedListAtCompactedRevision: an indexed list at a revision etcd
// has compacted fails as a range read there does (ErrCompacted, and for a
// continue token kube-apiserver's 410 with an inconsistent token), with
// candidates to fetch or without.
func TestIndexedListAtCompactedRevision(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := e.s.Create(e.ctx, event("default", n), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	started := fieldSel(t, "reason=Started")
	first, err := e.s.List(e.ctx, storage.ListOptions{Selector: started, Limit: 1})
	if err != nil || first.Continue == "" || len(first.Items) != 1 {
		t.Fatalf("first page: %v, %v", first, err)
	}
	before := e.s.IndexedLists()
	next, err := e.s.List(e.ctx, storage.ListOptions{Selector: started, Continue: first.Continue})
	if err != nil || next.Revision != first.Revision || len(next.Items) != 2 {
		t.Fatalf("second page before compaction: %v, %v", next, err)
	}
	if e.s.IndexedLists() == before {
		t.Fatal("the second page did not go through the index")
	}
	later, err := e.s.Create(e.ctx, event("default", "later"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.Compact(e.ctx, rev(t, later.ResourceVersion)); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.List(e.ctx, storage.ListOptions{Selector: started, Continue: first.Continue})
	var expired *storage.ContinueExpiredError
	if !errors.As(err, &expired) || !errors.Is(err, storage.ErrCompacted) || expired.Inconsistent == "" {
		t.Fatalf("continue after compaction: got %v, want ErrCompacted with an inconsistent continue token", err)
	}
	for _, raw := range []string{"reason=Started", "reason=Nothing"} {
		_, err := e.s.List(e.ctx, storage.ListOptions{Selector: fieldSel(t, raw), Revision: first.Revision, Exact: true})
		if !errors.Is(err, storage.ErrCompacted) {
			t.Fatalf("%s at compacted revision %d: got %v, want ErrCompacted", raw, first.Revision, err)
		}
	}
}
