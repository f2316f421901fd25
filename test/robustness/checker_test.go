package robustness

import (
	"strings"
	"testing"
	"time"
)

// The checkers must be able to fail: each test below feeds them a
// history with one deliberate fault and asserts they report it under the
// right check, and TestCheckersPassValidHistory that the same history
// without the fault passes.

const ns = "ns"

// validHistory: k1 created (rev 5), updated (rev 7), deleted (rev 9,
// learned by the observer); k2 created at rev 6 with reason R1; reads
// between them; an observer watch and a watch with a selector.
func validHistory() History {
	ms := func(d int) int64 { return int64(time.Duration(d) * time.Millisecond) }
	ops := []*Op{
		{ID: 0, Client: 0, Kind: Create, Namespace: ns, Name: "k1", Msg: "a", Reason: "R0", Pod: "p", Call: ms(0), Return: ms(10), Outcome: OK, Rev: 5},
		{ID: 1, Client: 1, Kind: Create, Namespace: ns, Name: "k2", Msg: "b", Reason: "R1", Pod: "p", Call: ms(11), Return: ms(20), Outcome: OK, Rev: 6},
		{ID: 2, Client: 0, Kind: Get, Namespace: ns, Name: "k1", Call: ms(21), Return: ms(25), Outcome: OK, Rev: 5, Got: Object{Name: "k1", Rev: 5, Msg: "a", Reason: "R0", Pod: "p"}},
		{ID: 3, Client: 1, Kind: Update, Namespace: ns, Name: "k1", Msg: "c", Reason: "R1", Pod: "p", PreRev: 5, Call: ms(26), Return: ms(30), Outcome: OK, Rev: 7},
		{ID: 4, Client: 0, Kind: List, Namespace: ns, Call: ms(31), Return: ms(35), Outcome: OK, Rev: 7,
			List: &ListOp{Pages: 1, Items: []Object{{Name: "k1", Rev: 7, Msg: "c", Reason: "R1", Pod: "p"}, {Name: "k2", Rev: 6, Msg: "b", Reason: "R1", Pod: "p"}}}},
		{ID: 5, Client: 1, Kind: Update, Namespace: ns, Name: "k1", Msg: "d", Reason: "R1", Pod: "p", PreRev: 5, Call: ms(36), Return: ms(40), Outcome: Conflict},
		{ID: 6, Client: 0, Kind: Delete, Namespace: ns, Name: "k1", PreRev: 7, Call: ms(41), Return: ms(45), Outcome: OK},
		{ID: 7, Client: 1, Kind: Get, Namespace: ns, Name: "k1", Call: ms(46), Return: ms(50), Outcome: NotFound},
		{ID: 8, Client: 0, Kind: List, Namespace: ns, Call: ms(51), Return: ms(55), Outcome: OK, Rev: 9,
			List: &ListOp{Selector: "reason=R1", Pages: 1, Items: []Object{{Name: "k2", Rev: 6, Msg: "b", Reason: "R1", Pod: "p"}}}},
	}
	watches := []*Watch{
		{ID: 0, Client: -1, Namespace: ns, StartRev: 4, Start: ms(0), End: ms(60), Events: []WatchEvent{
			{Type: "ADDED", Object: Object{Name: "k1", Rev: 5, Msg: "a", Reason: "R0", Pod: "p"}},
			{Type: "ADDED", Object: Object{Name: "k2", Rev: 6, Msg: "b", Reason: "R1", Pod: "p"}},
			{Type: "MODIFIED", Object: Object{Name: "k1", Rev: 7, Msg: "c", Reason: "R1", Pod: "p"}},
			{Type: "DELETED", Object: Object{Name: "k1", Rev: 9, Msg: "c", Reason: "R1", Pod: "p"}},
			{Type: "BOOKMARK", Object: Object{Rev: 10}},
		}},
		// reason=R1 sees k1 come in with its update, and go with its delete.
		{ID: 1, Client: 2, Namespace: ns, Selector: "reason=R1", StartRev: 5, StartRevSeen: ms(10), Start: ms(12), End: ms(60), Events: []WatchEvent{
			{Type: "ADDED", Object: Object{Name: "k2", Rev: 6, Msg: "b", Reason: "R1", Pod: "p"}},
			{Type: "ADDED", Object: Object{Name: "k1", Rev: 7, Msg: "c", Reason: "R1", Pod: "p"}},
			{Type: "BOOKMARK", Object: Object{Rev: 8}},
			{Type: "DELETED", Object: Object{Name: "k1", Rev: 9, Msg: "c", Reason: "R1", Pod: "p"}},
		}},
		// A watch-list at revision 7, then the delete.
		{ID: 2, Client: 3, Namespace: ns, SendInitialEvents: true, Start: ms(31), End: ms(60), Events: []WatchEvent{
			{Type: "ADDED", Object: Object{Name: "k1", Rev: 7, Msg: "c", Reason: "R1", Pod: "p"}},
			{Type: "ADDED", Object: Object{Name: "k2", Rev: 6, Msg: "b", Reason: "R1", Pod: "p"}},
			{Type: "BOOKMARK", Object: Object{Rev: 7}, InitialEventsEnd: true},
			{Type: "DELETED", Object: Object{Name: "k1", Rev: 9, Msg: "c", Reason: "R1", Pod: "p"}},
		}},
	}
	return History{Ops: ops, Watches: watches}
}

func check(h History) Report {
	return Check(h, CheckConfig{HistoryWindow: 5 * time.Minute, LinearizeTimeout: 10 * time.Second})
}

// wantViolation fails unless r has a violation of check whose detail
// contains detail.
func wantViolation(t *testing.T, r Report, check, detail string) {
	t.Helper()
	for _, v := range r.Violations {
		if v.Check == check && strings.Contains(v.Detail, detail) {
			return
		}
	}
	t.Errorf("no %s violation mentioning %q; report: %s", check, detail, r)
}

func TestCheckersPassValidHistory(t *testing.T) {
	r := check(validHistory())
	if len(r.Violations) > 0 || len(r.TimedOut) > 0 {
		t.Fatalf("valid history reported: %s", r)
	}
	if r.Ops != 9 || r.Checked != 9 || r.Lists != 2 || r.Watches != 3 || r.WatchEvents != 13 || r.Bookmarks != 3 || r.Changes != 4 || r.Covered[ns] != 10 {
		t.Errorf("counts: %+v", r)
	}
}

// A write acknowledged but lost: the observer never delivers it, and a
// get after it does not find it.
func TestCheckersReportLostWrite(t *testing.T) {
	h := validHistory()
	h.Ops = append(h.Ops, &Op{ID: 9, Client: 2, Kind: Create, Namespace: ns, Name: "k3", Msg: "e", Reason: "R0", Pod: "p",
		Call: int64(56 * time.Millisecond), Return: int64(57 * time.Millisecond), Outcome: OK, Rev: 10},
		&Op{ID: 10, Client: 2, Kind: Get, Namespace: ns, Name: "k3",
			Call: int64(58 * time.Millisecond), Return: int64(59 * time.Millisecond), Outcome: NotFound})
	r := check(h)
	wantViolation(t, r, "linearizable", "key ns/k3")
	wantViolation(t, r, "reliable", "missed ADDED k3 at revision 10")
}

// A list that misses a write acknowledged before it started.
func TestCheckersReportStaleList(t *testing.T) {
	h := validHistory()
	h.Ops[4].Rev = 6 // served before the update at 7 that returned before it
	h.Ops[4].List.Items = []Object{{Name: "k1", Rev: 5, Msg: "a", Reason: "R0", Pod: "p"}, {Name: "k2", Rev: 6, Msg: "b", Reason: "R1", Pod: "p"}}
	r := check(h)
	wantViolation(t, r, "linearizable", "revisions")
}

// A list whose items are not the state at its revision.
func TestCheckersReportWrongListItems(t *testing.T) {
	h := validHistory()
	h.Ops[8].List.Items = nil
	wantViolation(t, check(h), "list", "the state at revision 9")
}

// An update accepted against a stale resourceVersion.
func TestCheckersReportStalePrecondition(t *testing.T) {
	h := validHistory()
	h.Ops[5].Outcome, h.Ops[5].Rev = OK, 8
	r := check(h)
	wantViolation(t, r, "linearizable", "key ns/k1")
}

// Two writes acknowledged with one revision.
func TestCheckersReportReusedRevision(t *testing.T) {
	h := validHistory()
	h.Ops[1].Rev = 5
	wantViolation(t, check(h), "changelog", "two changes at revision 5")
}

func TestCheckersReportDuplicatedWatchEvent(t *testing.T) {
	h := validHistory()
	w := h.Watches[1]
	w.Events = append(w.Events[:2:2], append([]WatchEvent{w.Events[1]}, w.Events[2:]...)...)
	r := check(h)
	wantViolation(t, r, "unique", "revision 7 (ADDED k1) delivered twice")
}

func TestCheckersReportOutOfOrderWatchEvents(t *testing.T) {
	h := validHistory()
	w := h.Watches[0]
	w.Events[0], w.Events[1] = w.Events[1], w.Events[0]
	wantViolation(t, check(h), "ordered", "ADDED k1 at revision 5 after revision 6")
}

func TestCheckersReportBookmarkAhead(t *testing.T) {
	h := validHistory()
	h.Watches[1].Events[2].Rev = 9 // before the DELETED at 9 was sent
	wantViolation(t, check(h), "bookmarkable", "DELETED k1 at revision 9 after a bookmark at 9")
}

// A bookmark that claims a revision whose change the watch never got.
func TestCheckersReportBookmarkOverLostEvent(t *testing.T) {
	h := validHistory()
	w := h.Watches[1]
	w.Events = append(w.Events[:1:1], w.Events[2:]...) // the ADDED k1 at 7 lost
	wantViolation(t, check(h), "reliable", "expected ADDED k1 rev 7")
}

// A resumed watch that starts after the first change it owes.
func TestCheckersReportResumeGap(t *testing.T) {
	h := validHistory()
	h.Watches[1].Events = h.Watches[1].Events[1:]
	wantViolation(t, check(h), "resumable", "expected ADDED k2 rev 6")
}

func TestCheckersReportWrongInitialEvents(t *testing.T) {
	h := validHistory()
	h.Watches[2].Events[2].Rev = 6 // the state at 6 has k1 at 5, not 7
	wantViolation(t, check(h), "initial", "the state at revision 6")
}

func TestCheckersReportGoneWithinWindow(t *testing.T) {
	h := validHistory()
	h.Watches[1].Events, h.Watches[1].Gone = nil, true
	wantViolation(t, check(h), "gone", "410 Gone for revision 5")
	// The same 410 for a revision older than the window is allowed.
	h.Watches[1].Start += int64(10 * time.Minute)
	for _, v := range check(h).Violations {
		if v.Check == "gone" {
			t.Errorf("410 beyond the window reported: %v", v)
		}
	}
}

// A write whose answer was lost but that was applied is resolved through
// the change log; one that was not applied is left out.
func TestCheckersResolveUnknownWrites(t *testing.T) {
	h := validHistory()
	h.Ops[1].Outcome, h.Ops[1].Return, h.Ops[1].Rev = Unknown, Never, 0 // the observer saw it at 6
	h.Ops = append(h.Ops, &Op{ID: 9, Client: 3, Kind: Create, Namespace: ns, Name: "k9", Msg: "never", Call: 1, Return: Never, Outcome: Unknown})
	r := check(h)
	if len(r.Violations) > 0 {
		t.Fatalf("unknown writes: %s", r)
	}
	if r.Checked != 9 {
		t.Errorf("checked %d ops, want 9 (the unapplied create left out)", r.Checked)
	}
	// A get that sees the unapplied write proves it was applied: the
	// change log (and so the observer) missed it.
	h.Ops = append(h.Ops, &Op{ID: 10, Client: 3, Kind: Get, Namespace: ns, Name: "k9", Call: 2, Return: 3, Outcome: OK, Rev: 11, Got: Object{Name: "k9", Rev: 11, Msg: "never"}})
	wantViolation(t, check(h), "linearizable", "key ns/k9")
}

// A list that got 410 for a revision within the history window.
func TestCheckersReportGoneList(t *testing.T) {
	h := validHistory()
	h.Ops = append(h.Ops, &Op{ID: 9, Client: 2, Kind: List, Namespace: ns, Call: int64(56 * time.Millisecond), Return: int64(57 * time.Millisecond),
		Outcome: Failed, List: &ListOp{RV: "5", Match: "Exact", RVSeen: int64(10 * time.Millisecond), Gone: true}})
	exactPast := func(h History) Report {
		return Check(h, CheckConfig{HistoryWindow: 5 * time.Minute, ExactPast: true})
	}
	wantViolation(t, exactPast(h), "gone", "410 Gone for a revision first seen 46ms before")
	// On a store that serves Exact at the current revision only, that
	// 410 is allowed; not so for a list at the current revision.
	if r := check(h); len(r.Violations) > 0 {
		t.Errorf("Exact list's 410 on a store without past revisions reported: %s", r)
	}
	h.Ops[9].List.Match = "NotOlderThan"
	wantViolation(t, check(h), "gone", "410 Gone for a revision first seen 46ms before")
	h.Ops[9].List.RVSeen -= int64(10 * time.Minute)
	for _, v := range exactPast(h).Violations {
		t.Errorf("410 beyond the window reported: %v", v)
	}
}

// A later page of a list at the current revision that got 410: allowed on
// pebble only when the process was killed while the list ran (its
// continue token's snapshot died with it).
func TestCheckersGoneContinueAcrossRestart(t *testing.T) {
	h := validHistory()
	call, ret := int64(56*time.Millisecond), int64(58*time.Millisecond)
	h.Ops = append(h.Ops, &Op{ID: 9, Client: 2, Kind: List, Namespace: ns, Call: call, Return: ret,
		Outcome: Failed, List: &ListOp{Limit: 1, Pages: 1, RVSeen: call, Gone: true}})
	withRestart := func(at int64) Report {
		return Check(h, CheckConfig{HistoryWindow: 5 * time.Minute, Restarts: []int64{at}})
	}
	if r := withRestart(int64(57 * time.Millisecond)); len(r.Violations) > 0 {
		t.Errorf("a continue's 410 across a restart reported: %s", r)
	}
	wantViolation(t, withRestart(int64(60*time.Millisecond)), "gone", "op 9")
	wantViolation(t, check(h), "gone", "op 9")
	// A first page's 410 is not excused by a restart.
	h.Ops[9].List.Pages = 0
	wantViolation(t, withRestart(int64(57*time.Millisecond)), "gone", "op 9")
}
