package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// entry is one change: the object after it and, for MODIFIED, before it.
// Objects are shared read-only between watchers.
type entry struct {
	rev  int64
	typ  watch.EventType
	obj  *corev1.Event
	prev *corev1.Event
	// sameSelection: a MODIFIED whose previous state was not logged
	// because every selector treats it like obj.
	sameSelection bool
	// skip, when set, is the "<ns>/<name>" of a create read back from a
	// log written before creates were materialized on overwrite, whose
	// object has changed since; the entry carries no object.
	skip string
	// size is the memory the entry holds for the ring's byte budget: see
	// entrySize.
	size int64
}

// decodedOverhead approximates the memory of a decoded Event beyond its
// protobuf bytes: the struct with its nested metadata, references and
// string headers.
const decodedOverhead = 1 << 10

// entrySize is the memory an entry holding objects whose protobuf sizes
// are given keeps alive: the bytes, which in a decoded Event are mostly
// its strings, plus decodedOverhead per object.
func entrySize(protoSizes ...int) int64 {
	n := int64(0)
	for _, p := range protoSizes {
		n += int64(p) + decodedOverhead
	}
	return n
}

// hub keeps the most recent changes in a ring, in revision order with no
// gaps (every revision is one change), and wakes watchers when more arrive.
// The ring holds at most len(ring) changes and maxBytes of their objects
// (by entry.size); older ones are dropped, and watchers that need them read
// the on-disk log. Writers never wait for watchers.
type hub struct {
	mu       sync.RWMutex
	ring     []entry
	maxBytes int64
	bytes    int64 // sum of the size of the changes in the ring
	lastRev  int64 // revision of the newest change
	n        int   // changes in the ring
	notify   chan struct{}
}

func newHub(size int, maxBytes int64, rev int64) *hub {
	return &hub{ring: make([]entry, size), maxBytes: maxBytes, lastRev: rev, notify: make(chan struct{})}
}

// dropOldestLocked removes the oldest change from the ring, releasing its
// objects.
func (h *hub) dropOldestLocked() {
	slot := &h.ring[(h.lastRev-int64(h.n)+1)%int64(len(h.ring))]
	h.bytes -= slot.size
	*slot = entry{}
	h.n--
}

func (h *hub) append(es []entry) {
	h.mu.Lock()
	for _, e := range es {
		if h.n == len(h.ring) {
			h.dropOldestLocked() // the slot e takes
		}
		h.ring[e.rev%int64(len(h.ring))] = e
		h.lastRev = e.rev
		h.n++
		h.bytes += e.size
		for h.n > 0 && h.bytes > h.maxBytes {
			h.dropOldestLocked()
		}
	}
	close(h.notify)
	h.notify = make(chan struct{})
	h.mu.Unlock()
}

// usage reports the changes and bytes the ring holds.
func (h *hub) usage() (n int, bytes int64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.n, h.bytes
}

// since copies up to max changes from revision from on. inRing is false if
// from is older than the ring holds; wake is closed when newer changes are
// appended.
func (h *hub) since(from int64, max int, buf []entry) (out []entry, inRing bool, wake <-chan struct{}) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	first := h.lastRev - int64(h.n) + 1
	if from < first {
		return buf, false, h.notify
	}
	for r := from; r <= h.lastRev && len(buf) < max; r++ {
		buf = append(buf, h.ring[r%int64(len(h.ring))])
	}
	return buf, true, h.notify
}

// readLog reads up to max changes from revision from on out of the on-disk
// change log, as far as the newest durable view goes.
func (s *Store) readLog(from int64, max int, buf []entry) ([]entry, error) {
	if from < s.oldestRev.Load() {
		return buf, fmt.Errorf("revision %d: %w", from-1, storage.ErrCompacted)
	}
	v, err := s.acquire()
	if err != nil {
		return buf, err
	}
	defer s.release(v)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: logKey(from), UpperBound: logKey(v.rev + 1)})
	if err != nil {
		return buf, err
	}
	defer it.Close()
	resolve := func(sfx []byte) (*corev1.Event, int64, error) {
		val, closer, err := v.snap.Get(append([]byte{prefixObject}, sfx...))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		defer closer.Close()
		return decodeObject(val)
	}
	want := from
	for ok := it.First(); ok && len(buf) < max; ok = it.Next() {
		rev := revOfLogKey(it.Key())
		if rev != want {
			// The log was trimmed past from while we looked.
			return buf, fmt.Errorf("revision %d: %w", want-1, storage.ErrCompacted)
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return buf, err
		}
		e, err := decodeLog(rev, val, resolve)
		if err != nil {
			return buf, err
		}
		buf = append(buf, e)
		want++
	}
	if len(buf) == 0 && want <= v.rev {
		return buf, fmt.Errorf("revision %d: %w", want-1, storage.ErrCompacted)
	}
	return buf, it.Error()
}

func revOfLogKey(k []byte) int64 {
	var r int64
	for _, b := range k[1:9] {
		r = r<<8 | int64(b)
	}
	return r
}

// watcher delivers one watch's events.
type watcher struct {
	s    *Store
	opts storage.WatchOptions
	out  chan storage.Event
	stop chan struct{}
	once sync.Once
	ctx  context.Context
	next int64 // next revision to look at
	// skipped holds objects whose creation was read back from a log
	// written by an older version after they had changed: their next
	// change is delivered as ADDED (the first state this watch sees of
	// them), or dropped if it is their deletion. Only watches catching up
	// from such a log ever use it.
	skipped map[string]bool
}

// watchBuffer is the channel depth between a watcher and its consumer.
const watchBuffer = 128

// Watch implements storage.Interface.
func (s *Store) Watch(ctx context.Context, opts storage.WatchOptions) (storage.Watcher, error) {
	w := &watcher{s: s, opts: opts, out: make(chan storage.Event, watchBuffer), stop: make(chan struct{}), ctx: ctx}
	var initial *view
	switch {
	case opts.SendInitialEvents:
		v, err := s.acquire()
		if err != nil {
			return nil, err
		}
		if opts.Revision > v.rev {
			s.release(v)
			return nil, fmt.Errorf("initial events at revision %d, current %d: %w", opts.Revision, v.rev, storage.ErrFutureRevision)
		}
		initial, w.next = v, v.rev+1
	case opts.Revision > 0 || opts.FromOrigin:
		if opts.Revision+1 < s.oldestRev.Load() {
			return nil, fmt.Errorf("revision %d: %w", opts.Revision, storage.ErrCompacted)
		}
		w.next = opts.Revision + 1
	default:
		w.next = s.Revision() + 1
	}
	s.submitMu.RLock()
	defer s.submitMu.RUnlock()
	if s.stopped {
		if initial != nil {
			s.release(initial)
		}
		return nil, storage.ErrClosed
	}
	s.wg.Add(1)
	go w.run(initial)
	return w, nil
}

// ResultChan implements storage.Watcher.
func (w *watcher) ResultChan() <-chan storage.Event { return w.out }

// Stop implements storage.Watcher.
func (w *watcher) Stop() { w.once.Do(func() { close(w.stop) }) }

// send delivers e unless the watch is ending.
func (w *watcher) send(e storage.Event) bool {
	select {
	case w.out <- e:
		return true
	case <-w.stop:
	case <-w.ctx.Done():
	case <-w.s.closing:
	}
	return false
}

func (w *watcher) run(initial *view) {
	defer w.s.wg.Done()
	defer close(w.out)
	if initial != nil {
		ok := w.sendInitial(initial)
		w.s.release(initial)
		if !ok {
			return
		}
	}
	var progress <-chan time.Time
	resetProgress := func() {}
	if w.opts.ProgressInterval > 0 {
		t := w.s.clock.NewTimer(w.opts.ProgressInterval)
		defer t.Stop()
		progress = t.C()
		resetProgress = func() {
			if !t.Stop() {
				select {
				case <-t.C():
				default:
				}
			}
			t.Reset(w.opts.ProgressInterval)
		}
	}
	buf := make([]entry, 0, 256)
	for {
		batch, inRing, wake := w.s.hub.since(w.next, cap(buf), buf[:0])
		if !inRing {
			var err error
			batch, err = w.s.readLog(w.next, cap(buf), buf[:0])
			if err != nil {
				w.send(storage.Event{Err: err})
				return
			}
		}
		for _, e := range batch {
			w.next = e.rev + 1
			if !w.coalesce(&e) {
				continue
			}
			if ev, ok := w.filter(e); ok {
				if !w.send(ev) {
					return
				}
				resetProgress()
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-wake:
		case <-progress:
			if !w.send(storage.Event{Type: watch.Bookmark, Revision: w.next - 1}) {
				return
			}
			resetProgress()
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		case <-w.s.closing:
			return
		}
	}
}

func (w *watcher) sendInitial(v *view) bool {
	var after string
	for {
		items, last, more, err := w.s.scan(w.ctx, v, w.opts.Selector, after, 256, nil)
		if err != nil {
			w.send(storage.Event{Err: err})
			return false
		}
		for _, ev := range items {
			rev := w.s.revisionOf(ev)
			if !w.send(storage.Event{Type: watch.Added, Object: ev, Revision: rev}) {
				return false
			}
		}
		if !more {
			break
		}
		after = last
	}
	if w.opts.InitialEventsEndBookmark {
		return w.send(storage.Event{Type: watch.Bookmark, Revision: v.rev, InitialEventsEnd: true})
	}
	return true
}

func (s *Store) revisionOf(ev *corev1.Event) int64 {
	r, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
	return r
}

// coalesce applies the bookkeeping of skipped creations to e and reports
// whether e is still to be delivered.
func (w *watcher) coalesce(e *entry) bool {
	if e.skip != "" {
		if w.skipped == nil {
			w.skipped = map[string]bool{}
		}
		w.skipped[e.skip] = true
		return false
	}
	if len(w.skipped) == 0 {
		return true
	}
	key := e.obj.Namespace + "/" + e.obj.Name
	if !w.skipped[key] {
		return true
	}
	delete(w.skipped, key)
	switch e.typ {
	case watch.Modified:
		e.typ, e.prev, e.sameSelection = watch.Added, nil, false
		return true
	case watch.Deleted:
		return false // created and deleted while this watch was away
	}
	return true
}

// filter turns a change into what this watch sees: a change that moves an
// object into the selection is ADDED, out of it DELETED (carrying the old
// state at the new revision), as kube-apiserver's etcd watcher does.
func (w *watcher) filter(e entry) (storage.Event, bool) {
	sel := w.opts.Selector
	cur := sel.Matches(e.obj)
	switch e.typ {
	case watch.Modified:
		var old bool
		switch {
		case e.prev != nil:
			old = sel.Matches(e.prev)
		case e.sameSelection && sel.Predicate != nil:
			// The log kept no previous state (the indexed fields did
			// not change) but a predicate may depend on what did: the
			// event may have left the selection, so a non-matching
			// state is a DELETED (a no-op for a watcher without it)
			// rather than dropped.
			if !cur {
				return storage.Event{Type: watch.Deleted, Object: e.obj, Revision: e.rev}, true
			}
			old = true
		case e.sameSelection:
			old = cur
		}
		switch {
		case cur && old:
			return storage.Event{Type: watch.Modified, Object: e.obj, Revision: e.rev}, true
		case cur:
			return storage.Event{Type: watch.Added, Object: e.obj, Revision: e.rev}, true
		case old:
			return storage.Event{Type: watch.Deleted, Object: withRevision(e.prev, e.rev), Revision: e.rev}, true
		}
		return storage.Event{}, false
	default:
		return storage.Event{Type: e.typ, Object: e.obj, Revision: e.rev}, cur
	}
}
