package storagetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// timeEvent is the i-th event of the time range case, last observed at
// t in one of the three ways eventapi.LastObserved reads: a core event's
// lastTimestamp (seconds), an events.k8s.io series' lastObservedTime, or
// an eventTime alone (microseconds).
func timeEvent(r *rand.Rand, i int, t time.Time) *corev1.Event {
	reasons := []string{"Started", "BackOff", "Pulled", "FailedScheduling"}
	return ev(fmt.Sprintf("ns%d", i%4), fmt.Sprintf("t%05d", i), func(e *corev1.Event) {
		e.Reason = reasons[r.IntN(len(reasons))]
		e.Count = int32(1 + r.IntN(10))
		if r.IntN(3) == 0 {
			e.Type = corev1.EventTypeWarning
		}
		if r.IntN(5) == 0 {
			e.Related = &corev1.ObjectReference{Kind: "Pod", Namespace: e.Namespace, Name: fmt.Sprintf("pod-t%05d", r.IntN(3000)), APIVersion: "v1"}
		}
		setObserved(r, e, t)
	})
}

// setObserved makes ev last observed at t, in the shape of ev's index
// (stable across updates, so each shape also moves).
func setObserved(r *rand.Rand, e *corev1.Event, t time.Time) {
	var i int
	fmt.Sscanf(e.Name, "t%d", &i)
	switch i % 3 {
	case 0:
		t = t.Truncate(time.Second)
		e.LastTimestamp = metav1.NewTime(t)
		e.FirstTimestamp = metav1.NewTime(t.Add(-time.Duration(r.IntN(3600)) * time.Second))
	case 1:
		t = t.Truncate(time.Microsecond)
		e.EventTime = metav1.NewMicroTime(t.Add(-time.Duration(r.IntN(3600)) * time.Second))
		e.Series = &corev1.EventSeries{Count: e.Count, LastObservedTime: metav1.NewMicroTime(t)}
		e.ReportingController, e.ReportingInstance, e.Action = "kubelet", "node-1", "Pulling"
	default:
		e.EventTime = metav1.NewMicroTime(t.Truncate(time.Microsecond))
		e.ReportingController, e.ReportingInstance, e.Action = "kubelet", "node-1", "Pulling"
	}
}

// countPredicate selects the events whose count is a multiple of mod.
type countPredicate int32

func (p countPredicate) Matches(e *corev1.Event) bool { return e.Count%int32(p) == 0 }

// testTimeRange: since/until lists (last observed time, served by a time
// index where the backend has one) select exactly what Selector.Matches
// over every stored event does, alone and combined with a namespace,
// field selectors, a predicate and an object set, over pages, after
// updates that move events across the index's buckets and within one,
// deletes and expiry; a list's later pages are served at its first's
// revision although writes moved its events meanwhile.
func testTimeRange(t *testing.T, h Harness) {
	ttl := 10 * time.Minute
	if h.WallClockTTL {
		ttl = 3 * time.Second
	}
	f := open(t, h, nil)
	r := rand.New(rand.NewPCG(3, 2))
	now := f.clock.Now()
	// Times over the last six hours and a bit of the future, at
	// sub-second precision, and some on minute boundaries.
	randTime := func() time.Time {
		d := time.Duration(r.Int64N(int64(6*time.Hour+10*time.Minute))) - 6*time.Hour
		if r.IntN(10) == 0 {
			d = d.Truncate(time.Minute)
		}
		return now.Add(d)
	}
	const n = 600
	for i := range n {
		f.create(timeEvent(r, i, randTime()))
	}
	// Updates: within the event's minute (its index entry stays), by
	// minutes or hours (it moves), and deletes.
	for i := range 200 {
		k := r.IntN(n)
		key, ns := fmt.Sprintf("t%05d", k), fmt.Sprintf("ns%d", k%4)
		cur, err := f.s.Get(f.ctx, ns, key)
		if err != nil {
			continue // deleted already
		}
		if i%6 == 5 {
			if _, err := f.s.Delete(f.ctx, ns, key, storage.Preconditions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		c := cur.DeepCopy()
		c.ResourceVersion = ""
		c.Count++
		at := eventapi.LastObserved(cur)
		switch i % 3 {
		case 0:
			at = at.Truncate(time.Minute).Add(time.Duration(r.IntN(60)) * time.Second) // same minute
		case 1:
			at = at.Add(time.Duration(1+r.IntN(30)) * time.Minute)
		default:
			at = randTime()
		}
		setObserved(r, c, at)
		if _, err := f.s.Update(f.ctx, c, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	all := func() []*corev1.Event {
		res, err := f.s.List(f.ctx, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Items
	}
	brute := func(state []*corev1.Event, s storage.Selector) []string {
		var out []string
		for _, e := range state {
			if s.Matches(e) {
				out = append(out, e.Namespace+"/"+e.Name)
			}
		}
		return out
	}
	list := func(s storage.Selector, limit int64, between func()) []string {
		opts := storage.ListOptions{Selector: s, Limit: limit}
		var got []string
		for {
			res, err := f.s.List(f.ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if limit > 0 && int64(len(res.Items)) > limit {
				t.Fatalf("a page of %d items, limit %d", len(res.Items), limit)
			}
			got = append(got, names(res.Items)...)
			if opts.Continue = res.Continue; res.Continue == "" {
				return got
			}
			if between != nil {
				between()
				between = nil
			}
		}
	}
	family := &objectSet{}
	for i := range 40 {
		family.add(fmt.Sprintf("pod-t%05d", i*37))
	}
	type query struct {
		name string
		sel  storage.Selector
	}
	queries := func() []query {
		ranges := []struct{ since, until time.Time }{
			{now.Add(-time.Hour), time.Time{}},
			{now.Add(-3 * time.Minute), time.Time{}}, // narrow: beats type=Warning
			{time.Time{}, now.Add(-5 * time.Hour)},
			{now.Add(-2*time.Hour - 17*time.Second), now.Add(-time.Hour + 250*time.Millisecond)},
			{now.Add(-90 * time.Minute), now.Add(-87 * time.Minute)},
			{now.Truncate(time.Minute).Add(-time.Hour), now.Truncate(time.Minute).Add(-59 * time.Minute)}, // one bucket
			{randTime(), time.Time{}},
		}
		a, b := randTime(), randTime()
		if b.Before(a) {
			a, b = b, a
		}
		ranges = append(ranges, struct{ since, until time.Time }{a, b})
		var qs []query
		for i, rg := range ranges {
			base := storage.Selector{Since: rg.since, Until: rg.until}
			with := func(mod func(*storage.Selector)) storage.Selector {
				s := base
				mod(&s)
				return s
			}
			qs = append(qs,
				query{fmt.Sprintf("range %d", i), base},
				query{fmt.Sprintf("range %d ns1", i), with(func(s *storage.Selector) { s.Namespace = "ns1" })},
				query{fmt.Sprintf("range %d type=Warning", i), with(func(s *storage.Selector) { s.Fields = sel(t, eventapi.CoreV1, "type=Warning") })},
				query{fmt.Sprintf("range %d ns2 reason=BackOff", i), with(func(s *storage.Selector) {
					s.Namespace = "ns2"
					s.Fields = sel(t, eventapi.CoreV1, "reason=BackOff")
				})},
				query{fmt.Sprintf("range %d involvedObject.kind=Pod,type!=Normal", i), with(func(s *storage.Selector) {
					s.Fields = sel(t, eventapi.CoreV1, "involvedObject.kind=Pod,type!=Normal")
				})},
				query{fmt.Sprintf("range %d predicate", i), with(func(s *storage.Selector) { s.Predicate = countPredicate(3) })},
				query{fmt.Sprintf("range %d family", i), with(func(s *storage.Selector) { s.Objects = family })},
			)
		}
		qs = append(qs, query{"empty range", storage.Selector{Since: now, Until: now}})
		return qs
	}
	check := func(when string) {
		t.Helper()
		state := all()
		selected := 0
		for _, q := range queries() {
			want := brute(state, q.sel)
			selected += len(want)
			for _, limit := range []int64{0, 10 + r.Int64N(40), 250} {
				sameNames(t, fmt.Sprintf("%s: %s, limit %d", when, q.name, limit), list(q.sel, limit, nil), want)
			}
		}
		if selected == 0 {
			t.Fatalf("%s: the queries select nothing: the case tests nothing", when)
		}
	}
	check("after writes")

	// Expiry removes the short-lived events from the index too.
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := n; i < n+100; i++ {
		if _, err := f.s.Create(f.ctx, timeEvent(r, i, randTime()), storage.WriteOptions{TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	if !h.WallClockTTL {
		f.clock.Step(ttl + time.Minute)
	}
	for expired := 0; expired < 100; {
		if e := f.expectDeletedTicking(w, h.WallClockTTL); e.Object.Name >= fmt.Sprintf("t%05d", n) {
			expired++
		}
	}
	check("after expiry")

	// A list's later pages see its first page's revision: events moved
	// out of the range and into it, and deleted, between its pages.
	state := all()
	s := storage.Selector{Since: now.Add(-3 * time.Hour), Until: now.Add(-time.Hour)}
	want := brute(state, s)
	if len(want) < 100 {
		t.Fatalf("%d events in the range: too few to page", len(want))
	}
	got := list(s, 50, func() {
		for i, e := range state {
			if i%5 != 0 {
				continue
			}
			c := e.DeepCopy()
			c.ResourceVersion = ""
			if i%2 == 0 {
				setObserved(r, c, now.Add(-90*time.Minute))
			} else {
				setObserved(r, c, now.Add(time.Minute))
			}
			if _, err := f.s.Update(f.ctx, c, storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if i%15 == 0 {
				if _, err := f.s.Delete(f.ctx, e.Namespace, e.Name, storage.Preconditions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	sameNames(t, "pages across writes", got, want)
	check("after writes between pages")
}

// expectDeletedTicking waits for the next DELETED (an expiry), stepping
// the fake clock meanwhile unless the backend expires on the wall clock.
func (f *fixture) expectDeletedTicking(w storage.Watcher, wall bool) storage.Event {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-time.After(20 * time.Millisecond):
			if !wall {
				f.clock.Step(time.Second)
			}
		case e, ok := <-w.ResultChan():
			if !ok {
				f.t.Fatal("watch closed")
			}
			if e.Type == watch.Deleted {
				return e
			}
		}
	}
	f.t.Fatalf("no expiry within 20s (now %v, stats %+v)", f.clock.Now(), f.s.Stats())
	return storage.Event{}
}
