package robustness

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Kind is what an operation does.
type Kind string

// The kinds of operations the traffic generator issues.
const (
	Create Kind = "create"
	Update Kind = "update" // PUT with a resourceVersion precondition
	Patch  Kind = "patch"  // merge patch, with or without a resourceVersion
	Delete Kind = "delete" // with or without a resourceVersion precondition
	Get    Kind = "get"
	List   Kind = "list"
	// Expire is not issued: it is an expiry (TTL) seen by the watches,
	// added to the history by the TTL scenario.
	Expire Kind = "expire"
)

// Outcome is how an operation ended, as far as the client knows.
type Outcome string

// Outcomes. Unknown is an operation whose effect the client cannot know
// (no answer, a timeout, 5xx other than 507): it may or may not have been
// applied. Failed is a definite refusal that changed nothing (507, 422,
// 429, 400).
const (
	OK       Outcome = "ok"
	Exists   Outcome = "exists"
	Conflict Outcome = "conflict"
	NotFound Outcome = "notfound"
	Failed   Outcome = "failed"
	Unknown  Outcome = "unknown"
)

// Never is the return time of an operation that never returned an answer
// the client could trust: it may take effect at any time after its call.
const Never int64 = math.MaxInt64

// Object is what an operation or a watch saw of one event.
type Object struct {
	Name   string
	Rev    int64
	Msg    string // unique per write: identifies the write that made this state
	Reason string
	Pod    string // involvedObject.name
}

// Op is one recorded operation.
type Op struct {
	ID, Client int
	Kind       Kind
	Namespace  string
	Name       string
	Replica    int
	// Msg, Reason and Pod are what a create, update or patch writes.
	Msg, Reason, Pod string
	// PreRev is the resourceVersion precondition (0: none).
	PreRev int64
	// Call and Return are nanoseconds since the recorder's start; Return
	// is Never for an outcome Unknown.
	Call, Return int64
	Outcome      Outcome
	// Rev is the revision of the written or read object, or of a list.
	Rev int64
	// Got is what a get read.
	Got Object
	// Err is the error, for the report.
	Err string
	// List describes a list.
	List *ListOp
}

// ListOp is what a list asked for and got.
type ListOp struct {
	// Selector is the field selector (empty: none).
	Selector string
	// RV and Match are the resourceVersion and resourceVersionMatch asked.
	RV, Match string
	// Limit is the page size (0: one page).
	Limit int64
	// Pages is how many pages were read.
	Pages int
	// Items are the items of every page, in order.
	Items []Object
	// Mismatch, when set, says a later page was served at another
	// revision than the first.
	Mismatch string
	// RVSeen is when the revision asked for was first seen by a client
	// (the call's time for a list at the current revision), and Gone is
	// set when the list (or a later page) got 410 Gone: the 410 check.
	RVSeen int64
	Gone   bool
}

// String describes o for reports: what it asked, when, and its answer.
func (o *Op) String() string {
	s := fmt.Sprintf("op %d [client %d, replica %d] %s %s/%s", o.ID, o.Client, o.Replica, o.Kind, o.Namespace, o.Name)
	if o.Msg != "" {
		s += fmt.Sprintf(" msg=%s reason=%s pod=%s", o.Msg, o.Reason, o.Pod)
	}
	if o.PreRev != 0 {
		s += fmt.Sprintf(" rv=%d", o.PreRev)
	}
	if o.List != nil {
		s += fmt.Sprintf(" selector=%q rv=%q match=%q limit=%d", o.List.Selector, o.List.RV, o.List.Match, o.List.Limit)
	}
	ret := "never"
	if o.Return != Never {
		ret = time.Duration(o.Return).String()
	}
	s += fmt.Sprintf(" [%v, %s] -> %s rev=%d", time.Duration(o.Call), ret, o.Outcome, o.Rev)
	if o.Kind == Get && o.Outcome == OK {
		s += fmt.Sprintf(" msg=%s", o.Got.Msg)
	}
	if o.List != nil && o.Outcome == OK {
		s += fmt.Sprintf(" items=%d pages=%d", len(o.List.Items), o.List.Pages)
	}
	if o.Err != "" {
		s += " err=" + o.Err
	}
	return s
}

// WatchEvent is one event a watch delivered.
type WatchEvent struct {
	Type string // ADDED, MODIFIED, DELETED, BOOKMARK
	Object
	// InitialEventsEnd marks the bookmark ending a watch-list's initial
	// events.
	InitialEventsEnd bool
	// At is when it was received (nanoseconds since the recorder's start).
	At int64
}

// Watch is one recorded watch: one request, from its start to its end.
type Watch struct {
	ID, Client int
	Namespace  string
	Replica    int
	// Selector is the field selector (empty: none).
	Selector string
	// StartRev is the resourceVersion it started from (0 with
	// SendInitialEvents: a watch-list at the current state).
	StartRev int64
	// StartRevSeen is when StartRev was first observed by any client
	// (for the 410 check).
	StartRevSeen int64
	// SendInitialEvents asks for the state first (a watch-list).
	SendInitialEvents bool
	// Start and End are nanoseconds since the recorder's start.
	Start, End int64
	Events     []WatchEvent
	// Gone is set when the watch ended with 410 Gone (Expired); Err is
	// any error it ended with.
	Gone bool
	Err  string
}

// String describes w for reports.
func (w *Watch) String() string {
	return fmt.Sprintf("watch %d [client %d, replica %d] %s selector=%q from rv %d initial=%v [%v, %v] %d events",
		w.ID, w.Client, w.Replica, w.Namespace, w.Selector, w.StartRev, w.SendInitialEvents,
		time.Duration(w.Start), time.Duration(w.End), len(w.Events))
}

// History is everything recorded in a run.
type History struct {
	Ops     []*Op
	Watches []*Watch
}

// Recorder records operations and watches from concurrent clients.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	ops     []*Op
	watches []*Watch
}

// NewRecorder starts a recorder; its times count from now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the recorder's start, in nanoseconds (monotonic).
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// AddOp records a finished operation and gives it an id.
func (r *Recorder) AddOp(o *Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o.ID = len(r.ops)
	r.ops = append(r.ops, o)
}

// AddWatch records a finished watch and gives it an id.
func (r *Recorder) AddWatch(w *Watch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.ID = len(r.watches)
	r.watches = append(r.watches, w)
}

// History returns what has been recorded so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{Ops: append([]*Op(nil), r.ops...), Watches: append([]*Watch(nil), r.watches...)}
}

// Violation is one broken guarantee found by a checker.
type Violation struct {
	// Check names the guarantee: linearizable, changelog, list, ordered,
	// unique, reliable, resumable, bookmarkable, gone, initial, ttl,
	// export, export-missing, export-order, export-record, export-key.
	Check string
	// Detail says what broke, naming the operations or watches.
	Detail string
}

// String is the check and the detail.
func (v Violation) String() string { return v.Check + ": " + v.Detail }
