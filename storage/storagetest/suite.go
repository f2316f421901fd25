package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Options are the knobs the suite needs every backend to honour.
type Options struct {
	// Clock drives TTL expiry and history retention.
	Clock clock.WithTicker
	// DefaultTTL for writes without one.
	DefaultTTL time.Duration
	// HistoryMaxEvents caps the kept changes; the suite sets it low to
	// provoke compaction.
	HistoryMaxEvents int64
	// ExpiryInterval is how often the backend looks for expired events.
	ExpiryInterval time.Duration
	// HistoryWindow is how long changes are kept for watches to resume
	// from and continue tokens stay valid.
	HistoryWindow time.Duration
	// MaxHistoryHold bounds a history hold (storage.HistoryHolder); 0
	// means the backend's default.
	MaxHistoryHold time.Duration
}

// Harness opens the backend under test.
type Harness struct {
	// Open opens a store over dir. Opening the same dir again after Close
	// must see the same data.
	Open func(t *testing.T, dir string, opts Options) storage.Interface
	// WallClockTTL says the backend expires objects on the wall clock, not
	// on Options.Clock: etcd's leases run on etcd's own time, and a fake
	// clock cannot move them. The TTL case then uses TTLs of seconds and
	// waits for them in real time.
	WallClockTTL bool
	// ContinueExpiresByCompaction says a continue token stays valid until
	// the backend's history is compacted past the list's revision, not
	// for a fixed window after its last page: on etcd, kube-apiserver's
	// compactor compacts once per interval to the revision it saw one
	// interval earlier, so a token lives between one and two intervals.
	// The pagination case then checks only that tokens outlive other
	// clients' lists; the backend tests expiry by compaction itself.
	ContinueExpiresByCompaction bool
	// SharedRevisions says the backend's revision counter is shared with
	// keys that are not events (etcd's), so that writes outside the
	// events, such as cursors (storage.CursorStore) and records
	// (storage.RecordStore), move the revision the next event gets. The
	// cursor and record cases then check only that they are not events.
	SharedRevisions bool
}

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"CreateGet", testCreateGet},
		{"Update", testUpdate},
		{"Delete", testDelete},
		{"ListOrderAndNamespaces", testListOrder},
		{"ListFieldSelectors", testListFieldSelectors},
		{"ListLabelSelector", testListLabels},
		{"ObjectSet", testObjectSet},
		{"Filter", testFilter},
		{"TimeRange", testTimeRange},
		{"Clusters", testClusters},
		{"ListPagination", testListPagination},
		{"ListPaginationManyLists", testListPaginationManyLists},
		{"ListRemainingItemCount", testListRemainingItemCount},
		{"ListRemainingItemCountReopen", testListRemainingItemCountReopen},
		{"ListRevisions", testListRevisions},
		{"WatchFromRevision", testWatchFromRevision},
		{"WatchInitialEvents", testWatchInitialEvents},
		{"WatchInitialEventsManyPages", testWatchInitialEventsManyPages},
		{"WatchSelectorTransitions", testWatchTransitions},
		{"WatchCompacted", testWatchCompacted},
		{"WatchLagging", testWatchLagging},
		{"WatchCatchUpConsistent", testWatchCatchUpConsistent},
		{"WatchProgress", testWatchProgress},
		{"TTL", testTTL},
		{"Reopen", testReopen},
		{"WatchResumeShortLived", testWatchResumeShortLived},
		{"WatchFromOrigin", testWatchFromOrigin},
		{"ConcurrentWrites", testConcurrentWrites},
		{"Cursors", testCursors},
		{"CursorsReopen", testCursorsReopen},
		{"Records", testRecords},
		{"RecordsInvalid", testRecordsInvalid},
		{"RecordsMany", testRecordsMany},
		{"RecordsReopen", testRecordsReopen},
		{"HoldHistory", testHoldHistory},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// fixture is an open store with a fake clock.
type fixture struct {
	t     *testing.T
	s     storage.Interface
	clock *clocktesting.FakeClock
	ctx   context.Context
}

func open(t *testing.T, h Harness, mod func(*Options)) *fixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	if mod != nil {
		mod(&opts)
	}
	s := h.Open(t, t.TempDir(), opts)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &fixture{t: t, s: s, clock: clk, ctx: ctx}
}

// ev builds a legacy-shaped event about a pod.
func ev(ns, name string, mods ...func(*corev1.Event)) *corev1.Event {
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + name,
			UID: types.UID("pod-uid-" + name), APIVersion: "v1"},
		Reason:  "Started",
		Message: "started " + name,
		Type:    corev1.EventTypeNormal,
		Count:   1,
		Source:  corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

func (f *fixture) create(e *corev1.Event) *corev1.Event {
	f.t.Helper()
	out, err := f.s.Create(f.ctx, e, storage.WriteOptions{})
	if err != nil {
		f.t.Fatalf("create %s/%s: %v", e.Namespace, e.Name, err)
	}
	return out
}

func rev(t *testing.T, e *corev1.Event) int64 {
	t.Helper()
	r, err := strconv.ParseInt(e.ResourceVersion, 10, 64)
	if err != nil || r <= 0 {
		t.Fatalf("resourceVersion %q of %s is not a positive revision", e.ResourceVersion, e.Name)
	}
	return r
}

func names(items []*corev1.Event) []string {
	out := make([]string, len(items))
	for i, e := range items {
		out[i] = e.Namespace + "/" + e.Name
	}
	return out
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func testCreateGet(t *testing.T, h Harness) {
	f := open(t, h, nil)
	r0 := f.s.Revision()
	created := f.create(ev("default", "a"))
	if rev(t, created) != r0+1 || f.s.Revision() != r0+1 {
		t.Fatalf("create got revision %s (store %d), want %d", created.ResourceVersion, f.s.Revision(), r0+1)
	}
	got, err := f.s.Get(f.ctx, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Message != "started a" || got.Source.Host != "node-1" {
		t.Fatalf("get returned %+v", got)
	}
	if _, err := f.s.Create(f.ctx, ev("default", "a"), storage.WriteOptions{}); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("duplicate create: got %v, want ErrExists", err)
	}
	if _, err := f.s.Get(f.ctx, "default", "missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get missing: got %v, want ErrNotFound", err)
	}
	if _, err := f.s.Get(f.ctx, "other", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get in other namespace: got %v, want ErrNotFound", err)
	}
	if f.s.Stats().Events != 1 {
		t.Fatalf("stats report %d events, want 1", f.s.Stats().Events)
	}
}

func testUpdate(t *testing.T, h Harness) {
	f := open(t, h, nil)
	c := f.create(ev("default", "a"))
	r1 := rev(t, c)

	upd := ev("default", "a", func(e *corev1.Event) { e.Count = 2; e.Message = "again" })
	out, err := f.s.Update(f.ctx, upd, storage.WriteOptions{Precondition: storage.Preconditions{Revision: r1}})
	if err != nil {
		t.Fatal(err)
	}
	r2 := rev(t, out)
	if r2 <= r1 || out.Count != 2 {
		t.Fatalf("update: revision %d after %d, count %d", r2, r1, out.Count)
	}
	// A stale precondition conflicts and changes nothing.
	stale := ev("default", "a", func(e *corev1.Event) { e.Count = 3 })
	if _, err := f.s.Update(f.ctx, stale, storage.WriteOptions{Precondition: storage.Preconditions{Revision: r1}}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale update: got %v, want ErrConflict", err)
	}
	if got, _ := f.s.Get(f.ctx, "default", "a"); got.Count != 2 {
		t.Fatalf("stale update changed the event: count %d", got.Count)
	}
	// Unchanged content writes nothing: same revision.
	same := ev("default", "a", func(e *corev1.Event) { e.Count = 2; e.Message = "again" })
	out, err = f.s.Update(f.ctx, same, storage.WriteOptions{})
	if err != nil || rev(t, out) != r2 || f.s.Revision() != r2 {
		t.Fatalf("no-op update: err %v, revision %s, store %d, want %d", err, out.ResourceVersion, f.s.Revision(), r2)
	}
	// Missing: NotFound, unless CreateIfMissing.
	if _, err := f.s.Update(f.ctx, ev("default", "b"), storage.WriteOptions{}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("update missing: got %v, want ErrNotFound", err)
	}
	if out, err := f.s.Update(f.ctx, ev("default", "b"), storage.WriteOptions{CreateIfMissing: true}); err != nil || rev(t, out) != r2+1 {
		t.Fatalf("update with create: %v %v", out, err)
	}
	// UID precondition.
	if _, err := f.s.Update(f.ctx, ev("default", "a"), storage.WriteOptions{Precondition: storage.Preconditions{UID: "nope"}}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("uid precondition: got %v, want ErrConflict", err)
	}
}

func testDelete(t *testing.T, h Harness) {
	f := open(t, h, nil)
	c := f.create(ev("default", "a"))
	if _, err := f.s.Delete(f.ctx, "default", "a", storage.Preconditions{Revision: rev(t, c) + 10}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("delete with stale revision: got %v, want ErrConflict", err)
	}
	if _, err := f.s.Delete(f.ctx, "default", "a", storage.Preconditions{UID: "other"}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("delete with wrong uid: got %v, want ErrConflict", err)
	}
	out, err := f.s.Delete(f.ctx, "default", "a", storage.Preconditions{UID: string(c.UID)})
	if err != nil {
		t.Fatal(err)
	}
	if rev(t, out) != rev(t, c)+1 || out.Message != c.Message {
		t.Fatalf("delete returned %+v; want the last state at revision %d", out, rev(t, c)+1)
	}
	if _, err := f.s.Get(f.ctx, "default", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := f.s.Delete(f.ctx, "default", "a", storage.Preconditions{}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second delete: got %v, want ErrNotFound", err)
	}
	if f.s.Stats().Events != 0 {
		t.Fatalf("stats report %d events after delete", f.s.Stats().Events)
	}
	// The name can be reused.
	f.create(ev("default", "a"))
}

func testListOrder(t *testing.T, h Harness) {
	f := open(t, h, nil)
	for _, k := range [][2]string{{"b", "y"}, {"a", "z"}, {"a-b", "x"}, {"a", "a"}, {"b", "a.1"}} {
		f.create(ev(k[0], k[1]))
	}
	res, err := f.s.List(f.ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// etcd key order: "<ns>/<name>" byte-wise ('-' sorts before '/').
	equal(t, "all", names(res.Items), []string{"a-b/x", "a/a", "a/z", "b/a.1", "b/y"})
	if res.Revision != f.s.Revision() || res.Continue != "" {
		t.Fatalf("list revision %d (store %d), continue %q", res.Revision, f.s.Revision(), res.Continue)
	}
	res, _ = f.s.List(f.ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "a"}})
	equal(t, "namespace a", names(res.Items), []string{"a/a", "a/z"})
	res, _ = f.s.List(f.ctx, storage.ListOptions{Selector: storage.Selector{Namespace: "c"}})
	equal(t, "namespace c", names(res.Items), []string{})
}

func sel(t *testing.T, v eventapi.Version, raw string) eventapi.FieldSelector {
	t.Helper()
	s, err := eventapi.ParseFieldSelector(v, raw, true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testListFieldSelectors(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("ns1", "e1"))
	f.create(ev("ns1", "e2", func(e *corev1.Event) {
		e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-uid"}
		e.Namespace = "ns1"
		e.Reason, e.Type = "NodeNotReady", corev1.EventTypeWarning
	}))
	f.create(ev("ns2", "e3", func(e *corev1.Event) {
		e.Source = corev1.EventSource{}
		e.ReportingController, e.ReportingInstance, e.Action = "kube-scheduler", "kube-scheduler-h1", "Binding"
		e.Reason = "Scheduled"
		e.Related = &corev1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-uid"}
	}))
	f.create(ev("ns2", "e4", func(e *corev1.Event) { e.InvolvedObject.Name = "pod-e1"; e.InvolvedObject.UID = "other-uid" }))
	cases := []struct {
		v    eventapi.Version
		ns   string
		sel  string
		want []string
	}{
		{eventapi.CoreV1, "", "involvedObject.name=pod-e1", []string{"ns1/e1", "ns2/e4"}},
		{eventapi.CoreV1, "ns1", "involvedObject.name=pod-e1", []string{"ns1/e1"}},
		{eventapi.CoreV1, "", "involvedObject.uid=pod-uid-e1", []string{"ns1/e1"}},
		{eventapi.CoreV1, "", "involvedObject.kind=Pod,involvedObject.name=pod-e1,involvedObject.uid=other-uid", []string{"ns2/e4"}},
		{eventapi.CoreV1, "", "involvedObject.kind=Node", []string{"ns1/e2"}},
		{eventapi.CoreV1, "", "involvedObject.kind!=Pod", []string{"ns1/e2"}},
		{eventapi.CoreV1, "", "reason=Started", []string{"ns1/e1", "ns2/e4"}},
		{eventapi.CoreV1, "", "type=Warning", []string{"ns1/e2"}},
		{eventapi.CoreV1, "", "type==Normal,reason!=Scheduled", []string{"ns1/e1", "ns2/e4"}},
		{eventapi.CoreV1, "", "source=kubelet", []string{"ns1/e1", "ns1/e2", "ns2/e4"}},
		{eventapi.CoreV1, "", "source=kube-scheduler", []string{"ns2/e3"}}, // falls back to the reporting controller
		{eventapi.CoreV1, "", "reportingComponent=kube-scheduler", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "reportingComponent=kubelet", []string{}},
		{eventapi.CoreV1, "", "action=Binding", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "reportingInstance=kube-scheduler-h1", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "related.uid=node-uid", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "related.name=node-1,related.kind=Node", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "metadata.name=e3", []string{"ns2/e3"}},
		{eventapi.CoreV1, "ns2", "metadata.name=e3", []string{"ns2/e3"}},
		{eventapi.CoreV1, "ns1", "metadata.name=e3", []string{}},
		{eventapi.CoreV1, "", "metadata.namespace=ns1", []string{"ns1/e1", "ns1/e2"}},
		{eventapi.CoreV1, "ns2", "metadata.namespace=ns1", []string{}},
		{eventapi.CoreV1, "", "reason=", []string{}},
		{eventapi.EventsV1, "", "regarding.name=pod-e1,regarding.kind=Pod", []string{"ns1/e1", "ns2/e4"}},
		{eventapi.EventsV1, "", "reportingController=kube-scheduler,type=Normal", []string{"ns2/e3"}},
		// involves: the regarding or the related object.
		{eventapi.EventsV1, "", "involves.name=node-1", []string{"ns1/e2", "ns2/e3"}},
		{eventapi.CoreV1, "", "involves.uid=node-uid", []string{"ns1/e2", "ns2/e3"}},
		{eventapi.CoreV1, "ns2", "involves.uid=node-uid", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "involves.kind=Node,involves.name=node-1,reason=Scheduled", []string{"ns2/e3"}},
		{eventapi.CoreV1, "", "involves.kind=Pod,involves.name=pod-e1", []string{"ns1/e1", "ns2/e4"}},
		{eventapi.CoreV1, "", "involves.kind=Pod,involves.name=node-1", []string{}},
		{eventapi.CoreV1, "", "involves.namespace=ns2", []string{"ns2/e3", "ns2/e4"}},
	}
	for _, c := range cases {
		res, err := f.s.List(f.ctx, storage.ListOptions{Selector: storage.Selector{Namespace: c.ns, Fields: sel(t, c.v, c.sel)}})
		if err != nil {
			t.Fatalf("%s: %v", c.sel, err)
		}
		equal(t, fmt.Sprintf("ns %q, %s", c.ns, c.sel), names(res.Items), c.want)
	}
}

func testListLabels(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("default", "a", func(e *corev1.Event) { e.Labels = map[string]string{"app": "web", "tier": "fe"} }))
	f.create(ev("default", "b", func(e *corev1.Event) { e.Labels = map[string]string{"app": "db"} }))
	f.create(ev("default", "c"))
	for raw, want := range map[string][]string{
		"app=web":          {"default/a"},
		"app in (web,db)":  {"default/a", "default/b"},
		"!app":             {"default/c"},
		"app,tier!=fe":     {"default/b"},
		"app=web,tier!=fe": {},
	} {
		ls, err := labels.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.s.List(f.ctx, storage.ListOptions{Selector: storage.Selector{Labels: ls}})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, raw, names(res.Items), want)
	}
}

func testListPagination(t *testing.T, h Harness) {
	f := open(t, h, nil)
	var all []string
	for i := 0; i < 10; i++ {
		n := fmt.Sprintf("e%02d", i)
		f.create(ev("default", n, func(e *corev1.Event) {
			if i%2 == 0 {
				e.Reason = "Even"
			}
			e.Related = &corev1.ObjectReference{Kind: "Node", Name: "shared-node"}
		}))
		all = append(all, "default/"+n)
	}
	for _, c := range []struct {
		sel  string
		want []string
	}{
		{"", all},
		{"reason=Even", []string{"default/e00", "default/e02", "default/e04", "default/e06", "default/e08"}},
		{"type=Normal", all},
		{"involves.kind=Pod", all},
		{"involves.name=shared-node", all}, // the union of two indexes, paginated
	} {
		var got []string
		opts := storage.ListOptions{Limit: 3, Selector: storage.Selector{Fields: sel(t, eventapi.CoreV1, c.sel)}}
		first := int64(0)
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("%q: pagination does not end", c.sel)
			}
			res, err := f.s.List(f.ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(res.Items)) > opts.Limit {
				t.Fatalf("%q: page of %d items with limit %d", c.sel, len(res.Items), opts.Limit)
			}
			if first == 0 {
				first = res.Revision
				// Writes after the first page must not show up later in
				// this list: it is served at one revision.
				f.create(ev("default", fmt.Sprintf("late-%s-%d", c.sel, pages)))
				f.create(ev("default", fmt.Sprintf("e99%s", c.sel)))
			} else if res.Revision != first {
				t.Fatalf("%q: page served at revision %d, first page at %d", c.sel, res.Revision, first)
			}
			got = append(got, names(res.Items)...)
			if res.Continue == "" {
				break
			}
			opts.Continue = res.Continue
		}
		equal(t, "paginated "+c.sel, got, c.want)
		for _, n := range got {
			f.s.Delete(f.ctx, "default", n[len("default/"):], storage.Preconditions{}) //nolint:errcheck // restore for the next case
		}
		all = nil
		res, _ := f.s.List(f.ctx, storage.ListOptions{})
		for _, e := range res.Items {
			if _, err := f.s.Delete(f.ctx, e.Namespace, e.Name, storage.Preconditions{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 10; i++ {
			n := fmt.Sprintf("e%02d", i)
			f.create(ev("default", n, func(e *corev1.Event) {
				if i%2 == 0 {
					e.Reason = "Even"
				}
				e.Related = &corev1.ObjectReference{Kind: "Node", Name: "shared-node"}
			}))
			all = append(all, "default/"+n)
		}
	}
	for _, bad := range []string{"garbage", "eyJ2IjoieCJ9", "!!!"} {
		if _, err := f.s.List(f.ctx, storage.ListOptions{Continue: bad}); !errors.Is(err, storage.ErrInvalidContinue) {
			t.Fatalf("continue %q: got %v, want ErrInvalidContinue", bad, err)
		}
	}
}

// testListRemainingItemCount: a page with a continuation and no field
// or label selector says how many events the later pages hold (across
// namespaces and in one), counted at the list's revision, so writes
// after the first page do not change it; a selector, or a last page,
// gives none, as kube-apiserver's etcd store does.
func testListRemainingItemCount(t *testing.T, h Harness) {
	f := open(t, h, nil)
	for i := 0; i < 7; i++ {
		f.create(ev("a", fmt.Sprintf("e%d", i)))
	}
	for i := 0; i < 4; i++ {
		f.create(ev("b", fmt.Sprintf("e%d", i)))
	}
	f.create(ev("c", "e0"))
	count := func(p *int64) string {
		if p == nil {
			return "nil"
		}
		return strconv.FormatInt(*p, 10)
	}
	for _, c := range []struct {
		what string
		opts storage.ListOptions
		want []string // the remaining item count of each page; nil: none on any of several pages
	}{
		{"all namespaces", storage.ListOptions{Limit: 5}, []string{"7", "2", "nil"}},
		{"namespace a", storage.ListOptions{Limit: 3, Selector: storage.Selector{Namespace: "a"}}, []string{"4", "1", "nil"}},
		{"namespace b, exact pages", storage.ListOptions{Limit: 2, Selector: storage.Selector{Namespace: "b"}}, []string{"2", "nil"}},
		{"namespace c, one page", storage.ListOptions{Limit: 5, Selector: storage.Selector{Namespace: "c"}}, []string{"nil"}},
		{"no limit", storage.ListOptions{}, []string{"nil"}},
		{"field selector", storage.ListOptions{Limit: 3, Selector: storage.Selector{Fields: sel(t, eventapi.CoreV1, "reason=Started")}}, nil},
		{"namespace field selector", storage.ListOptions{Limit: 3, Selector: storage.Selector{Fields: sel(t, eventapi.CoreV1, "metadata.namespace=a")}}, nil},
		{"label selector", storage.ListOptions{Limit: 3, Selector: storage.Selector{Namespace: "a", Labels: labels.Everything().Add(mustRequirement(t, "app", selection.DoesNotExist))}}, nil},
	} {
		var got []string
		opts := c.opts
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("%s: pagination does not end", c.what)
			}
			res, err := f.s.List(f.ctx, opts)
			if err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
			got = append(got, count(res.RemainingItemCount))
			if res.Continue == "" {
				break
			}
			if pages == 0 {
				// Served at the first page's revision: later writes
				// change neither the pages nor the count.
				f.create(ev("a", fmt.Sprintf("late-%d", len(c.what))))
				f.create(ev("b", fmt.Sprintf("late-%d", len(c.what))))
			}
			opts.Continue = res.Continue
		}
		if c.want == nil {
			if len(got) < 2 || slices.ContainsFunc(got, func(s string) bool { return s != "nil" }) {
				t.Fatalf("%s: remaining item counts %v, want none on each of several pages", c.what, got)
			}
		} else {
			equal(t, c.what+": remaining item counts", got, c.want)
		}
		for _, ns := range []string{"a", "b"} {
			if _, err := f.s.Delete(f.ctx, ns, fmt.Sprintf("late-%d", len(c.what)), storage.Preconditions{}); err != nil && !errors.Is(err, storage.ErrNotFound) {
				t.Fatal(err)
			}
		}
	}
}

// testListRemainingItemCountReopen: the remaining item count follows
// creates, updates and deletes in a namespace, and holds across a
// reopen of the store.
func testListRemainingItemCountReopen(t *testing.T, h Harness) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	dir := t.TempDir()
	ctx := context.Background()
	s := h.Open(t, dir, opts)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := s.Create(ctx, ev("a", fmt.Sprintf("e%d", i)), storage.WriteOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := s.Create(ctx, ev("b", "e0"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"e1", "e6"} {
		if _, err := s.Delete(ctx, "a", name, storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update(ctx, ev("a", "e2", func(e *corev1.Event) { e.Count = 2 }), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		res, err := s.List(ctx, storage.ListOptions{Limit: 2, Selector: storage.Selector{Namespace: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.RemainingItemCount == nil || *res.RemainingItemCount != 4 {
			t.Fatalf("%s: 6 events in the namespace, a page of 2: remaining item count %s, want 4", what, showCount(res.RemainingItemCount))
		}
	}
	check("before reopening")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = h.Open(t, dir, opts)
	defer s.Close()
	check("after reopening")
}

func mustRequirement(t *testing.T, key string, op selection.Operator) labels.Requirement {
	t.Helper()
	r, err := labels.NewRequirement(key, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	return *r
}

// suiteHistoryWindow is the history window the suite opens stores with.
const suiteHistoryWindow = 5 * time.Minute

// testListPaginationManyLists: a continue token stays valid for the
// history window however many other paginated lists are served
// meanwhile, each at its own revision, and gets ErrCompacted after it.
func testListPaginationManyLists(t *testing.T, h Harness) {
	f := open(t, h, nil)
	for _, n := range []string{"a", "b", "c"} {
		f.create(ev("default", n))
	}
	// More lists than any small fixed number of retained snapshots, each
	// at a new revision.
	const lists = 300
	type started struct {
		rev  int64
		tok  string
		want []string
	}
	var all []started
	existing := []string{"default/b", "default/c"}
	for i := 0; i < lists; i++ {
		res, err := f.s.List(f.ctx, storage.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Continue == "" {
			t.Fatalf("list %d: no continue token", i)
		}
		equal(t, "first page", names(res.Items), []string{"default/a"})
		all = append(all, started{rev: res.Revision, tok: res.Continue, want: append([]string(nil), existing...)})
		n := fmt.Sprintf("z%04d", i)
		f.create(ev("default", n))
		existing = append(existing, "default/"+n)
	}
	f.clock.Step(suiteHistoryWindow / 2)
	for i, l := range all {
		res, err := f.s.List(f.ctx, storage.ListOptions{Continue: l.tok})
		if err != nil {
			t.Fatalf("list %d of %d, continued within the window: %v", i, lists, err)
		}
		if res.Revision != l.rev {
			t.Fatalf("list %d continued at revision %d, started at %d", i, res.Revision, l.rev)
		}
		equal(t, fmt.Sprintf("list %d, second page", i), names(res.Items), l.want)
	}
	if h.ContinueExpiresByCompaction {
		return
	}
	res, err := f.s.List(f.ctx, storage.ListOptions{Limit: 1})
	if err != nil || res.Continue == "" {
		t.Fatalf("list: %v, continue %q", err, res.Continue)
	}
	f.create(ev("default", "later"))
	f.clock.Step(suiteHistoryWindow + time.Second)
	for _, tok := range []string{res.Continue, all[0].tok, all[lists-1].tok} {
		_, err := f.s.List(f.ctx, storage.ListOptions{Continue: tok})
		var expired *storage.ContinueExpiredError
		if !errors.As(err, &expired) || !errors.Is(err, storage.ErrCompacted) {
			t.Fatalf("continue after the history window: got %v, want ErrCompacted", err)
		}
	}
}

func testListRevisions(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("default", "a"))
	cur := f.s.Revision()
	if _, err := f.s.List(f.ctx, storage.ListOptions{Revision: cur + 5}); !errors.Is(err, storage.ErrFutureRevision) {
		t.Fatalf("future revision: got %v", err)
	}
	res, err := f.s.List(f.ctx, storage.ListOptions{Revision: cur})
	if err != nil || res.Revision < cur {
		t.Fatalf("not-older-than list: %v, revision %d", err, res.Revision)
	}
	if res, err := f.s.List(f.ctx, storage.ListOptions{Revision: cur, Exact: true}); err != nil || res.Revision != cur {
		t.Fatalf("exact list at current revision: %v", err)
	}
	f.create(ev("default", "b"))
	if _, err := f.s.List(f.ctx, storage.ListOptions{Revision: cur - 1, Exact: true}); err != nil && !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("exact list at an old revision: got %v, want a list or ErrCompacted", err)
	}
}

// recv reads the next event, failing the test if none arrives in time.
func recv(t *testing.T, w storage.Watcher) storage.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return storage.Event{}
}

func expectNone(t *testing.T, w storage.Watcher) {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("unexpected watch event %s %v", e.Type, e.Object)
		}
	case <-time.After(100 * time.Millisecond):
	}
}

func expect(t *testing.T, w storage.Watcher, typ watch.EventType, name string) storage.Event {
	t.Helper()
	e := recv(t, w)
	if e.Err != nil {
		t.Fatalf("watch error %v, want %s %s", e.Err, typ, name)
	}
	if e.Type != typ || (name != "" && (e.Object == nil || e.Object.Name != name)) {
		got := ""
		if e.Object != nil {
			got = e.Object.Name
		}
		t.Fatalf("got %s %s, want %s %s", e.Type, got, typ, name)
	}
	if e.Object != nil && e.Object.ResourceVersion != strconv.FormatInt(e.Revision, 10) {
		t.Fatalf("event revision %d, object resourceVersion %s", e.Revision, e.Object.ResourceVersion)
	}
	return e
}

func testWatchFromRevision(t *testing.T, h Harness) {
	f := open(t, h, nil)
	a := f.create(ev("default", "a"))
	f.create(ev("default", "b"))
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{Revision: rev(t, a)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expect(t, w, watch.Added, "b") // only changes after the revision
	upd := ev("default", "a", func(e *corev1.Event) { e.Count = 5 })
	if _, err := f.s.Update(f.ctx, upd, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, w, watch.Modified, "a"); e.Object.Count != 5 {
		t.Fatalf("modified count %d", e.Object.Count)
	}
	del, err := f.s.Delete(f.ctx, "default", "b", storage.Preconditions{})
	if err != nil {
		t.Fatal(err)
	}
	if e := expect(t, w, watch.Deleted, "b"); e.Revision != rev(t, del) {
		t.Fatalf("deleted at %d, event says %d", rev(t, del), e.Revision)
	}
	// A watch from "now" sees only later changes.
	w2, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	f.create(ev("default", "c"))
	expect(t, w2, watch.Added, "c")
	expect(t, w, watch.Added, "c")
	w.Stop()
	for range w.ResultChan() {
	}
}

func testWatchInitialEvents(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("ns1", "a"))
	f.create(ev("ns2", "b"))
	f.create(ev("ns1", "c", func(e *corev1.Event) { e.Reason = "Other" }))
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{SendInitialEvents: true, InitialEventsEndBookmark: true,
		Selector: storage.Selector{Namespace: "ns1", Fields: sel(t, eventapi.CoreV1, "reason=Started")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expect(t, w, watch.Added, "a")
	b := expect(t, w, watch.Bookmark, "")
	if !b.InitialEventsEnd || b.Revision != f.s.Revision() {
		t.Fatalf("bookmark %+v, store at %d", b, f.s.Revision())
	}
	f.create(ev("ns1", "d"))
	f.create(ev("ns2", "e"))
	expect(t, w, watch.Added, "d")
	expectNone(t, w)
}

// testWatchInitialEventsManyPages: initial events larger than the pages a
// backend reads them in (256 on etcd) come whole, in key order, at one
// revision: writes during the initial events come after the bookmark.
func testWatchInitialEventsManyPages(t *testing.T, h Harness) {
	f := open(t, h, nil)
	const n = 700
	for i := range n {
		f.create(ev("ns1", fmt.Sprintf("e%04d", i), func(e *corev1.Event) {
			if i%2 == 1 {
				e.Reason = "Other"
			}
		}))
	}
	for _, tc := range []struct {
		name string
		sel  storage.Selector
	}{
		{"all", storage.Selector{}},
		{"namespace", storage.Selector{Namespace: "ns1"}},
		{"selector", storage.Selector{Fields: sel(t, eventapi.CoreV1, "reason=Other")}},
	} {
		at := f.s.Revision()
		list, err := f.s.List(f.ctx, storage.ListOptions{Selector: tc.sel})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) < n/2 {
			t.Fatalf("%s: %d events listed, want at least %d", tc.name, len(list.Items), n/2)
		}
		w, err := f.s.Watch(f.ctx, storage.WatchOptions{SendInitialEvents: true, InitialEventsEndBookmark: true, Selector: tc.sel})
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for i := range list.Items {
			e := recv(t, w)
			if e.Type != watch.Added || e.Object.Name <= prev {
				t.Fatalf("%s: initial event %d: %s %s after %s", tc.name, i, e.Type, e.Object.GetName(), prev)
			}
			prev = e.Object.Name
			if i == 10 {
				// A write while the initial events are being read.
				f.create(ev("ns1", "zz-"+tc.name))
			}
		}
		b := expect(t, w, watch.Bookmark, "")
		if !b.InitialEventsEnd || b.Revision != at {
			t.Fatalf("%s: bookmark %+v, want the end of the initial events at %d", tc.name, b, at)
		}
		if tc.name != "selector" {
			expect(t, w, watch.Added, "zz-"+tc.name)
		}
		w.Stop()
	}
}

func testWatchTransitions(t *testing.T, h Harness) {
	f := open(t, h, nil)
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{Selector: storage.Selector{Fields: sel(t, eventapi.CoreV1, "type=Warning")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	f.create(ev("default", "a"))
	up := func(typ string) {
		if _, err := f.s.Update(f.ctx, ev("default", "a", func(e *corev1.Event) { e.Type = typ }), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	up(corev1.EventTypeWarning) // enters the selection
	expect(t, w, watch.Added, "a")
	up(corev1.EventTypeWarning + "") // unchanged: no write
	if _, err := f.s.Update(f.ctx, ev("default", "a", func(e *corev1.Event) { e.Type = "Warning"; e.Count = 9 }), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, w, watch.Modified, "a")
	up(corev1.EventTypeNormal) // leaves it
	e := expect(t, w, watch.Deleted, "a")
	if e.Object.Type != corev1.EventTypeWarning {
		t.Fatalf("leaving the selection should carry the last matching state, got type %s", e.Object.Type)
	}
	if _, err := f.s.Delete(f.ctx, "default", "a", storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	expectNone(t, w)
}

// compactAll writes until the backend's history no longer reaches from.
func testWatchCompacted(t *testing.T, h Harness) {
	f := open(t, h, func(o *Options) { o.HistoryMaxEvents = 10 })
	first := f.create(ev("default", "first"))
	for i := 0; i < 100; i++ {
		f.create(ev("default", fmt.Sprintf("e%03d", i)))
	}
	// Retention runs in the background on the backend's clock.
	deadline := time.Now().Add(10 * time.Second)
	for f.s.Stats().OldestRevision <= rev(t, first)+1 {
		if time.Now().After(deadline) {
			t.Fatalf("history not trimmed: oldest revision %d", f.s.Stats().OldestRevision)
		}
		f.clock.Step(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{Revision: rev(t, first)})
	if err == nil {
		e := recv(t, w)
		w.Stop()
		err = e.Err
	}
	if !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from a compacted revision: got %v, want ErrCompacted", err)
	}
	// A recent revision still works.
	w, err = f.s.Watch(f.ctx, storage.WatchOptions{Revision: f.s.Revision() - 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	expect(t, w, watch.Added, "e098")
	expect(t, w, watch.Added, "e099")
}

// testWatchLagging writes more changes than a backend keeps in memory while
// a watcher is not reading; it must still get every change, in order.
func testWatchLagging(t *testing.T, h Harness) {
	f := open(t, h, nil)
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 6000
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				if _, err := f.s.Create(f.ctx, ev("default", fmt.Sprintf("e%05d", i)), storage.WriteOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	last := int64(0)
	for i := 0; i < n; i++ {
		e := expect(t, w, watch.Added, "")
		if e.Revision != last+1 && last != 0 {
			t.Fatalf("revision %d after %d: gap or reorder", e.Revision, last)
		}
		last = e.Revision
		seen[e.Object.Name] = true
	}
	if len(seen) != n {
		t.Fatalf("saw %d distinct events, want %d", len(seen), n)
	}
}

// testWatchCatchUpConsistent: a watcher that falls far behind while
// objects are created, modified and deleted must, once caught up, have
// seen a consistent history: no change for an object before its ADDED,
// revisions increasing, and its picture equal to the store's.
func testWatchCatchUpConsistent(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("default", "before"))
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Fillers first: the watcher buffers what it can and then blocks, so
	// the changes below reach it only after they are no longer recent.
	for i := 0; i < 1000; i++ {
		f.create(ev("default", fmt.Sprintf("early%04d", i)))
	}
	for i := 0; i < 100; i++ {
		f.create(ev("default", fmt.Sprintf("e%03d", i)))
	}
	for i := 0; i < 50; i++ {
		if _, err := f.s.Update(f.ctx, ev("default", fmt.Sprintf("e%03d", i), func(e *corev1.Event) { e.Count = int32(i + 2) }), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 50; i < 75; i++ {
		if _, err := f.s.Delete(f.ctx, "default", fmt.Sprintf("e%03d", i), storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.s.Delete(f.ctx, "default", "before", storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000; i++ { // more than any backend keeps in memory
		f.create(ev("default", fmt.Sprintf("filler%04d", i)))
	}
	final := f.s.Revision()
	seen := map[string]*corev1.Event{"default/before": {}} // existed when the watch began
	last := int64(0)
	for last < final {
		e := recv(t, w)
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		if e.Revision <= last {
			t.Fatalf("revision %d after %d", e.Revision, last)
		}
		last = e.Revision
		key := e.Object.Namespace + "/" + e.Object.Name
		switch e.Type {
		case watch.Added:
			if seen[key] != nil {
				t.Fatalf("ADDED %s twice", key)
			}
			seen[key] = e.Object
		case watch.Modified:
			if seen[key] == nil {
				t.Fatalf("MODIFIED %s before its ADDED", key)
			}
			seen[key] = e.Object
		case watch.Deleted:
			if seen[key] == nil {
				t.Fatalf("DELETED %s it never saw", key)
			}
			delete(seen, key)
		}
	}
	res, err := f.s.List(f.ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != len(seen) {
		t.Fatalf("the watch's picture has %d objects, the store %d", len(seen), len(res.Items))
	}
	for _, it := range res.Items {
		got := seen[it.Namespace+"/"+it.Name]
		if got == nil || got.ResourceVersion != it.ResourceVersion || got.Count != it.Count {
			t.Fatalf("%s: watch saw %+v, store has revision %s count %d", it.Name, got, it.ResourceVersion, it.Count)
		}
	}
}

func testWatchProgress(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("default", "a"))
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{ProgressInterval: time.Minute,
		Selector: storage.Selector{Fields: sel(t, eventapi.CoreV1, "reason=Nothing")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	f.create(ev("default", "b")) // filtered out, but the watch moves past it
	want := f.s.Revision()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.clock.Step(time.Minute)
		select {
		case e := <-w.ResultChan():
			if e.Type != watch.Bookmark {
				t.Fatalf("got %s, want BOOKMARK", e.Type)
			}
			if e.Revision == want {
				return
			}
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no bookmark at the current revision")
		}
	}
}

// expectTicking is expect for changes made by the backend's own timers:
// a fake clock's ticker skips a tick its reader was too busy to take, so the
// clock is nudged by a second at a time until the event arrives.
func (f *fixture) expectTicking(w storage.Watcher, typ watch.EventType, name string) storage.Event {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-time.After(20 * time.Millisecond):
			f.clock.Step(time.Second)
			continue
		case e, ok := <-w.ResultChan():
			if !ok {
				f.t.Fatal("watch closed")
			}
			if e.Type != typ || e.Object == nil || e.Object.Name != name {
				f.t.Fatalf("got %s %v, want %s %s", e.Type, e.Object, typ, name)
			}
			return e
		}
	}
	f.t.Fatalf("no %s %s within 10s", typ, name)
	return storage.Event{}
}

func testTTL(t *testing.T, h Harness) {
	if h.WallClockTTL {
		testTTLWallClock(t, h)
		return
	}
	f := open(t, h, func(o *Options) { o.DefaultTTL = 10 * time.Minute })
	start := f.clock.Now()
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	f.create(ev("default", "short-default"))
	if _, err := f.s.Create(f.ctx, ev("default", "long"), storage.WriteOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f.create(ev("default", "refreshed"))
	for i := 0; i < 3; i++ {
		expect(t, w, watch.Added, "")
	}
	f.clock.Step(6 * time.Minute)
	// Every write restarts the TTL.
	if _, err := f.s.Update(f.ctx, ev("default", "refreshed", func(e *corev1.Event) { e.Count = 2 }), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, w, watch.Modified, "refreshed")
	f.clock.Step(5 * time.Minute) // 11m: short-default is gone, refreshed has 1m left
	e := f.expectTicking(w, watch.Deleted, "short-default")
	if e.Object.Message != "started short-default" {
		t.Fatalf("expiry DELETED should carry the last state: %+v", e.Object)
	}
	for _, n := range []string{"refreshed", "long"} {
		if _, err := f.s.Get(f.ctx, "default", n); err != nil {
			t.Fatalf("%s expired early: %v", n, err)
		}
	}
	if _, err := f.s.Get(f.ctx, "default", "short-default"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired event still readable: %v", err)
	}
	f.clock.Step(5 * time.Minute) // 16m: the refreshed TTL ends
	f.expectTicking(w, watch.Deleted, "refreshed")
	if late := f.clock.Since(start); late > 16*time.Minute+time.Minute {
		t.Fatalf("refreshed event expired %v after start, want about 16m", late)
	}
	f.clock.Step(time.Hour)
	f.expectTicking(w, watch.Deleted, "long")
	if s := f.s.Stats(); s.Events != 0 || s.Expired != 3 {
		t.Fatalf("stats %+v, want 0 events and 3 expired", s)
	}
}

// testTTLWallClock is testTTL for backends whose expiry runs on the wall
// clock, with TTLs of seconds: the same three events and the same checks.
func testTTLWallClock(t *testing.T, h Harness) {
	const ttl = 3 * time.Second
	f := open(t, h, func(o *Options) { o.DefaultTTL = ttl })
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	f.create(ev("default", "short-default"))
	if _, err := f.s.Create(f.ctx, ev("default", "long"), storage.WriteOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f.create(ev("default", "refreshed"))
	for i := 0; i < 3; i++ {
		expect(t, w, watch.Added, "")
	}
	time.Sleep(ttl / 2)
	// Every write restarts the TTL.
	refreshedAt := time.Now()
	if _, err := f.s.Update(f.ctx, ev("default", "refreshed", func(e *corev1.Event) { e.Count = 2 }), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, w, watch.Modified, "refreshed")
	e := expect(t, w, watch.Deleted, "short-default")
	if e.Object.Message != "started short-default" {
		t.Fatalf("expiry DELETED should carry the last state: %+v", e.Object)
	}
	if took := time.Since(start); took < ttl {
		t.Fatalf("short-default expired after %v, before its TTL of %v", took, ttl)
	}
	for _, n := range []string{"refreshed", "long"} {
		if _, err := f.s.Get(f.ctx, "default", n); err != nil {
			t.Fatalf("%s expired early: %v", n, err)
		}
	}
	if _, err := f.s.Get(f.ctx, "default", "short-default"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("expired event still readable: %v", err)
	}
	expect(t, w, watch.Deleted, "refreshed")
	if took := time.Since(refreshedAt); took < ttl {
		t.Fatalf("refreshed expired %v after its update, before its TTL of %v", took, ttl)
	}
	if _, err := f.s.Get(f.ctx, "default", "long"); err != nil {
		t.Fatalf("long expired early: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s := f.s.Stats(); s.Events != 1 || s.Expired != 2; s = f.s.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want 1 event and 2 expired", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testReopen(t *testing.T, h Harness) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	dir := t.TempDir()
	ctx := context.Background()
	s := h.Open(t, dir, opts)
	const n = 200
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Create(ctx, ev("default", fmt.Sprintf("e%03d", i)), storage.WriteOptions{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	before := s.Revision()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, ev("default", "after-close"), storage.WriteOptions{}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("create after close: got %v, want ErrClosed", err)
	}
	s = h.Open(t, dir, opts)
	defer s.Close()
	res, err := s.List(ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != n || s.Revision() != before || s.Stats().Events != n {
		t.Fatalf("after reopen: %d items, revision %d (was %d), stats %+v", len(res.Items), s.Revision(), before, s.Stats())
	}
	// History survives: a watch can resume from before the restart.
	w, err := s.Watch(ctx, storage.WatchOptions{Revision: before - 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := recv(t, w); e.Err != nil || e.Revision != before {
		t.Fatalf("resumed watch got %+v, want the change at %d", e, before)
	}
	out, err := s.Create(ctx, ev("default", "next"), storage.WriteOptions{})
	if err != nil || rev(t, out) != before+1 {
		t.Fatalf("revision after reopen: %v %v, want %d", out, err, before+1)
	}
	// Keys written before the restart are known to exist.
	for _, name := range []string{"e000", "e199"} {
		if _, err := s.Create(ctx, ev("default", name), storage.WriteOptions{}); !errors.Is(err, storage.ErrExists) {
			t.Fatalf("create of %s, stored before the restart: got %v, want ErrExists", name, err)
		}
	}
}

// testWatchResumeShortLived: a watch resumed after a restart from an old
// revision gets every change since, with the state at each revision,
// including those of objects created, changed and deleted meanwhile, as an
// etcd watch from that revision does.
func testWatchResumeShortLived(t *testing.T, h Harness) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	dir := t.TempDir()
	ctx := context.Background()
	s := h.Open(t, dir, opts)
	mustCreate := func(e *corev1.Event) {
		t.Helper()
		if _, err := s.Create(ctx, e, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(ev("default", "before")) // revision 0 would mean "from now on"
	start := s.Revision()
	mustCreate(ev("default", "x", func(e *corev1.Event) { e.Message = "x v1" }))
	mustCreate(ev("default", "y", func(e *corev1.Event) { e.Message = "y v1" }))
	mustCreate(ev("default", "kept"))
	if _, err := s.Update(ctx, ev("default", "x", func(e *corev1.Event) { e.Message = "x v2"; e.Count = 2 }), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y"} {
		if _, err := s.Delete(ctx, "default", n, storage.Preconditions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = h.Open(t, dir, opts)
	defer s.Close()
	w, err := s.Watch(ctx, storage.WatchOptions{Revision: start})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, want := range []struct {
		typ  watch.EventType
		name string
		msg  string
	}{
		{watch.Added, "x", "x v1"},
		{watch.Added, "y", "y v1"},
		{watch.Added, "kept", "started kept"},
		{watch.Modified, "x", "x v2"},
		{watch.Deleted, "x", "x v2"},
		{watch.Deleted, "y", "y v1"},
	} {
		e := expect(t, w, want.typ, want.name)
		if e.Revision != start+int64(i)+1 || rev(t, e.Object) != e.Revision || e.Object.Message != want.msg {
			t.Fatalf("change %d: %s %s at revision %d (object at %s) with message %q, want revision %d and message %q",
				i, e.Type, e.Object.Name, e.Revision, e.Object.ResourceVersion, e.Object.Message, start+int64(i)+1, want.msg)
		}
	}
	expectNone(t, w)
}

func testConcurrentWrites(t *testing.T, h Harness) {
	f := open(t, h, nil)
	f.create(ev("default", "counter"))
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// Read-modify-write with a revision precondition, retried
				// on conflict: increments must not be lost.
				for {
					cur, err := f.s.Get(f.ctx, "default", "counter")
					if err != nil {
						t.Error(err)
						return
					}
					next := ev("default", "counter", func(e *corev1.Event) { e.Count = cur.Count + 1 })
					r, _ := strconv.ParseInt(cur.ResourceVersion, 10, 64)
					_, err = f.s.Update(f.ctx, next, storage.WriteOptions{Precondition: storage.Preconditions{Revision: r}})
					if errors.Is(err, storage.ErrConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	got, err := f.s.Get(f.ctx, "default", "counter")
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 1+writers*each {
		t.Fatalf("count %d, want %d: lost updates", got.Count, 1+writers*each)
	}
}

// testWatchFromOrigin: a watch with FromOrigin and Revision 0 delivers
// every change since the store's first, after a reopen too; without it,
// revision 0 is "from now on".
func testWatchFromOrigin(t *testing.T, h Harness) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	dir := t.TempDir()
	ctx := context.Background()
	s := h.Open(t, dir, opts)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := s.Create(ctx, ev("default", n), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = h.Open(t, dir, opts)
	defer s.Close()
	w, err := s.Watch(ctx, storage.WatchOptions{FromOrigin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"a", "b", "c"} {
		select {
		case e := <-w.ResultChan():
			if e.Type != watch.Added || e.Object == nil || e.Object.Name != want {
				t.Fatalf("got %s %v, want ADDED %s", e.Type, e.Object, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no ADDED %s from the origin", want)
		}
	}
	now, err := s.Watch(ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer now.Stop()
	if _, err := s.Create(ctx, ev("default", "d"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-now.ResultChan():
		if e.Object == nil || e.Object.Name != "d" {
			t.Fatalf("a watch from now got %s %v first, want d", e.Type, e.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a watch from now got nothing")
	}
}

// showCount shows a remaining item count, or nil.
func showCount(p *int64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatInt(*p, 10)
}
