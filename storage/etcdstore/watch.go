package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kubevents/kubevents/storage"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// watchBuffer is how many events a watcher holds for a slow reader; beyond
// it the watcher waits, and falls back to a watch of its own once the
// store's ring of recent changes has moved past it.
const watchBuffer = 100

// catchUpMetadataKey is the gRPC metadata key that gives each catch-up
// watch a stream of its own.
const catchUpMetadataKey = "kubevents-catch-up-watch"

// watcher is one storage.Watcher.
type watcher struct {
	out    chan storage.Event
	cancel context.CancelFunc
}

// ResultChan implements storage.Watcher.
func (w *watcher) ResultChan() <-chan storage.Event { return w.out }

// Stop implements storage.Watcher.
func (w *watcher) Stop() { w.cancel() }

// Watch implements storage.Interface. Watchers share the store's one etcd
// watch on the prefix (WithRev, WithPrevKV, WithPrefix,
// WithProgressNotify) through a ring of its recent changes, decoded once;
// a watcher that starts before the ring, or falls behind it, reads etcd
// with a watch of its own (the same options from its next revision) until
// it is back within the ring. Selectors are evaluated on the decoded
// objects, with kube-apiserver's transitions: a change that moves an
// object out of the selection is DELETED (carrying the last state that
// matched), into it ADDED. Progress bookmarks come from etcd's progress
// notifications, requested when ProgressInterval passed without an event.
// A compacted start revision gives an event carrying ErrCompacted.
//
// While etcd is unavailable, a watch that needs to read it to start (from
// the current revision, or with initial events) fails with
// storage.ErrUnreachable; open watches keep waiting, as kube-apiserver's
// do through the etcd client's reconnects, and once etcd returns they go
// on from where they were, catching up from etcd's history (ErrCompacted
// if it was compacted meanwhile).
func (s *Store) Watch(ctx context.Context, opts storage.WatchOptions) (storage.Watcher, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	prefix, ok := s.scope(opts.Selector)
	if !ok {
		prefix = s.root + "\x00none/" // nothing can match
	}
	ctx, cancel := context.WithCancel(ctx)
	var initial *storage.ListResult
	var compacted error // set when etcd has compacted past start
	start := opts.Revision
	switch {
	case opts.SendInitialEvents:
		// The first page here, so that an unreachable etcd or a future
		// revision fails the watch; the others as the watcher's client
		// takes them, so that a watch holds one page, not the whole
		// state (and an indexed selector reads only what it selects).
		res, err := s.List(ctx, storage.ListOptions{Selector: opts.Selector, Limit: initialPage})
		if err != nil {
			cancel()
			return nil, err
		}
		if opts.Revision > res.Revision {
			cancel()
			return nil, fmt.Errorf("initial events at revision %d, current %d: %w", opts.Revision, res.Revision, storage.ErrFutureRevision)
		}
		initial, start = res, res.Revision
	case start == 0 && !opts.FromOrigin:
		// The current revision, from a read of one key: a count of the
		// prefix would visit every stored key for each watch.
		rev, err := s.currentRevision(ctx)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("etcdstore: watch: %w", err)
		}
		start = rev
	default:
		// The store's ring may still hold changes etcd has compacted
		// away (another replica or a kube-apiserver compacted): ask etcd,
		// so that a watch from a compacted revision fails on every
		// replica alike, as an etcd watch from it would.
		if err := s.checkWatchable(ctx, start); err != nil {
			if !errors.Is(err, storage.ErrCompacted) {
				cancel()
				return nil, err
			}
			compacted = err
		}
	}
	var ticker clock.Ticker
	if opts.ProgressInterval > 0 {
		ticker = s.opts.Clock.NewTicker(opts.ProgressInterval)
	}
	w := &watcher{out: make(chan storage.Event, watchBuffer), cancel: cancel}
	r := &watchRun{s: s, ctx: ctx, w: w, opts: opts, prefix: prefix, pos: start, compacted: compacted}
	if ticker != nil {
		r.tick = ticker.C()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(w.out)
		defer cancel()
		if ticker != nil {
			defer ticker.Stop()
		}
		r.run(initial)
	}()
	return w, nil
}

// watchRun is the state of one watcher's goroutine.
type watchRun struct {
	s      *Store
	ctx    context.Context
	w      *watcher
	opts   storage.WatchOptions
	prefix string
	tick   <-chan time.Time // nil without ProgressInterval
	// compacted, when set, is the error the watch ends with at once:
	// etcd has compacted past its start revision.
	compacted error
	pos       int64 // every change up to pos has been handled
	sent      bool  // an event was sent since the last tick
	// bookmarkAfter, when >= 0, asks for a bookmark once the hub has
	// received more progress notifications than this.
	bookmarkAfter int64
}

func (r *watchRun) send(e storage.Event) bool {
	select {
	case r.w.out <- e:
		r.sent = true
		return true
	case <-r.ctx.Done():
	case <-r.s.ctx.Done():
	}
	return false
}

// initialPage is how many initial events a watcher reads from etcd at a
// time: the memory a watch sending its initial state holds.
const initialPage = 256

// sendInitial sends the state of the first page and of those after it,
// read at the first's revision.
func (r *watchRun) sendInitial(page *storage.ListResult) bool {
	for {
		for _, ev := range page.Items {
			rev, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
			if !r.send(storage.Event{Type: watch.Added, Object: ev, Revision: rev}) {
				return false
			}
		}
		if page.Continue == "" {
			return true
		}
		var err error
		page, err = r.s.List(r.ctx, storage.ListOptions{Selector: r.opts.Selector, Limit: initialPage, Continue: page.Continue})
		if err != nil {
			// Compacted meanwhile (ContinueExpiredError wraps
			// ErrCompacted): the client lists again.
			r.send(storage.Event{Err: fmt.Errorf("etcdstore: initial events at revision %d: %w", r.pos, err)})
			return false
		}
	}
}

func (r *watchRun) run(initial *storage.ListResult) {
	if initial != nil && !r.sendInitial(initial) {
		return
	}
	if r.opts.SendInitialEvents && r.opts.InitialEventsEndBookmark {
		if !r.send(storage.Event{Type: watch.Bookmark, Revision: r.pos, InitialEventsEnd: true}) {
			return
		}
	}
	if r.compacted != nil {
		r.send(storage.Event{Err: r.compacted})
		return
	}
	if oldest := r.s.oldest.Load(); r.pos+1 < oldest {
		r.send(storage.Event{Err: fmt.Errorf("watch from revision %d, compacted at %d: %w", r.pos, oldest, storage.ErrCompacted)})
		return
	}
	r.bookmarkAfter = -1
	for {
		v := r.s.hub.after(r.pos)
		if !v.ok {
			if !r.catchUp() {
				return
			}
			continue
		}
		for _, c := range v.changes {
			// The selector checks the namespace: no prefix test needed.
			if e, ok := selectChange(c, r.opts.Selector); ok && !r.send(e) {
				return
			}
			r.pos = c.rev
		}
		if v.covered > r.pos {
			r.pos = v.covered
		}
		if r.bookmarkAfter >= 0 && v.progress > r.bookmarkAfter {
			r.bookmarkAfter = -1
			if !r.send(storage.Event{Type: watch.Bookmark, Revision: r.pos}) {
				return
			}
		}
		if len(v.changes) > 0 {
			continue
		}
		select {
		case <-v.wake:
		case <-r.ctx.Done():
			return
		case <-r.s.ctx.Done():
			return
		case <-r.tick:
			// etcd drops a progress request while a watch on the stream
			// is unsynced: ask again at every tick until it is answered.
			if !r.sent || r.bookmarkAfter >= 0 {
				if r.bookmarkAfter < 0 {
					r.bookmarkAfter = v.progress
				}
				r.requestProgress(r.s.hubCtx)
			}
			r.sent = false
		}
	}
}

// checkWatchable asks etcd whether a watch from after rev can start: a
// read at rev+1 fails with ErrCompacted exactly when an etcd watch from
// rev+1 would. A revision etcd has not reached yet (a future one) is
// fine: its changes come when they are written.
func (s *Store) checkWatchable(ctx context.Context, rev int64) error {
	resp, err := s.cli.Get(ctx, s.root, clientv3.WithRev(rev+1), clientv3.WithCountOnly())
	switch {
	case err == nil:
		s.observe(resp.Header.Revision)
		return nil
	case errors.Is(err, rpctypes.ErrFutureRev):
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("watch from revision %d: %w", rev, mapErr(err))
	}
	return fmt.Errorf("etcdstore: watch: %w", mapErr(err))
}

func (r *watchRun) requestProgress(ctx context.Context) {
	if err := r.s.cli.RequestProgress(ctx); err != nil && r.ctx.Err() == nil {
		r.s.log.Debug("etcdstore: watch progress request failed", "err", err)
	}
}

// catchUp follows etcd with a watch of its own from pos until pos is
// within the hub's ring again. It returns false when the watcher ended.
func (r *watchRun) catchUp() bool {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	// Its own metadata puts this watch on a gRPC stream of its own: etcd
	// answers a progress request only once every watch on the stream is
	// synced, and this one is catching up.
	wctx := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx),
		catchUpMetadataKey, strconv.FormatInt(r.s.catchUps.Add(1), 10))
	wch := r.s.cli.Watch(wctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(r.pos+1),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	for {
		select {
		case <-r.ctx.Done():
			return false
		case <-r.s.ctx.Done():
			return false
		case <-r.tick:
			if !r.sent {
				r.requestProgress(wctx)
			}
			r.sent = false
		case resp, ok := <-wch:
			if !ok {
				if r.ctx.Err() == nil && r.s.ctx.Err() == nil {
					r.send(storage.Event{Err: errors.New("etcdstore: etcd watch ended")})
				}
				return false
			}
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				r.send(storage.Event{Err: fmt.Errorf("watch from revision %d, compacted at %d: %w", r.pos, resp.CompactRevision, storage.ErrCompacted)})
				return false
			}
			if err := resp.Err(); err != nil {
				r.send(storage.Event{Err: fmt.Errorf("etcdstore: watch: %w", r.s.unavailable(r.ctx, err))})
				return false
			}
			if resp.IsProgressNotify() {
				if rev := resp.Header.Revision; rev >= r.pos {
					r.pos = rev
					if r.opts.ProgressInterval > 0 && !r.send(storage.Event{Type: watch.Bookmark, Revision: rev}) {
						return false
					}
				}
			}
			for _, e := range resp.Events {
				if ev, ok := selectChange(r.s.decodeChange(e), r.opts.Selector); ok && !r.send(ev) {
					return false
				}
				r.pos = e.Kv.ModRevision
			}
			if r.s.hub.after(r.pos).ok {
				return true
			}
		}
	}
}

// selectChange turns a change into the watch event a watcher with sel
// sees, if any.
func selectChange(c change, sel storage.Selector) (storage.Event, bool) {
	prev := c.prev
	if prev != nil && !sel.Matches(prev) {
		prev = nil
	}
	if c.delete {
		if prev == nil {
			return storage.Event{}, false
		}
		return storage.Event{Type: watch.Deleted, Object: prev, Revision: c.rev}, true
	}
	if c.cur == nil {
		return storage.Event{}, false
	}
	switch matches := sel.Matches(c.cur); {
	case matches && prev != nil && !c.create:
		return storage.Event{Type: watch.Modified, Object: c.cur, Revision: c.rev}, true
	case matches:
		return storage.Event{Type: watch.Added, Object: c.cur, Revision: c.rev}, true
	case prev != nil && !c.create:
		return storage.Event{Type: watch.Deleted, Object: prev, Revision: c.rev}, true
	}
	return storage.Event{}, false
}
