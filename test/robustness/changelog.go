package robustness

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Change is one change to the store, at its revision.
type Change struct {
	Rev       int64
	Namespace string
	Deleted   bool
	Object
	// Source says who reported it first (an op or a watch), for reports.
	Source string
}

func (c Change) same(o Change) bool {
	return c.Rev == o.Rev && c.Namespace == o.Namespace && c.Name == o.Name && c.Deleted == o.Deleted &&
		c.Msg == o.Msg && c.Reason == o.Reason && c.Pod == o.Pod
}

// String describes c for reports.
func (c Change) String() string {
	verb := "put"
	if c.Deleted {
		verb = "delete"
	}
	return fmt.Sprintf("rev %d %s %s/%s msg=%s reason=%s pod=%s (from %s)", c.Rev, verb, c.Namespace, c.Name, c.Msg, c.Reason, c.Pod, c.Source)
}

// ChangeLog is every change the history reveals, by revision: from
// acknowledged writes and from the events of watches without a selector
// (which see every change of their namespace). It is complete for a
// namespace over the revisions that watches without selector covered
// without a gap, which the watch checker verifies.
type ChangeLog struct {
	byRev map[int64]Change
	// byNS are each namespace's changes in revision order.
	byNS map[string][]Change
}

// BuildChangeLog merges the changes the history reveals, reporting two
// different changes at one revision, and a watch's change whose type does
// not fit its key's state (ADDED of a stored key, MODIFIED or DELETED of
// a missing one, DELETED with another state than the last).
func BuildChangeLog(h History) (*ChangeLog, []Violation) {
	l := &ChangeLog{byRev: map[int64]Change{}, byNS: map[string][]Change{}}
	var vs []Violation
	add := func(c Change) {
		if prev, ok := l.byRev[c.Rev]; ok {
			if !prev.same(c) {
				vs = append(vs, Violation{"changelog", fmt.Sprintf("two changes at revision %d: %v and %v", c.Rev, prev, c)})
			}
			return
		}
		l.byRev[c.Rev] = c
	}
	for _, o := range h.Ops {
		switch o.Kind {
		case Create, Update, Patch:
			if o.Outcome == OK {
				add(Change{Rev: o.Rev, Namespace: o.Namespace, Object: Object{Name: o.Name, Rev: o.Rev, Msg: o.Msg, Reason: o.Reason, Pod: o.Pod}, Source: fmt.Sprintf("op %d", o.ID)})
			}
		}
	}
	// Watch types are checked against the replayed state below.
	type typed struct {
		typ string
		src string
	}
	types := map[int64]typed{}
	for _, w := range h.Watches {
		if w.Selector != "" {
			continue
		}
		initial := w.SendInitialEvents
		for _, e := range w.Events {
			if e.Type == "BOOKMARK" {
				if e.InitialEventsEnd {
					initial = false
				}
				continue
			}
			if initial {
				continue
			}
			src := fmt.Sprintf("watch %d", w.ID)
			add(Change{Rev: e.Rev, Namespace: w.Namespace, Deleted: e.Type == "DELETED", Object: e.Object, Source: src})
			if _, ok := types[e.Rev]; !ok {
				types[e.Rev] = typed{e.Type, src}
			}
		}
	}
	for _, c := range l.byRev {
		l.byNS[c.Namespace] = append(l.byNS[c.Namespace], c)
	}
	for ns, cs := range l.byNS {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Rev < cs[j].Rev })
		state := map[string]Object{}
		for _, c := range cs {
			prev, existed := state[c.Name]
			if t, ok := types[c.Rev]; ok {
				want := "MODIFIED"
				switch {
				case c.Deleted:
					want = "DELETED"
				case !existed:
					want = "ADDED"
				}
				if t.typ != want {
					vs = append(vs, Violation{"changelog", fmt.Sprintf("%s delivered %s at revision %d for %s/%s, which the change log makes a %s", t.src, t.typ, c.Rev, ns, c.Name, want)})
				}
			}
			if c.Deleted {
				if !existed {
					vs = append(vs, Violation{"changelog", fmt.Sprintf("deletion of missing %s/%s: %v", ns, c.Name, c)})
				} else if prev.Msg != c.Msg {
					vs = append(vs, Violation{"changelog", fmt.Sprintf("deletion of %s/%s carries msg %s, its last state has %s: %v", ns, c.Name, c.Msg, prev.Msg, c)})
				}
				delete(state, c.Name)
			} else {
				state[c.Name] = c.Object
			}
		}
	}
	return l, vs
}

// Lookup is the change at rev.
func (l *ChangeLog) Lookup(rev int64) (Change, bool) {
	c, ok := l.byRev[rev]
	return c, ok
}

// Changes are ns's changes in revision order.
func (l *ChangeLog) Changes(ns string) []Change { return l.byNS[ns] }

// Len is the number of changes.
func (l *ChangeLog) Len() int { return len(l.byRev) }

// FindMsg is the change that wrote msg in ns, if any.
func (l *ChangeLog) FindMsg(ns, msg string) (Change, bool) {
	for _, c := range l.byNS[ns] {
		if !c.Deleted && c.Msg == msg {
			return c, true
		}
	}
	return Change{}, false
}

// StateAt is ns's state after every change up to rev: its objects by name.
func (l *ChangeLog) StateAt(ns string, rev int64) map[string]Object {
	state := map[string]Object{}
	for _, c := range l.byNS[ns] {
		if c.Rev > rev {
			break
		}
		if c.Deleted {
			delete(state, c.Name)
		} else {
			state[c.Name] = c.Object
		}
	}
	return state
}

// NextChange is the revision of the first change of ns/name after rev, or
// 0 if the log has none.
func (l *ChangeLog) NextChange(ns, name string, rev int64) int64 {
	cs := l.byNS[ns]
	i := sort.Search(len(cs), func(i int) bool { return cs[i].Rev > rev })
	for ; i < len(cs); i++ {
		if cs[i].Name == name {
			return cs[i].Rev
		}
	}
	return 0
}

// CheckGoneLists reports every list that got 410 Gone for a revision first
// seen less than window before it was called: the store keeps that much.
// Unless exactPast is set, a list with resourceVersionMatch=Exact may get
// 410 for any revision but the current one: pebblestore serves past
// revisions only from the snapshots of paginated lists
// (storage.ListOptions.Exact), etcd from its history. Without exactPast,
// a later page (a continue token) may also get 410 if the list ran
// across one of restarts (the recorder times at which the store's process
// was killed): those snapshots are in its memory.
func CheckGoneLists(h History, window time.Duration, exactPast bool, restarts ...int64) []Violation {
	var vs []Violation
	for _, o := range h.Ops {
		if o.Kind != List || o.List.Match == "Exact" && !exactPast {
			continue
		}
		if o.List.Gone && !exactPast && o.List.Pages > 0 && slices.ContainsFunc(restarts, func(at int64) bool {
			return o.Call <= at && at <= o.Return
		}) {
			continue
		}
		if o.List.Gone && o.Call-o.List.RVSeen < int64(window) {
			vs = append(vs, Violation{"gone", fmt.Sprintf("%s: 410 Gone for a revision first seen %v before, within the history window %v",
				o, time.Duration(o.Call-o.List.RVSeen), window)})
		}
	}
	return vs
}

// CheckLists checks every successful list against the change log: its
// items are exactly the state of its namespace at its revision that its
// selector matches, each at its revision with its content; a list with
// resourceVersionMatch=Exact is served at that revision, and one with
// NotOlderThan at that revision or later. Whether the revision is recent
// enough for when the list ran is the linearizability checker's part.
func CheckLists(h History, l *ChangeLog) []Violation {
	var vs []Violation
	for _, o := range h.Ops {
		if o.Kind != List {
			continue
		}
		if o.List.Mismatch != "" {
			vs = append(vs, Violation{"list", o.String() + ": " + o.List.Mismatch})
		}
		if o.Outcome != OK {
			continue
		}
		if vs = append(vs, checkList(o, l)...); len(vs) > 20 {
			return vs
		}
	}
	return vs
}

func checkList(o *Op, l *ChangeLog) []Violation {
	var vs []Violation
	bad := func(format string, a ...any) {
		vs = append(vs, Violation{"list", o.String() + ": " + fmt.Sprintf(format, a...)})
	}
	var asked int64
	if o.List.RV != "" {
		fmt.Sscan(o.List.RV, &asked) //nolint:errcheck // the generator wrote it
	}
	switch o.List.Match {
	case "Exact":
		if o.Rev != asked {
			bad("served at revision %d, not the exact %d asked for", o.Rev, asked)
		}
	case "NotOlderThan":
		if o.Rev < asked {
			bad("served at revision %d, older than the %d asked for", o.Rev, asked)
		}
	}
	sel, err := ParseSelector(o.List.Selector)
	if err != nil {
		bad("%v", err)
		return vs
	}
	var want []Object
	for _, obj := range l.StateAt(o.Namespace, o.Rev) {
		if sel.Matches(obj) {
			want = append(want, obj)
		}
	}
	slices.SortFunc(want, func(a, b Object) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	got := o.List.Items
	if !slices.IsSortedFunc(got, func(a, b Object) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	}) {
		bad("items not in name order: %v", names(got))
	}
	if !slices.Equal(got, want) {
		bad("items %v, the state at revision %d is %v", got, o.Rev, want)
	}
	return vs
}

func names(objs []Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Name
	}
	return out
}
