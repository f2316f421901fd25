package diskindex_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/diskindex"
	"github.com/kubevents/kubevents/storage/index"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var id1 = diskindex.Identity{ClusterID: 0xc1, Prefix: "/registry/events/"}

func open(t *testing.T, dir string) *diskindex.Index {
	t.Helper()
	d, err := diskindex.Open(diskindex.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fresh opens a new index in dir, reconciled (empty) at revision 1.
func fresh(t *testing.T, dir string) *diskindex.Index {
	t.Helper()
	d := open(t, dir)
	if err := d.BeginReconcile(id1); err != nil {
		t.Fatal(err)
	}
	if err := d.EndReconcile(1); err != nil {
		t.Fatal(err)
	}
	return d
}

// gen makes random events over a small space of keys and values, so
// that keys are often changed and values shared.
type gen struct{ r *rand.Rand }

func (g gen) pick(vals ...string) string      { return vals[g.r.IntN(len(vals))] }
func (g gen) numbered(p string, n int) string { return fmt.Sprintf("%s%d", p, g.r.IntN(n)) }
func (g gen) key() string                     { return g.pick("a", "a-b", "ab", "b") + "/" + g.numbered("e", 300) }
func (g gen) event(key string) *corev1.Event {
	ns, name, _ := strings.Cut(key, "/")
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ev.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Name: g.numbered("p", 20), UID: types.UID(g.numbered("u", 100))}
	if g.r.IntN(3) == 0 {
		ev.Related = &corev1.ObjectReference{Kind: "Pod", Name: g.numbered("p", 20), UID: types.UID(g.numbered("u", 100))}
	}
	ev.Reason = g.pick("", "Pulled", "BackOff", "Scheduled", "with\x00nul")
	ev.Type = g.pick("Normal", "Warning")
	ev.ReportingController = g.pick("", "kubelet", "scheduler")
	ev.ReportingInstance = g.pick("", "node-1", "node-2")
	ev.Action = g.pick("", "Pull", "Bind")
	ev.LastTimestamp = metav1.NewTime(timeBase.Add(time.Duration(g.r.IntN(2*3600)) * time.Second))
	return ev
}

// timeBase is the start of the generated events' times.
var timeBase = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

func (g gen) selector() storage.Selector {
	var sel storage.Selector
	if g.r.IntN(2) == 0 {
		sel.Namespace = g.pick("a", "a-b", "ab", "b")
	}
	eq := func(f eventapi.Field, v string) eventapi.Requirement {
		return eventapi.Requirement{Field: f, Value: v}
	}
	if g.r.IntN(3) == 0 {
		sel.Since = timeBase.Add(time.Duration(g.r.IntN(2*3600)) * time.Second)
	}
	if g.r.IntN(3) == 0 {
		sel.Until = timeBase.Add(time.Duration(g.r.IntN(2*3600)) * time.Second)
	}
	switch g.r.IntN(7) {
	case 0:
		sel.Fields = append(sel.Fields, eq(eventapi.FieldName, g.numbered("e", 300)))
	case 1:
		sel.Fields = append(sel.Fields, eq(eventapi.FieldInvolvesUID, g.numbered("u", 100)))
	case 2:
		sel.Fields = append(sel.Fields, eq(eventapi.FieldInvolvedName, g.numbered("p", 20)))
	case 3:
		sel.Fields = append(sel.Fields, eq(eventapi.FieldReason, g.pick("Pulled", "BackOff", "with\x00nul", "x")))
	case 4:
		sel.Fields = append(sel.Fields, eq(eventapi.FieldReportingInstance, g.pick("node-1", "node-2")))
	case 5:
		sel.Fields = append(sel.Fields, eq(eventapi.FieldType, g.pick("Normal", "Warning")))
	}
	return sel
}

// keysPaged collects every key of plan at at, limit keys a call.
func keysPaged(t *testing.T, k interface {
	Keys(index.Plan, int64, string, int) ([]string, int64, error)
}, p index.Plan, at int64, limit int) ([]string, error) {
	t.Helper()
	var all []string
	after := ""
	for {
		keys, _, err := k.Keys(p, at, after, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, keys...)
		if limit == 0 || len(keys) < limit {
			return all, nil
		}
		after = keys[len(keys)-1]
	}
}

// TestAgainstMemory applies the same random batches of puts, deletes and
// undecodable values to index.Memory and to the disk index, forgets
// history as compaction would, reopens the disk index now and then, and
// checks that both give the same keys for random plans at every revision
// both still answer for, paged or not, and the same revision and length.
func TestAgainstMemory(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	g := gen{rand.New(rand.NewPCG(seed, 0))}
	dir := t.TempDir()
	d := fresh(t, dir)
	defer func() { d.Close() }()
	m := index.NewMemory(index.All())
	m.SetRevision(1)
	rev := int64(1)
	var revs []int64
	present := map[string]bool{} // keys with a record in the index
	for round := range 30 {
		var batch []diskindex.Change
		n := 1 + g.r.IntN(40)
		for range n {
			rev++
			key := g.key()
			ns, name, _ := strings.Cut(key, "/")
			// Half the puts of keys without a record say so (New), as
			// a reconciliation's and a watch's creates do.
			isNew := !present[key] && g.r.IntN(2) == 0
			switch g.r.IntN(6) {
			case 0:
				m.Delete(ns, name, rev)
				batch = append(batch, diskindex.Change{Namespace: ns, Name: name, Delete: true, Revision: rev})
				delete(present, key)
			case 1: // undecodable: not indexed
				m.Delete(ns, name, rev)
				batch = append(batch, diskindex.Change{Namespace: ns, Name: name, Revision: rev, Size: 10, New: isNew})
				present[key] = true
			default:
				ev := g.event(key)
				m.Put(ev, rev)
				batch = append(batch, diskindex.Change{Namespace: ns, Name: name, Event: ev, Revision: rev, Size: 100, Lease: int64(g.r.IntN(3)), New: isNew})
				present[key] = true
			}
		}
		if err := d.Apply(rev, batch); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
		if round%7 == 6 {
			f := revs[len(revs)/2]
			m.Forget(f)
			if err := d.Forget(f); err != nil {
				t.Fatal(err)
			}
		}
		if round%10 == 9 {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = open(t, dir)
			if d.Identity() != id1 {
				t.Fatalf("reopened identity %+v, want %+v", d.Identity(), id1)
			}
		}
		if d.Revision() != m.Revision() || d.Len() != m.Len() {
			t.Fatalf("round %d: disk at %d with %d keys, memory at %d with %d", round, d.Revision(), d.Len(), m.Revision(), m.Len())
		}
		for range 40 {
			sel := g.selector()
			p := m.Set().Plan(sel)
			at := int64(0)
			if g.r.IntN(2) == 0 {
				at = revs[g.r.IntN(len(revs))]
			}
			limit := g.r.IntN(4) * 3
			want, werr := keysPaged(t, m, p, at, limit)
			got, gerr := keysPaged(t, d, p, at, limit)
			if (werr == nil) != (gerr == nil) || werr != nil && errors.Is(werr, storage.ErrCompacted) != errors.Is(gerr, storage.ErrCompacted) {
				t.Fatalf("round %d, plan %+v at %d: error %v, memory's %v", round, p, at, gerr, werr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("round %d, plan %+v at %d limit %d: keys differ from memory's (-memory +disk):\n%s", round, p, at, limit, diff)
			}
		}
	}
}

// TestApplyRepeatedKeys applies batches that change a few keys several
// times each (put, put with other values or another lease, undecodable,
// delete, create again, delete of an absent key), where a change must
// see the record an earlier change of the same batch wrote, and checks
// the keys against index.Memory at every batch's revision, the mod
// revisions Scan gives, and the count and budget's bytes per lease
// against a model, before and after a reopen (which reads the lease
// totals back from disk).
func TestApplyRepeatedKeys(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	g := gen{rand.New(rand.NewPCG(seed, 1))}
	dir := t.TempDir()
	d := fresh(t, dir)
	defer func() { d.Close() }()
	m := index.NewMemory(index.All())
	m.SetRevision(1)
	type use struct{ modRev, size, lease int64 }
	model := map[string]use{}
	rev := int64(1)
	var revs []int64
	// put, del and raw make one change and record it in memory and the
	// model; first is a fixed batch, the others random over three keys.
	var batch []diskindex.Change
	put := func(key string, lease int64) {
		rev++
		ns, name, _ := strings.Cut(key, "/")
		ev := g.event(key)
		m.Put(ev, rev)
		_, exists := model[key]
		model[key] = use{rev, 100 + rev, lease}
		batch = append(batch, diskindex.Change{Namespace: ns, Name: name, Event: ev, Revision: rev, Size: 100 + rev, Lease: lease, New: !exists})
	}
	raw := func(key string, lease int64) { // undecodable
		rev++
		ns, name, _ := strings.Cut(key, "/")
		m.Delete(ns, name, rev)
		model[key] = use{rev, 10, lease}
		batch = append(batch, diskindex.Change{Namespace: ns, Name: name, Revision: rev, Size: 10, Lease: lease})
	}
	del := func(key string) {
		rev++
		ns, name, _ := strings.Cut(key, "/")
		m.Delete(ns, name, rev)
		delete(model, key)
		batch = append(batch, diskindex.Change{Namespace: ns, Name: name, Delete: true, Revision: rev})
	}
	check := func(when string) {
		t.Helper()
		if d.Revision() != m.Revision() || d.Len() != m.Len() {
			t.Fatalf("%s: disk at %d with %d keys, memory at %d with %d", when, d.Revision(), d.Len(), m.Revision(), m.Len())
		}
		wantLeases, wantBytes := map[int64]int64{}, int64(0)
		var wantScan []diskindex.KeyRevision
		for k, u := range model {
			wantLeases[u.lease] += u.size
			wantBytes += u.size
			wantScan = append(wantScan, diskindex.KeyRevision{Key: k, ModRevision: u.modRev})
		}
		slices.SortFunc(wantScan, func(a, b diskindex.KeyRevision) int { return strings.Compare(a.Key, b.Key) })
		if got := d.LeaseBytes(); !cmp.Equal(got, wantLeases, cmpopts.EquateEmpty()) {
			t.Fatalf("%s: lease bytes %v, want %v", when, got, wantLeases)
		}
		if got := d.Bytes(); got != wantBytes {
			t.Fatalf("%s: bytes %d, want %d", when, got, wantBytes)
		}
		scan, err := d.Scan("", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantScan, scan, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: scan (-want +got):\n%s", when, diff)
		}
		for i := range 30 {
			sel := g.selector()
			if i == 0 {
				sel = storage.Selector{}
			}
			p := m.Set().Plan(sel)
			for _, at := range append([]int64{0}, revs...) {
				want, werr := keysPaged(t, m, p, at, 0)
				got, gerr := keysPaged(t, d, p, at, 0)
				if werr != nil || gerr != nil {
					t.Fatalf("%s, plan %+v at %d: error %v, memory's %v", when, p, at, gerr, werr)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s, plan %+v at %d: keys differ from memory's (-memory +disk):\n%s", when, p, at, diff)
				}
			}
		}
	}
	apply := func() {
		t.Helper()
		if err := d.Apply(rev, batch); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
		batch = nil
	}

	del("a/x") // absent: nothing to remove
	put("a/x", 1)
	put("a/x", 1)
	put("a/x", 2) // another lease
	raw("a/x", 2) // no longer indexed
	put("a/x", 3) // indexed again
	put("b/y", 1)
	del("b/y")
	put("b/y", 2) // created again
	put("b/z", 1)
	del("b/z")
	apply()
	check("fixed batch")
	keys := []string{"a/x", "b/y", "b/z"}
	for round := range 20 {
		for range 4 + g.r.IntN(8) {
			key := keys[g.r.IntN(len(keys))]
			switch g.r.IntN(5) {
			case 0:
				del(key)
			case 1:
				raw(key, int64(g.r.IntN(3)))
			default:
				put(key, int64(g.r.IntN(3)))
			}
		}
		apply()
		check(fmt.Sprintf("round %d", round))
		if round%5 == 4 {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = open(t, dir)
			check(fmt.Sprintf("round %d, reopened", round))
		}
	}
}

// TestReopenKeepsProgressAndBudget: a revision reached by a progress
// notification alone is written at Close; the budget's bytes by lease
// and the victims of a lease come back after a reopen.
func TestReopenKeepsProgressAndBudget(t *testing.T) {
	dir := t.TempDir()
	d := fresh(t, dir)
	g := gen{rand.New(rand.NewPCG(1, 2))}
	err := d.Apply(5, []diskindex.Change{
		{Namespace: "a", Name: "x", Event: g.event("a/x"), Revision: 3, Size: 100, Lease: 7, Rule: "short"},
		{Namespace: "a", Name: "y", Event: g.event("a/y"), Revision: 4, Size: 50, Lease: 7},
		{Namespace: "b", Name: "z", Revision: 5, Size: 30, Lease: 9}, // undecodable
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(6, []diskindex.Change{{Namespace: "a", Name: "y", Delete: true, Revision: 6}}); err != nil {
		t.Fatal(err)
	}
	d.SetRevision(10)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = open(t, dir)
	defer d.Close()
	if got := d.Revision(); got != 10 {
		t.Errorf("revision after reopen %d, want 10 (the progress notification's)", got)
	}
	if got, want := d.LeaseBytes(), map[int64]int64{7: 100, 9: 30}; !cmp.Equal(got, want) {
		t.Errorf("lease bytes %v, want %v", got, want)
	}
	if got := d.Bytes(); got != 130 {
		t.Errorf("bytes %d, want 130", got)
	}
	if got := d.Len(); got != 1 {
		t.Errorf("len %d, want 1 (a/x; b/z is not indexed)", got)
	}
	v, err := d.VictimsOf([]int64{7, 9}, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []diskindex.Usage{{Key: "a/x", ModRevision: 3, Size: 100, Lease: 7, Rule: "short"}, {Key: "b/z", ModRevision: 5, Size: 30, Lease: 9}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("victims (-want +got):\n%s", diff)
	}
}

// TestReconcile: a reconciliation keeps records of its identity for
// comparison, empties an index of another identity, hides the index
// (Keys fails with ErrCompacted, so lists read the range) until it ends,
// and an index left mid-reconciliation reopens at revision 0.
func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	d := fresh(t, dir)
	g := gen{rand.New(rand.NewPCG(3, 4))}
	if err := d.Apply(3, []diskindex.Change{
		{Namespace: "a", Name: "x", Event: g.event("a/x"), Revision: 2, Size: 1},
		{Namespace: "a", Name: "y", Event: g.event("a/y"), Revision: 3, Size: 1},
	}); err != nil {
		t.Fatal(err)
	}
	all := index.Plan{Lookups: nil}
	if err := d.BeginReconcile(id1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Keys(all, 0, "", 0); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("Keys while reconciling: %v, want ErrCompacted", err)
	}
	if got := d.Revision(); got != 3 {
		t.Errorf("revision while reconciling %d, want the old 3", got)
	}
	if err := d.Apply(9, nil); err == nil {
		t.Error("Apply with a revision while reconciling: no error")
	}
	kr, err := d.Scan("", 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []diskindex.KeyRevision{{Key: "a/x", ModRevision: 2}, {Key: "a/y", ModRevision: 3}}; !cmp.Equal(kr, want) {
		t.Errorf("Scan %v, want %v", kr, want)
	}
	if err := d.Apply(0, []diskindex.Change{{Namespace: "a", Name: "x", Delete: true}}); err != nil {
		t.Fatal(err)
	}
	// Left mid-reconciliation: reopens at 0 with its records.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = open(t, dir)
	if d.Revision() != 0 || d.Identity() != id1 {
		t.Fatalf("reopened mid-reconciliation at %d as %+v, want 0 as %+v", d.Revision(), d.Identity(), id1)
	}
	if err := d.BeginReconcile(id1); err != nil {
		t.Fatal(err)
	}
	if err := d.EndReconcile(20); err != nil {
		t.Fatal(err)
	}
	if keys, rev, err := d.Keys(all, 0, "", 0); err != nil || rev != 20 || !slices.Equal(keys, []string{"a/y"}) {
		t.Errorf("Keys after the reconciliation: %v at %d, %v; want [a/y] at 20", keys, rev, err)
	}
	if _, _, err := d.Keys(all, 19, "", 0); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("Keys before the reconciliation's revision: %v, want ErrCompacted", err)
	}
	// Another cluster: emptied.
	other := diskindex.Identity{ClusterID: 0xc2, Prefix: id1.Prefix}
	if err := d.BeginReconcile(other); err != nil {
		t.Fatal(err)
	}
	if kr, _ := d.Scan("", 10); len(kr) != 0 || d.Identity() != other || d.Len() != 0 || d.Bytes() != 0 {
		t.Errorf("index of another cluster kept %v (identity %+v, len %d, bytes %d)", kr, d.Identity(), d.Len(), d.Bytes())
	}
	if err := d.EndReconcile(30); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSecondOpenFails: a second Index on one directory fails with an
// error naming it and wrapping ErrDirInUse; after Close it opens.
func TestSecondOpenFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd-index")
	d := open(t, dir)
	_, err := diskindex.Open(diskindex.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, diskindex.ErrDirInUse) || !strings.Contains(err.Error(), "index directory "+dir+" is in use") {
		t.Fatalf("second open: %v, want ErrDirInUse naming %s", err, dir)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir).Close()
}

// TestWait: Wait returns once Apply or SetRevision reaches the revision,
// and with the context's error before.
func TestWait(t *testing.T) {
	d := fresh(t, t.TempDir())
	defer d.Close()
	d.SetRevision(3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := d.Wait(ctx, 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait(4) at 3: %v, want the context's deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Wait(context.Background(), 4) }()
	if err := d.Apply(4, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
}

// TestRangeTooWide: a time range of more buckets than
// index.MaxRangeLookups fails with index.ErrRangeTooWide, as
// index.Memory's does; one of exactly that many is served.
func TestRangeTooWide(t *testing.T) {
	d := fresh(t, t.TempDir())
	defer d.Close()
	var batch []diskindex.Change
	for i := range index.MaxRangeLookups + 1 {
		name := fmt.Sprintf("e%05d", i)
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			LastTimestamp: metav1.NewTime(timeBase.Add(time.Duration(i) * time.Minute))}
		batch = append(batch, diskindex.Change{Namespace: "ns", Name: name, Event: ev, Revision: int64(i + 2), Size: 100})
	}
	if err := d.Apply(int64(index.MaxRangeLookups+2), batch); err != nil {
		t.Fatal(err)
	}
	all := index.Plan{Range: &index.Range{ID: index.LastObserved}}
	if _, _, err := d.Keys(all, 0, "", 0); !errors.Is(err, index.ErrRangeTooWide) {
		t.Fatalf("%d buckets: %v, want ErrRangeTooWide", index.MaxRangeLookups+1, err)
	}
	most := index.Plan{Range: &index.Range{ID: index.LastObserved, From: index.Bucket(timeBase.Add(time.Minute))}}
	keys, _, err := d.Keys(most, 0, "", 0)
	if err != nil || len(keys) != index.MaxRangeLookups || keys[0] != "ns/e00001" {
		t.Fatalf("%d buckets: %d keys, %v", index.MaxRangeLookups, len(keys), err)
	}
}
