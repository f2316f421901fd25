package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/index"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// checkTimeEntries checks that s's time index holds exactly one entry per
// stored event, in the bucket of its last-observed time, and that the
// stored bytes count them.
func checkTimeEntries(t *testing.T, s *Store, when string) {
	t.Helper()
	v, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(v)
	want := map[string]string{}
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixObject}, UpperBound: []byte{prefixObject + 1}})
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		ev, _, err := decodeObject(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		want[string(it.Key()[1:])] = index.Value(ev, index.LastObserved)
	}
	it.Close()
	got := map[string]string{}
	lower := []byte{prefixIndex, byte(index.LastObserved)}
	it, err = v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		key, ok := index.EntryKey(it.Key()[1:])
		if !ok {
			t.Fatalf("%s: corrupt entry %q", when, it.Key())
		}
		if _, dup := got[string(key)]; dup {
			t.Errorf("%s: %s has two time entries", when, key)
		}
		got[string(key)] = string(it.Key()[2 : len(it.Key())-len(key)-2])
	}
	it.Close()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: %d time entries, %d events; entries differ from the events' buckets", when, len(got), len(want))
	}
	if n, err := countStoredBytes(v.snap, s.indexes); err != nil || n != s.StoredBytes() {
		t.Fatalf("%s: stored bytes %d, counted %d (%v)", when, s.StoredBytes(), n, err)
	}
}

// TestTimeIndexRebuild: a store written before the time index existed
// (simulated: its entries and marker deleted), one whose rebuild was cut
// short (some entries, no marker), one whose entries went stale under a
// build that did not maintain them (marker behind the revision) and one
// written without the index (Options.noTimeIndex) each get a complete
// index at open, logged with counts, and then list time ranges exactly
// as Selector.Matches over every event does, over pages; a store whose
// index is complete is not rebuilt.
func TestTimeIndexRebuild(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	logs := &syncbuf.Buffer{}
	seen := 0
	// take returns the logs since the last take.
	take := func() string {
		out := logs.String()
		defer func() { seen = len(out) }()
		return out[seen:]
	}
	open := func(noTime bool) *Store {
		t.Helper()
		s, err := Open(Options{Dir: dir, Clock: clk, NoSync: true, DefaultTTL: 24 * time.Hour, noTimeIndex: noTime,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r := rand.New(rand.NewPCG(7, 8))
	at := func() metav1.Time {
		return metav1.NewTime(now.Add(-time.Duration(r.Int64N(int64(3 * time.Hour)))).Truncate(time.Second))
	}
	write := func(s *Store, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("e%04d", i)},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("p%d", i)}, Reason: "Started", Type: "Normal",
				LastTimestamp: at()}
			if _, err := s.Update(ctx, e, storage.WriteOptions{CreateIfMissing: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkLists := func(s *Store, when string) {
		t.Helper()
		res, err := s.List(ctx, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range []storage.Selector{
			{Since: now.Add(-time.Hour)},
			{Since: now.Add(-2*time.Hour - 30*time.Second), Until: now.Add(-90 * time.Minute)},
			{Until: now.Add(-150 * time.Minute), Namespace: "ns1"},
		} {
			if p := s.planSet().Plan(sel); p.Range == nil {
				t.Fatalf("%s: %+v is not planned on the time index: %+v", when, sel, p)
			}
			var want, got []string
			for _, e := range res.Items {
				if sel.Matches(e) {
					want = append(want, e.Namespace+"/"+e.Name)
				}
			}
			opts := storage.ListOptions{Selector: sel, Limit: 37}
			for {
				page, err := s.List(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Items {
					got = append(got, e.Namespace+"/"+e.Name)
				}
				if opts.Continue = page.Continue; opts.Continue == "" {
					break
				}
			}
			if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: %+v lists %d events, want %d", when, sel, len(got), len(want))
			}
		}
	}
	// commitRaw writes to the database under the store, as an older
	// build would have.
	commitRaw := func(s *Store, f func(b *pebble.Batch)) {
		t.Helper()
		b := s.db.NewBatch()
		f(b)
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	timeLower := []byte{prefixIndex, byte(index.LastObserved)}
	expectRebuild := func(s *Store, events int, when string) {
		t.Helper()
		out := take()
		if !strings.Contains(out, "built the time index") || !strings.Contains(out, fmt.Sprintf("events=%d", events)) {
			t.Fatalf("%s: no rebuild of %d events logged:\n%s", when, events, out)
		}
		checkTimeEntries(t, s, when)
		checkLists(s, when)
	}

	s := open(false)
	if out := take(); !strings.Contains(out, "events=0") {
		t.Fatalf("a new store's empty index is not logged as built:\n%s", out)
	}
	write(s, 0, 600)
	write(s, 0, 200) // moves most across buckets
	checkTimeEntries(t, s, "as written")
	checkLists(s, "as written")

	// Written before the index: no entries, no marker.
	commitRaw(s, func(b *pebble.Batch) {
		b.DeleteRange(timeLower, prefixEnd(timeLower), nil)
		b.Delete(metaTimeIndex, nil)
	})
	s.Close()
	s = open(false)
	expectRebuild(s, 600, "written before the index")

	// Complete: not rebuilt.
	s.Close()
	s = open(false)
	if out := take(); strings.Contains(out, "time index") {
		t.Fatalf("a complete index was rebuilt:\n%s", out)
	}

	// A rebuild cut short: some entries written, no marker.
	commitRaw(s, func(b *pebble.Batch) {
		b.DeleteRange(timeLower, append(bytes.Clone(timeLower), index.Bucket(now.Add(-90*time.Minute))...), nil)
		b.Delete(metaTimeIndex, nil)
	})
	s.Close()
	s = open(false)
	expectRebuild(s, 600, "rebuild cut short")

	// Stale: an older build moved events without moving their entries,
	// and wrote revisions past the marker.
	write(s, 600, 650)
	commitRaw(s, func(b *pebble.Batch) {
		b.DeleteRange(append(bytes.Clone(timeLower), index.Bucket(now.Add(-time.Hour))...), prefixEnd(timeLower), nil)
		b.Set(indexKey(index.LastObserved, index.Bucket(now.Add(-time.Hour)), []byte("ns0/gone")), nil, nil)
		b.Set(metaTimeIndex, revBytes(s.rev-1), nil)
	})
	s.Close()
	s = open(false)
	expectRebuild(s, 650, "stale entries")

	// Written without the index.
	s.Close()
	s = open(true)
	if p := s.planSet().Plan(storage.Selector{Since: now}); p.Range != nil {
		t.Fatalf("a store without the time index plans with it: %+v", p)
	}
	write(s, 100, 400)
	s.Close()
	take()
	s = open(false)
	expectRebuild(s, 650, "written without the index")
	s.Close()
}

// TestTimeRangeTooWide: a time range with more candidates than a list
// reads from the index is served by a scan, with the same answer, paged
// or not, and the index's range read says why.
func TestTimeRangeTooWide(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s, err := Open(Options{Dir: t.TempDir(), Clock: clocktesting.NewFakeClock(now), NoSync: true, rangeCandidates: 50,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 300 {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%2), Name: fmt.Sprintf("e%04d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}, LastTimestamp: metav1.NewTime(now.Add(-time.Duration(i) * time.Minute))}
		if _, err := s.Create(ctx, e, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	sel := storage.Selector{Since: now.Add(-200 * time.Minute)}
	p := s.planSet().Plan(sel)
	_, err = readRange(ctx, v, *p.Range, keyScope{}, "", s.rangeCap(0))
	s.release(v)
	if !errors.Is(err, errRangeTooWide) {
		t.Fatalf("reading 201 candidates with a cap of 50: %v, want errRangeTooWide", err)
	}
	// A paged list's first page marks the range too wide on its view, so
	// that its later pages scan at once instead of reading the range again.
	first, err := s.List(ctx, storage.ListOptions{Selector: sel, Limit: 7})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page: %v, continue %q", err, first.Continue)
	}
	tok, err := decodeContinue(first.Continue)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := s.acquireAt(tok.Rev)
	if err != nil || pv == nil {
		t.Fatalf("the first page's view: %v", err)
	}
	_, wide, _ := pv.unions.find(func(key string) bool { return isUnionCacheKey(key, p, keyScope{}) })
	s.release(pv)
	if !wide {
		t.Fatal("the first page of a range too wide left its view without the mark: every later page reads the range again")
	}
	for _, sel := range []storage.Selector{sel, {Since: now.Add(-40 * time.Minute)}, {Namespace: "ns1", Until: now.Add(-100 * time.Minute)}} {
		for _, limit := range []int64{0, 7} {
			var got []string
			opts := storage.ListOptions{Selector: sel, Limit: limit}
			for {
				res, err := s.List(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range res.Items {
					got = append(got, e.Name)
				}
				if opts.Continue = res.Continue; opts.Continue == "" {
					break
				}
			}
			var want []string
			for i := range 300 {
				e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%2)}, LastTimestamp: metav1.NewTime(now.Add(-time.Duration(i) * time.Minute))}
				if sel.Matches(e) {
					want = append(want, fmt.Sprintf("e%04d", i))
				}
			}
			slices.SortFunc(want, func(a, b string) int {
				var i, j int
				fmt.Sscanf(a, "e%d", &i)
				fmt.Sscanf(b, "e%d", &j)
				return strings.Compare(fmt.Sprintf("ns%d/%s", i%2, a), fmt.Sprintf("ns%d/%s", j%2, b))
			})
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%+v limit %d: got %v, want %v", sel, limit, got, want)
			}
		}
	}
}

// TestTimeIndexReadOnlyOpen: a store whose time index is incomplete,
// opened read-only (its disk below the space kept free), serves time
// ranges by scans, with the right answer; opened read-write again, it
// rebuilds the index and plans with it.
func TestTimeIndexReadOnlyOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	opts := Options{Dir: dir, Clock: clocktesting.NewFakeClock(now), NoSync: true, Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("e%03d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}, LastTimestamp: metav1.NewTime(now.Add(-time.Duration(i) * time.Minute))}
		if _, err := s.Create(ctx, e, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// As written before the index.
	lower := []byte{prefixIndex, byte(index.LastObserved)}
	b := s.db.NewBatch()
	b.DeleteRange(lower, prefixEnd(lower), nil)
	b.Delete(metaTimeIndex, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()

	sel := storage.Selector{Since: now.Add(-30*time.Minute - time.Second)}
	list := func(s *Store) int {
		t.Helper()
		res, err := s.List(ctx, storage.ListOptions{Selector: sel})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Items)
	}
	ro := opts
	ro.MinFreeBytes = 1 << 62
	s, err = Open(ro)
	if err != nil {
		t.Fatal(err)
	}
	if p := s.planSet().Plan(sel); p.Range != nil || !s.popts.ReadOnly {
		t.Fatalf("read-only %v, plan %+v: an incomplete index is planned with", s.popts.ReadOnly, p)
	}
	if n := list(s); n != 31 {
		t.Fatalf("read-only: %d events in the last 30m, want 31", n)
	}
	s.Close()
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := s.planSet().Plan(sel); p.Range == nil {
		t.Fatalf("read-write: the rebuilt index is not planned with: %+v", p)
	}
	if n := list(s); n != 31 {
		t.Fatalf("read-write: %d events in the last 30m, want 31", n)
	}
	checkTimeEntries(t, s, "rebuilt after a read-only open")
}
