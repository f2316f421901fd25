package robustness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// CheckConfig configures Check.
type CheckConfig struct {
	// HistoryWindow is the store's history window (see WatchCheck).
	HistoryWindow time.Duration
	// LinearizeTimeout bounds porcupine on each partition (1 minute).
	LinearizeTimeout time.Duration
	// ExactPast says the store serves lists at any past revision within
	// the history window (etcd), not only the current one (pebble).
	ExactPast bool
	// Restarts are the recorder times at which a process of a store
	// without ExactPast (pebble) was killed: the snapshots its continue
	// tokens name die with it, so a later page of a list running across
	// one may get 410 (storage/pebblestore's reopen and restart).
	Restarts []int64
}

// Report is what Check found in a history.
type Report struct {
	// Ops is the number of operations recorded, Checked how many the
	// linearizability checker placed (the others certainly did nothing),
	// Lists how many lists were checked against the change log.
	Ops, Checked, Lists int
	// Watches and WatchEvents are the watches and their events checked,
	// Bookmarks how many of those were bookmarks, Gone how many watches
	// ended with 410.
	Watches, WatchEvents, Bookmarks, Gone int
	// Changes is the number of changes in the change log.
	Changes int
	// Covered is, by namespace, the revision up to which watches without
	// selector saw every change.
	Covered map[string]int64
	// Violations are every broken guarantee.
	Violations []Violation
	// TimedOut are partitions porcupine could not decide in time.
	TimedOut []string
}

// Summary is a one-line account of the report.
func (r Report) Summary() string {
	return fmt.Sprintf("%d ops (%d linearized, %d lists), %d watches with %d events (%d bookmarks, %d watches ended 410), %d changes, %d violations, %d undecided partitions",
		r.Ops, r.Checked, r.Lists, r.Watches, r.WatchEvents, r.Bookmarks, r.Gone, r.Changes, len(r.Violations), len(r.TimedOut))
}

// String lists the violations.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	for _, v := range r.Violations {
		b.WriteString("\n" + v.String())
	}
	return b.String()
}

// Check runs every checker on h.
func Check(h History, cfg CheckConfig) Report {
	if cfg.LinearizeTimeout <= 0 {
		cfg.LinearizeTimeout = time.Minute
	}
	r := Report{Ops: len(h.Ops), Watches: len(h.Watches)}
	l, vs := BuildChangeLog(h)
	r.Changes = l.Len()
	r.Violations = append(r.Violations, vs...)
	r.Covered = Coverage(h)
	for _, o := range h.Ops {
		if o.Kind == List && o.Outcome == OK {
			r.Lists++
		}
	}
	r.Violations = append(r.Violations, CheckLists(h, l)...)
	r.Violations = append(r.Violations, CheckGoneLists(h, cfg.HistoryWindow, cfg.ExactPast, cfg.Restarts...)...)
	lin := CheckLinearizable(h, l, cfg.LinearizeTimeout)
	r.Checked = lin.Checked
	r.Violations = append(r.Violations, lin.Violations...)
	r.TimedOut = lin.TimedOut
	wr := CheckWatches(h, l, WatchCheck{HistoryWindow: cfg.HistoryWindow, Complete: func(ns string, rev int64) bool {
		return rev <= r.Covered[ns]
	}})
	r.WatchEvents, r.Bookmarks, r.Gone = wr.Events, wr.Bookmarks, wr.Gone
	r.Violations = append(r.Violations, wr.Violations...)
	return r
}

// Coverage is, by namespace, the revision up to which watches without
// selector delivered every change without a gap, from the earliest
// revision one started at: the union of each one's (start, reached]
// that is contiguous from that start. Beyond it the change log may miss
// changes, and checks that need it whole stop there.
func Coverage(h History) map[string]int64 {
	type span struct{ from, to int64 }
	spans := map[string][]span{}
	for _, w := range h.Watches {
		if w.Selector != "" {
			continue
		}
		from := w.StartRev
		if w.SendInitialEvents {
			i := slices.IndexFunc(w.Events, func(e WatchEvent) bool { return e.InitialEventsEnd })
			if i < 0 {
				continue
			}
			from = w.Events[i].Rev
		}
		spans[w.Namespace] = append(spans[w.Namespace], span{from, max(from, reachedOf(w))})
	}
	out := map[string]int64{}
	for ns, ss := range spans {
		slices.SortFunc(ss, func(a, b span) int { return int(min(max(a.from-b.from, -1), 1)) })
		end := ss[0].to
		for _, s := range ss[1:] {
			if s.from > end {
				break
			}
			end = max(end, s.to)
		}
		out[ns] = end
	}
	return out
}
