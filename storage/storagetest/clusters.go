package storagetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// clusterNames are the clusters of the clusters case: the root, and named
// ones of which one's name prefixes another's.
var clusterNames = []string{"", "a", "a-b", "b"}

// testClusters: a fleet's clusters written through their views
// (clusterview) into one store are kept apart, same-named events
// included: each view lists, pages, selects (by index and by scan), gets,
// updates, deletes and watches its own cluster's events only, with their
// real namespaces; the fleet view reads every named cluster's, annotated
// with their cluster; revisions are one sequence; records and cursors are
// each cluster's own.
func testClusters(t *testing.T, h Harness) {
	f := open(t, h, nil)
	views := map[string]storage.Interface{}
	for _, c := range clusterNames {
		views[c] = clusterview.New(f.s, c)
	}
	fleet := clusterview.Fleet(f.s)
	// want holds each cluster's events as its view serves them.
	want := map[string][]*corev1.Event{}
	reasons := []string{"Started", "BackOff", "Pulled"}
	var lastRev int64
	for i := range 12 {
		for _, c := range clusterNames {
			ns := []string{"default", "ns0", "shop"}[i%3]
			e := ev(ns, fmt.Sprintf("e%02d", i), func(e *corev1.Event) {
				e.Reason = reasons[(i+len(c))%3]
				e.Message = fmt.Sprintf("%s in cluster %q", e.Name, c)
			})
			out, err := views[c].Create(f.ctx, e, storage.WriteOptions{})
			if err != nil {
				t.Fatalf("create %s in cluster %q: %v", e.Name, c, err)
			}
			if out.Namespace != ns {
				t.Fatalf("create in cluster %q answered namespace %q, want %q", c, out.Namespace, ns)
			}
			rev := mustRev(t, out)
			if rev <= lastRev {
				t.Fatalf("revision %d after %d: clusters must share one sequence", rev, lastRev)
			}
			lastRev = rev
			want[c] = append(want[c], out)
		}
	}
	for _, c := range clusterNames {
		slices.SortFunc(want[c], func(a, b *corev1.Event) int { return cmpKey(a, b) })
	}

	// Each cluster's lists, whole, by namespace, by selectors and in pages.
	check := func(v storage.Interface, c string, sel storage.Selector, what string) {
		t.Helper()
		var exp []string
		for _, e := range want[c] {
			if sel.Namespace != "" && e.Namespace != sel.Namespace || !sel.Fields.Matches(e) {
				continue
			}
			exp = append(exp, e.Namespace+"/"+e.Name+"="+e.Message)
		}
		for _, limit := range []int64{0, 1, 5} {
			got := listKeys(t, f, v, sel, limit, func(e *corev1.Event) string { return e.Namespace + "/" + e.Name + "=" + e.Message })
			if !slices.Equal(got, exp) {
				t.Errorf("cluster %q, %s, pages of %d:\n got %q\nwant %q", c, what, limit, got, exp)
			}
		}
	}
	for _, c := range clusterNames {
		v := views[c]
		check(v, c, storage.Selector{}, "every namespace")
		check(v, c, storage.Selector{Namespace: "shop"}, "namespace shop")
		check(v, c, storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldReason, Value: "BackOff"}}}, "reason=BackOff (index)")
		check(v, c, storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldNamespace, Value: "ns0"}}}, "metadata.namespace=ns0")
		check(v, c, storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldNamespace, Value: "ns0", Negate: true}}}, "metadata.namespace!=ns0")
		check(v, c, storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvedName, Value: "pod-e04"}}}, "involvedObject.name (index)")
		check(v, c, storage.Selector{Namespace: "shop", Fields: eventapi.FieldSelector{{Field: eventapi.FieldName, Value: "e05"}}}, "one name")
		// A CEL-like predicate sees the namespace the view serves.
		res, err := v.List(f.ctx, storage.ListOptions{Selector: storage.Selector{Predicate: namespacePredicate("shop")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 4 {
			t.Errorf("cluster %q: a predicate on namespace shop selected %d events, want 4", c, len(res.Items))
		}
		if _, err := v.Get(f.ctx, "~b~shop", "e02"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("cluster %q: get through another cluster's storage namespace: %v, want ErrNotFound", c, err)
		}
	}

	// Same-named events are each cluster's own.
	for _, c := range clusterNames {
		got, err := views[c].Get(f.ctx, "shop", "e02")
		if err != nil {
			t.Fatal(err)
		}
		if exp := fmt.Sprintf("e02 in cluster %q", c); got.Message != exp || got.Namespace != "shop" {
			t.Errorf("cluster %q: get shop/e02 = %s %q, want shop %q", c, got.Namespace, got.Message, exp)
		}
	}
	// The store itself holds every cluster's events, in key order: the
	// root's first, then each named cluster's.
	all := listKeys(t, f, f.s, storage.Selector{}, 0, func(e *corev1.Event) string { return e.Namespace + "/" + e.Name })
	if len(all) != 12*len(clusterNames) || !slices.IsSorted(all) {
		t.Errorf("the store lists %d events (sorted: %v), want %d in key order", len(all), slices.IsSorted(all), 12*len(clusterNames))
	}

	// The fleet: every named cluster's events, annotated; a namespace is
	// each cluster's.
	fleetKey := func(e *corev1.Event) string {
		return clusterview.ClusterOf(e) + ":" + e.Namespace + "/" + e.Name
	}
	var expFleet, expFleetShop []string
	for _, c := range clusterNames[1:] {
		for _, e := range want[c] {
			expFleet = append(expFleet, c+":"+e.Namespace+"/"+e.Name)
			if e.Namespace == "shop" {
				expFleetShop = append(expFleetShop, c+":"+e.Namespace+"/"+e.Name)
			}
		}
	}
	slices.SortFunc(expFleet, func(a, b string) int { return cmpFleetKey(a, b) })
	slices.SortFunc(expFleetShop, func(a, b string) int { return cmpFleetKey(a, b) })
	for _, limit := range []int64{0, 7} {
		if got := listKeys(t, f, fleet, storage.Selector{}, limit, fleetKey); !slices.Equal(got, expFleet) {
			t.Errorf("fleet, pages of %d:\n got %q\nwant %q", limit, got, expFleet)
		}
		if got := listKeys(t, f, fleet, storage.Selector{Namespace: "shop"}, limit, fleetKey); !slices.Equal(got, expFleetShop) {
			t.Errorf("fleet namespace shop, pages of %d:\n got %q\nwant %q", limit, got, expFleetShop)
		}
		if got := listKeys(t, f, fleet, storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldNamespace, Value: "shop"}}}, limit, fleetKey); !slices.Equal(got, expFleetShop) {
			t.Errorf("fleet metadata.namespace=shop, pages of %d:\n got %q\nwant %q", limit, got, expFleetShop)
		}
	}
	if _, err := fleet.Get(f.ctx, "shop", "e02"); !errors.Is(err, clusterview.ErrAmbiguous) {
		t.Errorf("fleet get of a name three clusters hold: %v, want ErrAmbiguous", err)
	}
	for _, c := range clusterNames {
		if _, err := views[c].Create(f.ctx, ev("~b~shop", "forged"), storage.WriteOptions{}); !errors.Is(err, clusterview.ErrInvalidNamespace) {
			t.Errorf("cluster %q: a create in another cluster's storage namespace: %v, want ErrInvalidNamespace", c, err)
		}
	}
	if _, err := fleet.Create(f.ctx, ev("shop", "x"), storage.WriteOptions{}); !errors.Is(err, clusterview.ErrFleetReadOnly) {
		t.Errorf("fleet create: %v, want ErrFleetReadOnly", err)
	}

	// Watches: each cluster's sees its own changes only.
	rev := f.s.Revision()
	wa, err := views["a"].Watch(f.ctx, storage.WatchOptions{Revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	wroot, err := views[""].Watch(f.ctx, storage.WatchOptions{Revision: rev, Selector: storage.Selector{Namespace: "shop"}})
	if err != nil {
		t.Fatal(err)
	}
	defer wroot.Stop()
	wf, err := fleet.Watch(f.ctx, storage.WatchOptions{Revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Stop()
	cur, err := views["a-b"].Get(f.ctx, "shop", "e02")
	if err != nil {
		t.Fatal(err)
	}
	upd := cur.DeepCopy()
	upd.Message = "updated in a-b"
	if _, err := views["a-b"].Update(f.ctx, upd, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := views["a"].Delete(f.ctx, "shop", "e02", storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := views[""].Create(f.ctx, ev("shop", "new"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e := expect(t, wa, watch.Deleted, "e02")
	if e.Object.Namespace != "shop" || e.Object.Message != `e02 in cluster "a"` {
		t.Errorf("cluster a's watch: deleted %s %q, want cluster a's shop/e02", e.Object.Namespace, e.Object.Message)
	}
	expectNone(t, wa)
	if e := expect(t, wroot, watch.Added, "new"); e.Object.Namespace != "shop" {
		t.Errorf("the root's watch: added in namespace %q", e.Object.Namespace)
	}
	expectNone(t, wroot)
	e = expect(t, wf, watch.Modified, "e02")
	if clusterview.ClusterOf(e.Object) != "a-b" || e.Object.Message != "updated in a-b" {
		t.Errorf("fleet watch: modified in cluster %q %q", clusterview.ClusterOf(e.Object), e.Object.Message)
	}
	if e = expect(t, wf, watch.Deleted, "e02"); clusterview.ClusterOf(e.Object) != "a" {
		t.Errorf("fleet watch: deleted in cluster %q, want a", clusterview.ClusterOf(e.Object))
	}
	expectNone(t, wf)
	if got, err := views["b"].Get(f.ctx, "shop", "e02"); err != nil || got.Message != `e02 in cluster "b"` {
		t.Errorf("cluster b's shop/e02 after the other clusters' writes: %v, %v", got, err)
	}

	// Records and cursors are each cluster's own.
	if _, ok := f.s.(storage.RecordStore); ok {
		for _, c := range clusterNames {
			rs := views[c].(storage.RecordStore)
			if err := rs.SaveRecords(f.ctx, "lineage", []storage.RecordWrite{{Key: "k", Value: []byte(c)}}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range clusterNames {
			var got []string
			if err := views[c].(storage.RecordStore).Records(f.ctx, "lineage", func(k string, v []byte) error {
				got = append(got, k+"="+string(v))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []string{"k=" + c}) {
				t.Errorf("cluster %q's records: %q, want its own", c, got)
			}
		}
	}
	if _, ok := f.s.(storage.CursorStore); ok {
		for i, c := range clusterNames {
			if err := views[c].(storage.CursorStore).SaveCursor(f.ctx, "mirror", int64(10+i)); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range clusterNames {
			if got, found, err := views[c].(storage.CursorStore).Cursor(f.ctx, "mirror"); err != nil || !found || got != int64(10+i) {
				t.Errorf("cluster %q's cursor: %d %v %v, want %d", c, got, found, err, 10+i)
			}
		}
	}
}

// namespacePredicate selects the events of one namespace, as a CEL filter
// reading metadata.namespace would.
type namespacePredicate string

func (p namespacePredicate) Matches(e *corev1.Event) bool { return e.Namespace == string(p) }

// listKeys lists sel through v in pages of limit (0: one list), and
// returns key(e) of each event.
func listKeys(t *testing.T, f *fixture, v storage.Interface, sel storage.Selector, limit int64, key func(*corev1.Event) string) []string {
	t.Helper()
	var out []string
	cont := ""
	for range 1000 {
		res, err := v.List(f.ctx, storage.ListOptions{Selector: sel, Limit: limit, Continue: cont})
		if err != nil {
			t.Fatalf("list %+v: %v", sel, err)
		}
		for _, e := range res.Items {
			out = append(out, key(e))
		}
		if cont = res.Continue; cont == "" {
			return out
		}
	}
	t.Fatal("list did not end in 1000 pages")
	return nil
}

func mustRev(t *testing.T, e *corev1.Event) int64 {
	t.Helper()
	var rev int64
	if _, err := fmt.Sscan(e.ResourceVersion, &rev); err != nil {
		t.Fatalf("resourceVersion %q: %v", e.ResourceVersion, err)
	}
	return rev
}

func cmpKey(a, b *corev1.Event) int {
	if a.Namespace != b.Namespace {
		return strings.Compare(a.Namespace, b.Namespace)
	}
	return strings.Compare(a.Name, b.Name)
}

// cmpFleetKey orders "cluster:ns/name" keys as a fleet view lists them:
// by storage namespace ("~cluster~ns"), then name.
func cmpFleetKey(a, b string) int {
	ka := func(s string) string {
		c, rest, _ := strings.Cut(s, ":")
		return storage.ClusterNamespace(c, rest)
	}
	return strings.Compare(ka(a), ka(b))
}
