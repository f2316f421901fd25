package storagetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventfilter"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// filterCase is a CEL filter and the same condition written in Go, the
// brute force the store's answers are checked against.
type filterCase struct {
	expr string
	want func(*corev1.Event) bool
}

var filterEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var filterCases = []filterCase{
	{`object.message.contains("OOM")`, func(e *corev1.Event) bool { return strings.Contains(e.Message, "OOM") }},
	{`object.message.matches("^Back-off [0-9]+s") && object.count >= 3`, func(e *corev1.Event) bool {
		return strings.HasPrefix(e.Message, "Back-off ") && len(e.Message) > 9 && e.Message[9] >= '0' && e.Message[9] <= '9' && e.Count >= 3
	}},
	{`object.lastTimestamp > timestamp("2026-01-01T00:30:00Z") && object.involvedObject.kind == "Pod"`, func(e *corev1.Event) bool {
		return e.LastTimestamp.After(filterEpoch.Add(30*time.Minute)) && e.InvolvedObject.Kind == "Pod"
	}},
	{`object.count % 7 == 0 || object.reason.startsWith("Fail")`, func(e *corev1.Event) bool {
		return e.Count%7 == 0 || strings.HasPrefix(e.Reason, "Fail")
	}},
}

// filterEvent is the i-th generated event: messages, counts, times,
// kinds and reasons spread so that each filter selects some of them.
func filterEvent(r *rand.Rand, i int) *corev1.Event {
	msgs := []string{"OOMKilled container app", "Back-off 10s restarting failed container", "Back-off pulling image", "Started container", "Insufficient cpu"}
	reasons := []string{"Started", "Failed", "FailedScheduling", "BackOff"}
	kinds := []string{"Pod", "Node", "Deployment"}
	e := ev(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("e%05d", i), func(e *corev1.Event) {
		e.Message = msgs[r.IntN(len(msgs))]
		e.Reason = reasons[r.IntN(len(reasons))]
		e.InvolvedObject.Kind = kinds[r.IntN(len(kinds))]
		e.Count = int32(1 + r.IntN(20))
		e.LastTimestamp = metav1.NewTime(filterEpoch.Add(time.Duration(r.IntN(3600)) * time.Second))
		if r.IntN(2) == 0 {
			e.Type = corev1.EventTypeWarning
		}
	})
	return e
}

// changeFilterEvent changes what the filters read, leaving the indexed
// fields alone half of the time (eventapi.SameSelection holds then, and a
// backend may not keep the previous state of such a change).
func changeFilterEvent(r *rand.Rand, e *corev1.Event) *corev1.Event {
	c := e.DeepCopy()
	c.ResourceVersion = ""
	c.Count += int32(1 + r.IntN(5))
	c.LastTimestamp = metav1.NewTime(c.LastTimestamp.Add(time.Duration(r.IntN(1800)) * time.Second))
	if r.IntN(2) == 0 {
		c.Message = filterEvent(r, 0).Message
	} else {
		c.Reason = filterEvent(r, 0).Reason
	}
	return c
}

// testFilter: a CEL filter (an eventfilter run as the selector's
// predicate) selects exactly what its Go brute force does, over
// thousands of events, combined with a namespace, a field selector and
// pagination; and a watch, live or replaying history, delivers the
// changes that move events in and out of its selection (a DELETED for an
// event leaving it), so that a cache applying them ends with exactly the
// selected events.
func testFilter(t *testing.T, h Harness) {
	f := open(t, h, nil)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1500
	state := map[string]*corev1.Event{}
	for i := range n {
		e := f.create(filterEvent(r, i))
		state[e.Namespace+"/"+e.Name] = e
	}
	start := f.s.Revision()
	compiler, err := eventfilter.NewCompiler(eventfilter.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	compile := func(expr string) storage.Predicate {
		fl, err := compiler.Compile(eventapi.CoreV1, expr)
		if err != nil {
			t.Fatal(err)
		}
		return fl.NewRun()
	}
	brute := func(c filterCase, ns string, warning bool) []string {
		var out []string
		for k, e := range state {
			if (ns == "" || e.Namespace == ns) && (!warning || e.Type == corev1.EventTypeWarning) && c.want(e) {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	list := func(c filterCase, ns string, warning bool, limit int64) []string {
		opts := storage.ListOptions{Selector: storage.Selector{Namespace: ns, Predicate: compile(c.expr)}, Limit: limit}
		if warning {
			opts.Fields = sel(t, eventapi.CoreV1, "type=Warning")
		}
		var got []string
		for {
			res, err := f.s.List(f.ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.RemainingItemCount != nil {
				t.Fatalf("%s: a filtered list has a remainingItemCount", c.expr)
			}
			got = append(got, names(res.Items)...)
			if opts.Continue = res.Continue; res.Continue == "" {
				return got
			}
		}
	}
	checkLists := func() {
		t.Helper()
		for _, c := range filterCases {
			for _, q := range []struct {
				ns      string
				warning bool
				limit   int64
			}{{"", false, 0}, {"ns1", false, 0}, {"", true, 97}, {"ns2", true, 13}} {
				want := brute(c, q.ns, q.warning)
				if len(want) == 0 {
					t.Fatalf("%s selects no event of %+v: the case tests nothing", c.expr, q)
				}
				sameNames(t, fmt.Sprintf("%s %+v", c.expr, q), list(c, q.ns, q.warning, q.limit), want)
			}
		}
	}
	checkLists()

	// Live watches, from the revision before the changes, with the
	// initial state they start from.
	type watched struct {
		c     filterCase
		w     storage.Watcher
		cache map[string]bool
	}
	var live []watched
	for _, c := range filterCases {
		w, err := f.s.Watch(f.ctx, storage.WatchOptions{Selector: storage.Selector{Predicate: compile(c.expr)}, Revision: start})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		cache := map[string]bool{}
		for _, k := range brute(c, "", false) {
			cache[k] = true
		}
		live = append(live, watched{c, w, cache})
	}
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for range 600 {
		k := keys[r.IntN(len(keys))]
		out, err := f.s.Update(f.ctx, changeFilterEvent(r, state[k]), storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		state[k] = out
	}
	// A last event every filter selects: the watches have seen every
	// change once they deliver it.
	marker := f.create(ev("ns0", "marker", func(e *corev1.Event) {
		e.Message, e.Reason, e.Count = "Back-off 5s OOM", "Failed", 7
		e.LastTimestamp = metav1.NewTime(filterEpoch.Add(59 * time.Minute))
	}))
	state["ns0/marker"] = marker
	end := rev(t, marker)
	for _, c := range filterCases {
		if !c.want(marker) {
			t.Fatalf("the marker does not match %s", c.expr)
		}
	}
	checkLists()

	follow := func(what string, c filterCase, w storage.Watcher, cache map[string]bool) {
		t.Helper()
		for {
			e := recv(t, w)
			if e.Err != nil {
				t.Fatalf("%s %s: %v", what, c.expr, e.Err)
			}
			k := e.Object.Namespace + "/" + e.Object.Name
			switch e.Type {
			case watch.Added, watch.Modified:
				if !c.want(e.Object) {
					t.Fatalf("%s %s: %s %s, which the filter does not select", what, c.expr, e.Type, k)
				}
				cache[k] = true
			case watch.Deleted:
				delete(cache, k)
			}
			if e.Revision >= end {
				break
			}
		}
		got := make([]string, 0, len(cache))
		for k := range cache {
			got = append(got, k)
		}
		slices.Sort(got)
		sameNames(t, what+" "+c.expr, got, brute(c, "", false))
	}
	for _, l := range live {
		follow("live watch", l.c, l.w, l.cache)
	}
	// A watch started afterwards replays the history from the start
	// (from the log, on a backend whose memory of recent changes is
	// shorter), and one with its initial events sees the current state.
	for _, c := range filterCases {
		w, err := f.s.Watch(f.ctx, storage.WatchOptions{Selector: storage.Selector{Predicate: compile(c.expr)}, Revision: start})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		// The state at start, from the brute force over the first
		// generation (replayed with the same seed).
		r0 := rand.New(rand.NewPCG(1, 2))
		cache := map[string]bool{}
		for i := range n {
			e := filterEvent(r0, i)
			if c.want(e) {
				cache[e.Namespace+"/"+e.Name] = true
			}
		}
		follow("replayed watch", c, w, cache)

		w, err = f.s.Watch(f.ctx, storage.WatchOptions{Selector: storage.Selector{Predicate: compile(c.expr)}, SendInitialEvents: true, InitialEventsEndBookmark: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		var got []string
		for e := recv(t, w); e.Type != watch.Bookmark; e = recv(t, w) {
			if e.Err != nil || e.Type != watch.Added {
				t.Fatalf("initial events of %s: %s %v", c.expr, e.Type, e.Err)
			}
			got = append(got, e.Object.Namespace+"/"+e.Object.Name)
		}
		slices.Sort(got)
		sameNames(t, "initial events "+c.expr, got, brute(c, "", false))
	}
}

// sameNames fails the test unless got and want, sorted, are equal,
// naming the first differences rather than printing thousands of names.
func sameNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	in := func(s []string, x string) bool { _, ok := slices.BinarySearch(s, x); return ok }
	var missing, extra []string
	for _, x := range want {
		if !in(got, x) && len(missing) < 10 {
			missing = append(missing, x)
		}
	}
	for _, x := range got {
		if !in(want, x) && len(extra) < 10 {
			extra = append(extra, x)
		}
	}
	t.Fatalf("%s: got %d names, want %d; missing (up to 10) %v, unexpected %v", what, len(got), len(want), missing, extra)
}
