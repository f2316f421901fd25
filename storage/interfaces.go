package storage

import (
	"context"
	"errors"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface stores core/v1 Events. Objects passed in are not retained
// after the call returns, except in the watch events the write produces,
// which share them read-only; objects returned (and objects in watch events)
// must be treated as read-only by callers, since they may be shared with
// other readers. Returned objects carry metadata.resourceVersion.
type Interface interface {
	// Get returns the event namespace/name, or ErrNotFound.
	Get(ctx context.Context, namespace, name string) (*corev1.Event, error)

	// List returns the events matching opts in (namespace, name) order, at
	// the revision given by opts (see ListOptions).
	List(ctx context.Context, opts ListOptions) (*ListResult, error)

	// Create stores ev, which must not carry a resourceVersion, under its
	// namespace and name. It fails with ErrExists if that key is taken.
	Create(ctx context.Context, ev *corev1.Event, opts WriteOptions) (*corev1.Event, error)

	// Update replaces the event at ev's namespace and name. With
	// opts.Precondition.Revision set, it fails with ErrConflict unless that
	// is the current revision. A missing event gives ErrNotFound unless
	// opts.CreateIfMissing is set.
	Update(ctx context.Context, ev *corev1.Event, opts WriteOptions) (*corev1.Event, error)

	// Delete removes the event namespace/name and returns its last state,
	// with the deletion's revision as its resourceVersion. It fails with
	// ErrNotFound, or ErrConflict when a precondition does not hold.
	Delete(ctx context.Context, namespace, name string, pre Preconditions) (*corev1.Event, error)

	// Watch streams the changes matching opts after opts.Revision (or, when
	// opts.SendInitialEvents is set, the current state as ADDED events
	// followed by later changes). A revision older than the kept history
	// gives ErrCompacted.
	Watch(ctx context.Context, opts WatchOptions) (Watcher, error)

	// Revision returns the revision of the last durable write.
	Revision() int64

	// Stats reports sizes for metrics.
	Stats() Stats

	// Close flushes pending writes and releases the store. Watchers end.
	Close() error
}

// Sentinel errors. Backends wrap them with %w; test with errors.Is.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: Create found the key taken.
	ErrExists = errors.New("already exists")
	// ErrConflict: a precondition (revision or UID) did not hold.
	ErrConflict = errors.New("precondition failed")
	// ErrCompacted: the requested revision is older than the kept history.
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision: a list asked for a revision the store has not
	// reached.
	ErrFutureRevision = errors.New("revision not yet reached")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store closed")
	// ErrUnavailable: the store cannot serve some requests now, and
	// recovers by itself once the cause is gone (unless the message says
	// the store must be restarted). Two kinds wrap it:
	//   - A store that cannot make writes durable, for instance because
	//     its disk is full (pebblestore): write methods fail with it,
	//     wrapped with the cause (for a full disk, errors.Is(err,
	//     syscall.ENOSPC) holds and the message names the store and says
	//     "no space left on device"); nothing of the failed write is
	//     applied; reads and watches keep working.
	//   - ErrUnreachable: a store whose backend cannot be reached.
	ErrUnavailable = errors.New("store unavailable for writes")
	// ErrUnreachable: the store's backend (etcd) cannot be reached, has
	// no quorum, or did not answer within the store's request timeout.
	// Reads, writes and new watches fail with it, wrapped with the cause
	// in a message naming the backend; errors.Is(err, ErrUnavailable)
	// holds too. A write that failed with it may or may not have been
	// applied (the answer may have been lost on the way back), as with any
	// storage timeout.
	ErrUnreachable error = unreachable{}
)

// unreachable is ErrUnreachable's type: a kind of ErrUnavailable.
type unreachable struct{}

// Error implements error.
func (unreachable) Error() string { return "storage unreachable" }

// Unwrap makes errors.Is(ErrUnreachable, ErrUnavailable) true.
func (unreachable) Unwrap() error { return ErrUnavailable }

// HealthReporter is implemented by stores that can tell whether they can
// serve. Health returns nil when they can, and otherwise an error
// wrapping ErrUnavailable that says why: a store that cannot take writes
// (a full disk), or one whose backend is unreachable (ErrUnreachable).
// It is cheap enough for every readiness probe: a store that must ask a
// backend caches the answer briefly.
type HealthReporter interface {
	Health() error
}

// Selector selects events: all of them, those of one namespace, and those
// matching field and label selectors.
type Selector struct {
	// Namespace restricts to one namespace (a storage namespace: see
	// ClusterNamespace); empty means all, within Clusters.
	Namespace string
	// Clusters restricts to the events of some clusters of a fleet (see
	// ClusterNamespace); the zero value selects every cluster's.
	Clusters Clusters
	// Fields is the field selector in internal field names.
	Fields eventapi.FieldSelector
	// Labels is the label selector; nil matches everything.
	Labels labels.Selector
	// Objects, when set, restricts to the events whose regarding or
	// related object is one of a set (a family of objects, resolved by
	// the server from the family.* field selectors). Backends find the
	// candidates through the name indexes of Objects.Names and keep those
	// Objects.Involves accepts.
	Objects ObjectSet
	// Predicate, when set, is a further condition no index serves (a
	// CEL filter): backends apply it last, to the candidates the indexes
	// and the other conditions leave. A watch evaluates it on both the
	// previous and the current state of a change, since it may depend on
	// any field (SameSelection says nothing about it).
	Predicate Predicate
	// Since and Until, when set, restrict to the events last observed
	// (eventapi.LastObserved) at or after Since and before Until: a time
	// range, which backends serve from their time index when no narrower
	// index applies.
	Since, Until time.Time
}

// Predicate is a condition on events that backends evaluate one event at
// a time. Matches must be safe for concurrent use. A predicate that can
// fail (a cost limit reached) records its error and answers false from
// then on; its owner checks for that error after a list and while a
// watch runs, so that a failure never passes for an empty selection.
type Predicate interface {
	// Matches reports whether ev is selected.
	Matches(ev *corev1.Event) bool
}

// ObjectSet is a set of objects an event must involve, as its regarding
// or its related object. The set may grow while a watch runs (ownership
// learned after its events): Involves answers for the set as it is when
// called, and is safe for concurrent use.
type ObjectSet interface {
	// Names returns the names of the set's objects, each once: every
	// event Involves accepts has one of them as its regarding or related
	// object's name. A list takes its candidates from the name indexes
	// with them. Empty means no event can match.
	Names() []string
	// Involves reports whether ev's regarding or related object is in
	// the set.
	Involves(ev *corev1.Event) bool
}

// SelectsAll reports whether s has no field or label selector: it selects
// every event (of its namespace, when it names one; a selection of some
// clusters without a namespace does not).
func (s Selector) SelectsAll() bool {
	return (s.Clusters.IsAny() || s.Namespace != "") && len(s.Fields) == 0 && (s.Labels == nil || s.Labels.Empty()) && s.Objects == nil && s.Predicate == nil && s.Since.IsZero() && s.Until.IsZero()
}

// InRange reports whether ev was last observed within s's time range.
func (s Selector) InRange(ev *corev1.Event) bool {
	if s.Since.IsZero() && s.Until.IsZero() {
		return true
	}
	t := eventapi.LastObserved(ev)
	return (s.Since.IsZero() || !t.Before(s.Since)) && (s.Until.IsZero() || t.Before(s.Until))
}

// Matches reports whether ev is selected.
func (s Selector) Matches(ev *corev1.Event) bool {
	if s.Namespace != "" && ev.Namespace != s.Namespace {
		return false
	}
	if !s.Clusters.Contains(ev.Namespace) {
		return false
	}
	if !s.Fields.Matches(ev) {
		return false
	}
	if s.Labels != nil && !s.Labels.Empty() && !s.Labels.Matches(labels.Set(ev.Labels)) {
		return false
	}
	if s.Objects != nil && !s.Objects.Involves(ev) {
		return false
	}
	if !s.InRange(ev) {
		return false
	}
	return s.Predicate == nil || s.Predicate.Matches(ev)
}

// ListOptions selects what List returns and at which revision.
type ListOptions struct {
	Selector
	// Limit caps the number of items; 0 means no cap.
	Limit int64
	// Continue resumes a previous List at the position it returned; the
	// list is served at that list's revision while the store keeps it
	// (ErrCompacted otherwise). Revision and Exact are ignored with it.
	Continue string
	// Revision, when > 0, is a lower bound on the revision to serve at (or,
	// with Exact, the only acceptable one): ErrFutureRevision if the store
	// has not reached it, ErrCompacted if Exact and it is not current.
	Revision int64
	// Exact asks for exactly Revision.
	Exact bool
	// WithProtobuf asks for ListResult.Protobuf: the items' core/v1
	// protobuf encoding, where the backend has it without encoding them.
	WithProtobuf bool
}

// ListResult is a page of a list.
type ListResult struct {
	// Items are the matching events, in (namespace, name) order.
	Items []*corev1.Event
	// Revision is the revision the list was served at.
	Revision int64
	// Continue, when not empty, is the token that returns the next page.
	Continue string
	// RemainingItemCount, when set, is how many events the later pages
	// hold, at Revision. Backends set it as kube-apiserver does: only on
	// a page that has a Continue, and only for a list whose selector
	// SelectsAll (then the events stored after the page are exactly what
	// the later pages hold; with a selector they are not, and
	// kube-apiserver leaves the count out rather than give a wrong one).
	RemainingItemCount *int64
	// Protobuf, when not nil (ListOptions.WithProtobuf, and only from a
	// backend that has it), holds for each of Items its core/v1
	// protobuf encoding (Encoded), or a zero Encoded for an item the
	// backend did not have encoded. A list answered in core/v1 protobuf
	// uses it rather than encode the item.
	Protobuf []Encoded
}

// Encoded is an event's core/v1 protobuf encoding as a backend holds it:
// byte for byte what Of's Marshal gives. It stands for Of only: a
// wrapper that passes on other events than the backend's (copies with
// other namespaces, say) leaves it unused without knowing of it, as its
// users check that the item is Of (Matches).
type Encoded struct {
	// Of is the event encoded, the very item of ListResult.Items.
	Of *corev1.Event
	// Bytes is the encoding, shared with the backend's caches: read
	// it, never change it.
	Bytes []byte
}

// Matches returns the encoding when e is ev's (the same object) and
// has one; nil otherwise.
func (e Encoded) Matches(ev *corev1.Event) []byte {
	if e.Of == nil || e.Of != ev {
		return nil
	}
	return e.Bytes
}

// Preconditions guard an update or a delete.
type Preconditions struct {
	// Revision, when > 0, must be the object's current revision.
	Revision int64
	// UID, when set, must be the object's UID.
	UID string
}

// WriteOptions qualify Create and Update.
type WriteOptions struct {
	// TTL is how long the object lives after this write; <= 0 means the
	// store's default. Backends on etcd count it on etcd's wall clock
	// (leases), not on an injected clock: their conformance harness sets
	// storagetest.Harness.WallClockTTL.
	TTL time.Duration
	// Precondition guards Update.
	Precondition Preconditions
	// CreateIfMissing lets Update create the object (PUT semantics).
	CreateIfMissing bool
}

// WatchOptions select the changes a watch delivers.
type WatchOptions struct {
	Selector
	// Revision: changes after this revision are delivered. 0 means from
	// now on, unless FromOrigin is set.
	Revision int64
	// FromOrigin, with Revision 0, delivers the changes after revision 0:
	// every change since the store's first, as far as its history still
	// has them (ErrCompacted when it no longer has the first). A consumer
	// whose cursor is 0 (it started on an empty store) resumes with it.
	FromOrigin bool
	// SendInitialEvents delivers the current state as ADDED events first,
	// then changes after the revision of that state. With it, Revision > 0
	// is a lower bound on that state's revision: Watch fails with
	// ErrFutureRevision when the store's current state is older.
	SendInitialEvents bool
	// InitialEventsEndBookmark sends a BOOKMARK with InitialEventsEnd set
	// once the initial events are delivered.
	InitialEventsEndBookmark bool
	// ProgressInterval, when > 0, sends a BOOKMARK event carrying the
	// revision the watch has reached whenever this long has passed without
	// any event being sent.
	ProgressInterval time.Duration
}

// Event is one change delivered by a watch.
type Event struct {
	// Type is ADDED, MODIFIED, DELETED or BOOKMARK.
	Type watch.EventType
	// Object is the event's state after the change (for DELETED, its last
	// state); nil for BOOKMARK. Read-only: it is shared between watchers.
	Object *corev1.Event
	// Revision is the revision of the change, or for BOOKMARK the revision
	// the watch has reached.
	Revision int64
	// InitialEventsEnd marks the bookmark that ends the initial events.
	InitialEventsEnd bool
	// Err, when set, ends the watch: ErrCompacted when the watch fell
	// behind the kept history.
	Err error
}

// WriteObserver is told of each create and update a store made, once,
// after it is durable and before the writer is answered: prev is the
// event's state the write replaced (nil for a create, and for an update
// that created the event), cur its new state. Deletions and expiries are
// not reported; nor are writes another process made to a shared backend
// (each eventsd replica on etcd reports its own writes). It runs in the
// writer's goroutine, so it must be fast and safe for concurrent use;
// prev and cur are read-only. Occurrence metrics (eventmetrics) are built
// on it: every writer (the API's handlers, folding, the mirror) reaches
// the store, and the store knows the previous state of every write
// without reading it again.
type WriteObserver func(prev, cur *corev1.Event)

// Watcher is a running watch. Its channel is closed when the watch ends:
// on Stop, when the context is cancelled, when the store closes, or after an
// event carrying Err.
type Watcher interface {
	ResultChan() <-chan Event
	Stop()
}

// Stats are sizes a store reports for metrics.
type Stats struct {
	// Events is the number of stored events.
	Events int64
	// Bytes is the approximate disk (or memory) footprint.
	Bytes int64
	// Expired is the number of events deleted by TTL since start.
	Expired int64
	// OldestRevision is the oldest revision watches can resume from.
	OldestRevision int64
	// Commits is the number of durable commits (fsyncs) since start, and
	// CommittedWrites the writes they carried: their ratio is the mean
	// group-commit size.
	Commits, CommittedWrites int64
}

// ErrInvalidContinue: a continue token could not be decoded.
var ErrInvalidContinue = errors.New("continue key is not valid")

// ContinueExpiredError is returned by List when a continue token's revision
// is no longer kept. Inconsistent is a token that continues the same list
// at the current revision instead; it wraps ErrCompacted.
type ContinueExpiredError struct{ Inconsistent string }

// Error implements error.
func (e *ContinueExpiredError) Error() string { return ErrCompacted.Error() + " (continue)" }

// Unwrap makes errors.Is(err, ErrCompacted) true.
func (e *ContinueExpiredError) Unwrap() error { return ErrCompacted }

// CursorStore is implemented by stores that keep small named revisions
// durably beside the events: the cursors of export sinks, each the last
// revision its sink acknowledged. Cursors are not events: they are not
// listed, watched or counted, and take no revision of their own on the
// embedded store (on etcd they are keys outside the events prefix).
type CursorStore interface {
	// Cursor returns the revision saved under name, and whether one is
	// (a cursor may be 0: a sink created on an empty store).
	Cursor(ctx context.Context, name string) (rev int64, found bool, err error)
	// SaveCursor durably saves rev under name: once it returns nil, a
	// restart, even after kill -9, reads rev back. It fails with
	// ErrUnavailable (or ErrUnreachable) as writes do. On a store that is
	// also an Elector, a ctx descending from a leading context of Lead
	// fences the save on that leadership: if the leadership was lost,
	// even unnoticed yet, it fails with ErrConflict and saves nothing.
	// A name is 1 to 253 bytes without '/'.
	SaveCursor(ctx context.Context, name string, rev int64) error
}

// DefaultMaxHistoryHold is the default hold limit of HistoryHolder stores
// (their MaxHistoryHold option) and so of how far an export sink may lag
// (eventsd's --export-max-lag): a day covers a sink down overnight or over
// an incident, while the disk the held history takes stays bounded by a
// day of writes (and by the store's storage budget).
const DefaultMaxHistoryHold = 24 * time.Hour

// HistoryHolder is implemented by stores whose change history can be held
// back for a consumer that resumes from an older revision than watches
// usually do: the exporter, resuming each sink from its cursor.
//
// A hold overrides the store's usual history bounds (its history window
// and its caps on the number of kept changes, HistoryMaxEvents or
// HistoryMaxRevisions): while a consumer lags, the history it needs is
// bounded only by time (MaxHistoryHold) and by the store's storage
// budget, if it has one.
type HistoryHolder interface {
	// HoldHistory asks the store to keep every change after rev for
	// watches to resume from, beyond its usual history window, but never
	// changes older than the store's hold limit (its MaxHistoryHold
	// option: the changes made more than that long ago may be trimmed
	// whatever the hold). A later call replaces the hold; rev <= 0
	// releases it. It does not block on I/O. A watch from rev itself
	// stays possible: the changes after rev are kept.
	HoldHistory(rev int64)
}

// Elector is implemented by stores that several eventsd replicas share
// (etcd): a task that must run once, not once per replica (export), runs
// only on the replica that leads it.
type Elector interface {
	// Lead blocks until this replica leads name, ctx ends (its error is
	// returned) or the store closes. The returned context ends when the
	// leadership is lost (for instance, when the replica loses etcd for
	// longer than its session TTL) or ctx ends; the caller then stops the
	// task and may call Lead again. release gives the leadership up.
	// The task should use leading (or contexts derived from it) for its
	// SaveCursor calls, which fences them on the leadership.
	Lead(ctx context.Context, name string) (leading context.Context, release func(), err error)
}

// RecordStore is implemented by stores that keep small records of
// eventsd's own beside the events, in named spaces: the ownership lineage
// of the objects events are about (package lineage). Records are not
// events: they are not listed, watched or counted, and take no revision of
// their own on the embedded store (on etcd they are keys outside the
// events prefix, readable by every replica).
type RecordStore interface {
	// Records calls fn with every record of space, in key order, as of
	// one moment; fn's value is only valid during the call. An error of
	// fn ends the scan and is returned.
	Records(ctx context.Context, space string, fn func(key string, value []byte) error) error
	// SaveRecords durably applies writes to space, all or none: a write
	// with a nil Value deletes its key (deleting a missing key is not an
	// error). Once it returns nil, a restart, even after kill -9, reads
	// them back. It fails with ErrUnavailable (or ErrUnreachable) as event
	// writes do. A space is 1 to 127 bytes of [a-z0-9.-]; a key is 1 to 253
	// bytes without '/', written at most once per call
	// (CheckRecordWrites): otherwise it fails with an error wrapping
	// ErrInvalidRecord and writes nothing. On etcd, all or none holds per
	// transaction of at most 128 writes and 1 MiB (etcd's limits; see
	// etcdstore's SaveRecords): a call of more that fails may leave its
	// first transactions applied, which writing them again repeats
	// harmlessly.
	SaveRecords(ctx context.Context, space string, writes []RecordWrite) error
}

// RecordWrite is one write of RecordStore.SaveRecords.
type RecordWrite struct {
	// Key names the record within its space.
	Key string
	// Value is the record; nil deletes it.
	Value []byte
}
