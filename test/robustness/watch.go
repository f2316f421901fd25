package robustness

import (
	"fmt"
	"slices"
	"time"
)

// WatchCheck configures CheckWatches.
type WatchCheck struct {
	// HistoryWindow is how long the store keeps changes for watches to
	// resume from: a watch from a revision first seen less than this long
	// before it started must not get 410 Gone.
	HistoryWindow time.Duration
	// Complete reports whether the change log is complete for ns up to
	// rev (a watch without selector covered it). Watches past it are
	// checked only up to it. Nil: always.
	Complete func(ns string, rev int64) bool
}

// WatchResult is what CheckWatches found.
type WatchResult struct {
	// Events is the number of delivered events checked (bookmarks
	// included), Bookmarks how many were bookmarks, and Gone how many
	// watches ended with 410.
	Events, Bookmarks, Gone int
	// Violations found.
	Violations []Violation
}

// CheckWatches checks every watch of h against the change log:
//
//   - ordered: events in strictly increasing revision order, all after
//     the revision the watch started from; bookmarks never go back;
//   - unique: no change delivered twice;
//   - bookmarkable: no event at or below a bookmark's revision after it
//     (a bookmark is never ahead of what was delivered);
//   - reliable and resumable: the events are exactly the changes after
//     the start revision that the selector sees (ADDED when an event
//     comes into it, MODIFIED, DELETED with the last state when it goes
//     out of it or is deleted), up to the last revision the watch
//     reached (its last event or bookmark), starting with the first
//     change after the start revision: none lost, none invented;
//   - initial: a watch-list's ADDED events before its initial-events-end
//     bookmark are the state at that bookmark's revision;
//   - gone: 410 only for a revision older than the history window.
func CheckWatches(h History, l *ChangeLog, cfg WatchCheck) WatchResult {
	var res WatchResult
	for _, w := range h.Watches {
		res.Events += len(w.Events)
		for _, e := range w.Events {
			if e.Type == "BOOKMARK" {
				res.Bookmarks++
			}
		}
		if w.Gone {
			res.Gone++
		}
		vs := checkWatch(w, l, cfg)
		res.Violations = append(res.Violations, vs...)
		if len(res.Violations) > 20 {
			break
		}
	}
	return res
}

func checkWatch(w *Watch, l *ChangeLog, cfg WatchCheck) []Violation {
	var vs []Violation
	bad := func(check, format string, a ...any) {
		if len(vs) < 5 {
			vs = append(vs, Violation{check, w.String() + ": " + fmt.Sprintf(format, a...)})
		}
	}
	if w.Gone && w.Start-w.StartRevSeen < int64(cfg.HistoryWindow) {
		bad("gone", "410 Gone for revision %d, first seen %v before the watch started, within the history window %v",
			w.StartRev, time.Duration(w.Start-w.StartRevSeen), cfg.HistoryWindow)
	}
	sel, err := ParseSelector(w.Selector)
	if err != nil {
		bad("ordered", "%v", err)
		return vs
	}
	events := w.Events
	from := w.StartRev
	if w.SendInitialEvents {
		end := slices.IndexFunc(events, func(e WatchEvent) bool { return e.Type == "BOOKMARK" && e.InitialEventsEnd })
		if end < 0 {
			if len(events) > 0 {
				bad("initial", "no initial-events-end bookmark after %d events", len(events))
			}
			return vs
		}
		from = events[end].Rev
		if from < w.StartRev {
			bad("initial", "initial events at revision %d, below the %d asked for", from, w.StartRev)
		}
		if cfg.Complete == nil || cfg.Complete(w.Namespace, from) {
			var got, want []Object
			for _, e := range events[:end] {
				if e.Type != "ADDED" {
					bad("initial", "initial event %s %s at %d", e.Type, e.Name, e.Rev)
				}
				got = append(got, e.Object)
			}
			for _, o := range l.StateAt(w.Namespace, from) {
				if sel.Matches(o) {
					want = append(want, o)
				}
			}
			byName := func(a, b Object) int { return compareStrings(a.Name, b.Name) }
			slices.SortFunc(got, byName)
			slices.SortFunc(want, byName)
			if !slices.Equal(got, want) {
				bad("initial", "initial events %v, the state at revision %d is %v", got, from, want)
			}
		}
		events = events[end+1:]
	}
	// Ordered, unique, bookmarkable.
	last, bookmark := from, int64(0)
	seen := map[int64]bool{}
	reached := from
	for _, e := range events {
		if e.Type == "BOOKMARK" {
			if e.Rev < last {
				bad("bookmarkable", "bookmark at %d after an event at %d", e.Rev, last)
			}
			bookmark = max(bookmark, e.Rev)
			reached = max(reached, e.Rev)
			continue
		}
		if seen[e.Rev] {
			bad("unique", "revision %d (%s %s) delivered twice", e.Rev, e.Type, e.Name)
		}
		seen[e.Rev] = true
		if e.Rev <= bookmark {
			bad("bookmarkable", "%s %s at revision %d after a bookmark at %d", e.Type, e.Name, e.Rev, bookmark)
		}
		if e.Rev <= last {
			bad("ordered", "%s %s at revision %d after revision %d", e.Type, e.Name, e.Rev, last)
		}
		last = max(last, e.Rev)
		reached = max(reached, e.Rev)
	}
	// Reliable and resumable: exactly the expected events up to reached.
	upTo := reached
	if cfg.Complete != nil && !cfg.Complete(w.Namespace, upTo) {
		// The highest revision up to which the log is complete.
		lo, hi := from, upTo // Complete(lo) is assumed, Complete(hi) false
		for hi-lo > 1 {
			if mid := lo + (hi-lo)/2; cfg.Complete(w.Namespace, mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		upTo = lo
	}
	want := expectedEvents(l, w.Namespace, sel, from, upTo)
	var got []WatchEvent
	for _, e := range events {
		if e.Type != "BOOKMARK" && e.Rev <= upTo {
			got = append(got, e)
		}
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			bad("reliable", "missed %s %s at revision %d (delivered %d of %d changes up to revision %d)",
				want[i].Type, want[i].Name, want[i].Rev, len(got), len(want), upTo)
		case i >= len(want):
			bad("reliable", "delivered %s %s at revision %d, which is not a change its selector sees (%d expected up to %d)",
				got[i].Type, got[i].Name, got[i].Rev, len(want), upTo)
		case !sameEvent(got[i], want[i]):
			check := "reliable"
			if i == 0 {
				check = "resumable"
			}
			bad(check, "event %d is %s %s rev %d msg %s, expected %s %s rev %d msg %s",
				i, got[i].Type, got[i].Name, got[i].Rev, got[i].Msg, want[i].Type, want[i].Name, want[i].Rev, want[i].Msg)
		}
		if len(vs) >= 5 {
			break
		}
		if i < len(got) && i < len(want) && !sameEvent(got[i], want[i]) {
			break // one misalignment makes every later one differ
		}
	}
	return vs
}

func sameEvent(a, b WatchEvent) bool {
	return a.Type == b.Type && a.Object == b.Object
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// expectedEvents are the events a watch of ns with sel from revision from
// delivers up to revision to, from the change log.
func expectedEvents(l *ChangeLog, ns string, sel Selector, from, to int64) []WatchEvent {
	var out []WatchEvent
	state := map[string]Object{}
	for _, c := range l.Changes(ns) {
		if c.Rev > to {
			break
		}
		prev, existed := state[c.Name]
		if c.Deleted {
			delete(state, c.Name)
		} else {
			state[c.Name] = c.Object
		}
		if c.Rev <= from {
			continue
		}
		was := existed && sel.Matches(prev)
		is := !c.Deleted && sel.Matches(c.Object)
		switch {
		case is && was:
			out = append(out, WatchEvent{Type: "MODIFIED", Object: c.Object})
		case is:
			out = append(out, WatchEvent{Type: "ADDED", Object: c.Object})
		case was:
			// The last state the selector saw, at the change's revision
			// (kube-apiserver's watch cache sends the previous object).
			gone := prev
			gone.Rev = c.Rev
			out = append(out, WatchEvent{Type: "DELETED", Object: gone})
		}
	}
	return out
}
