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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// watchBuffer is how many events a watcher holds for a slow reader; beyond
// it the watch waits (etcd's client buffers the stream meanwhile).
const watchBuffer = 100

// watcher is one storage.Watcher over one etcd watch.
type watcher struct {
	out    chan storage.Event
	cancel context.CancelFunc
}

// ResultChan implements storage.Watcher.
func (w *watcher) ResultChan() <-chan storage.Event { return w.out }

// Stop implements storage.Watcher.
func (w *watcher) Stop() { w.cancel() }

// Watch implements storage.Interface with one etcd watch per call:
// WithRev(rev+1), WithPrevKV, WithPrefix (the namespace's, when the
// selector names one), WithProgressNotify. Selectors are evaluated on the
// decoded objects, with kube-apiserver's transitions: a change that moves
// an object out of the selection is DELETED (carrying the last state that
// matched), into it ADDED. Progress bookmarks come from etcd's progress
// notifications, requested when ProgressInterval passed without an event.
// A compacted start revision gives an event carrying ErrCompacted.
func (s *Store) Watch(ctx context.Context, opts storage.WatchOptions) (storage.Watcher, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	prefix, ok := s.scope(opts.Selector)
	if !ok {
		prefix = s.root + "\x00none/" // nothing can match; still a live watch
	}
	ctx, cancel := context.WithCancel(ctx)
	var initial []*corev1.Event
	start := opts.Revision
	switch {
	case opts.SendInitialEvents:
		res, err := s.scan(ctx, prefix, prefix, 0, opts.Selector, 0)
		if err != nil {
			cancel()
			return nil, err
		}
		initial, start = res.Items, res.Revision
	case start == 0:
		resp, err := s.cli.Get(ctx, s.root, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			cancel()
			return nil, fmt.Errorf("etcdstore: watch: %w", mapErr(err))
		}
		s.observe(resp.Header.Revision)
		start = resp.Header.Revision
	}
	// One context for the watch and its progress requests: etcd's client
	// multiplexes watches with the same metadata on one stream, and a
	// progress request goes to that stream.
	wctx := clientv3.WithRequireLeader(ctx)
	wch := s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(start+1),
		clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	var ticker clock.Ticker
	if opts.ProgressInterval > 0 {
		ticker = s.opts.Clock.NewTicker(opts.ProgressInterval)
	}
	w := &watcher{out: make(chan storage.Event, watchBuffer), cancel: cancel}
	s.wg.Add(1)
	go s.runWatch(ctx, wctx, w, wch, ticker, opts, initial, start)
	return w, nil
}

func (s *Store) runWatch(ctx, wctx context.Context, w *watcher, wch clientv3.WatchChan, ticker clock.Ticker,
	opts storage.WatchOptions, initial []*corev1.Event, start int64) {
	defer s.wg.Done()
	defer close(w.out)
	defer w.cancel()
	var tickC <-chan time.Time // never fires without a ticker
	if ticker != nil {
		defer ticker.Stop()
		tickC = ticker.C()
	}
	sent := false // an event was sent since the last tick
	reached := start
	send := func(e storage.Event) bool {
		select {
		case w.out <- e:
			sent = true
			return true
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		return false
	}
	for _, ev := range initial {
		r, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
		if !send(storage.Event{Type: watch.Added, Object: ev, Revision: r}) {
			return
		}
	}
	if opts.SendInitialEvents && opts.InitialEventsEndBookmark {
		if !send(storage.Event{Type: watch.Bookmark, Revision: start, InitialEventsEnd: true}) {
			return
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-tickC:
			if !sent {
				// Answered by a progress notification on wch.
				if err := s.cli.RequestProgress(wctx); err != nil && ctx.Err() == nil {
					s.log.Debug("etcdstore: watch progress request failed", "err", err)
				}
			}
			sent = false
		case resp, ok := <-wch:
			if !ok {
				if ctx.Err() == nil && s.ctx.Err() == nil {
					send(storage.Event{Err: errors.New("etcdstore: etcd watch ended")})
				}
				return
			}
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				send(storage.Event{Err: fmt.Errorf("watch from revision %d, compacted at %d: %w", start, resp.CompactRevision, storage.ErrCompacted)})
				return
			}
			if err := resp.Err(); err != nil {
				send(storage.Event{Err: fmt.Errorf("etcdstore: watch: %w", err)})
				return
			}
			if resp.IsProgressNotify() {
				if rev := resp.Header.Revision; rev >= reached {
					reached = rev
					s.observe(rev)
					if opts.ProgressInterval > 0 && !send(storage.Event{Type: watch.Bookmark, Revision: rev}) {
						return
					}
				}
				continue
			}
			for _, e := range resp.Events {
				reached = e.Kv.ModRevision
				s.observe(reached)
				out, ok := s.translate(e, opts.Selector)
				if ok && !send(out) {
					return
				}
			}
		}
	}
}

// translate turns an etcd event into the watch event a watcher with sel
// sees, if any.
func (s *Store) translate(e *clientv3.Event, sel storage.Selector) (storage.Event, bool) {
	rev := e.Kv.ModRevision
	var prev *corev1.Event
	if e.PrevKv != nil {
		p, err := s.decodeKV(e.PrevKv, rev)
		if err == nil && sel.Matches(p) {
			prev = p
		}
	}
	if e.Type == clientv3.EventTypeDelete {
		if prev == nil {
			return storage.Event{}, false
		}
		return storage.Event{Type: watch.Deleted, Object: prev, Revision: rev}, true
	}
	cur, err := s.decodeKV(e.Kv, rev)
	if err != nil {
		return storage.Event{}, false
	}
	switch matches := sel.Matches(cur); {
	case matches && prev != nil && !e.IsCreate():
		return storage.Event{Type: watch.Modified, Object: cur, Revision: rev}, true
	case matches:
		return storage.Event{Type: watch.Added, Object: cur, Revision: rev}, true
	case prev != nil && !e.IsCreate():
		return storage.Event{Type: watch.Deleted, Object: prev, Revision: rev}, true
	}
	return storage.Event{}, false
}
