package export

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// logInterval spaces the repeated warnings of one sink (failing sends,
// failing cursor saves): a sink down for an hour logs a line a minute,
// with the count of the ones held back.
const logInterval = time.Minute

// sinkRunner exports to one sink: it watches the store from the sink's
// cursor, batches the changes the filter selects, sends them, and moves
// the cursor once the sink acknowledged.
type sinkRunner struct {
	e    *Exporter
	spec SinkSpec
	log  *slog.Logger
	m    *sinkMetrics

	// acked is the sink's cursor: every change up to it was delivered
	// (or filtered out) and the cursor is saved.
	acked    atomic.Int64
	lastSave time.Time
	sendLog  *ratelog.Limiter
	saveLog  *ratelog.Limiter
}

// batcher is the batch being built: records, and the revision consumed
// from the watch (every change up to it is in the batch or filtered out).
type batcher struct {
	records  []Record
	consumed int64
	timer    clock.Timer
}

// timerC is the channel of the batch's wait, nil when none runs.
func (b *batcher) timerC() <-chan time.Time {
	if b.timer == nil {
		return nil
	}
	return b.timer.C()
}

func (b *batcher) stopTimer() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

// run exports until ctx ends.
func (r *sinkRunner) run(ctx context.Context) {
	clk := r.e.opts.Clock
	r.sendLog = ratelog.New(clk, logInterval)
	r.saveLog = ratelog.New(clk, logInterval)
	cursor, ok := r.loadCursor(ctx)
	if !ok {
		return
	}
	r.acked.Store(cursor)
	r.lastSave = clk.Now()
	r.e.holdHistory()
	b := &batcher{consumed: cursor}
	defer b.stopTimer()
	for attempt := 1; ctx.Err() == nil; {
		w, err := r.e.opts.Store.Watch(ctx, storage.WatchOptions{Revision: b.consumed, FromOrigin: true, ProgressInterval: progressInterval})
		if err != nil {
			if errors.Is(err, storage.ErrCompacted) {
				if !r.flush(ctx, b) || !r.lose(ctx, b) {
					return
				}
				continue
			}
			if ctx.Err() != nil {
				return
			}
			r.warn(r.sendLog, "export: cannot watch the store; trying again", "err", err)
			if !r.e.sleep(ctx, r.e.backoff(attempt, nil)) {
				return
			}
			attempt++
			continue
		}
		attempt = 1
		ok := r.consume(ctx, w, b)
		w.Stop()
		if !ok {
			return
		}
	}
}

// consume reads w into batches until the watch ends (true: watch again
// from b.consumed) or ctx does (false).
func (r *sinkRunner) consume(ctx context.Context, w storage.Watcher, b *batcher) bool {
	clk := r.e.opts.Clock
	for {
		select {
		case <-ctx.Done():
			return false
		case <-b.timerC():
			if !r.flush(ctx, b) {
				return false
			}
		case ev, open := <-w.ResultChan():
			if !open {
				return true
			}
			if ev.Err != nil {
				if errors.Is(ev.Err, storage.ErrCompacted) {
					return r.flush(ctx, b) && r.lose(ctx, b)
				}
				r.warn(r.sendLog, "export: the store's watch ended; watching again", "err", ev.Err)
				return true
			}
			// A change at or before b.consumed was consumed before a
			// re-watch; a bookmark there still lets the cursor be saved.
			if ev.Revision > b.consumed {
				b.consumed = ev.Revision
				if rec, ok := recordOf(ev); ok && r.spec.Filter.Matches(rec.Type, rec.Cluster, rec.Event) {
					b.records = append(b.records, rec)
					if len(b.records) == 1 {
						b.timer = clk.NewTimer(r.spec.MaxWait)
					}
					if len(b.records) >= r.spec.MaxBatch && !r.flush(ctx, b) {
						return false
					}
				}
			}
			if len(b.records) == 0 && b.consumed > r.acked.Load() && clk.Since(r.lastSave) >= r.e.opts.CursorInterval {
				// Only filtered-out changes or bookmarks since the last
				// save: move the cursor past them, so that a restart does
				// not read them again and the history behind can go.
				r.saveCursor(ctx, b.consumed, false)
			}
		}
	}
}

// flush sends the batch until the sink acknowledges it (or, refused
// rejectedAttempts times, drops it), then saves the cursor. False when
// ctx ended first: the batch is then sent again by whoever exports next,
// from the saved cursor.
func (r *sinkRunner) flush(ctx context.Context, b *batcher) bool {
	b.stopTimer()
	if len(b.records) == 0 {
		return true
	}
	batch := b.records
	rejected := 0
	for attempt := 1; ; attempt++ {
		err := r.spec.Sink.Send(ctx, batch)
		if err == nil {
			r.m.exported.Add(float64(len(batch)))
			break
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, ErrRejected) {
			if rejected++; rejected >= rejectedAttempts {
				r.m.lostRejected.Add(float64(len(batch)))
				r.log.Error("export: the sink's destination refused a batch; dropped it",
					"records", len(batch), "attempts", rejected, "fromKey", batch[0].Key, "toKey", batch[len(batch)-1].Key, "err", err)
				break
			}
		}
		r.m.retries.Inc()
		d := r.e.backoff(attempt, err)
		r.warn(r.sendLog, "export: sending a batch failed; sending it again", "records", len(batch), "attempt", attempt, "retryIn", d, "err", err)
		if !r.e.sleep(ctx, d) {
			return false
		}
	}
	b.records = make([]Record, 0, len(batch))
	return r.saveCursor(ctx, b.consumed, true)
}

// lose moves the cursor to the oldest revision the store still has, after
// a watch from it was refused as compacted: the changes in between are
// lost to the sink, counted (in revisions) and logged.
func (r *sinkRunner) lose(ctx context.Context, b *batcher) bool {
	from := b.consumed
	// A watch from OldestRevision works on both backends (it delivers the
	// changes after it); a store whose whole log went may report one past
	// its current revision.
	to := min(r.e.opts.Store.Stats().OldestRevision, r.e.opts.Store.Revision())
	if to <= from {
		// The store's idea of its oldest revision lags the refusal (etcd
		// compacted by another client): go on from its current one.
		to = r.e.opts.Store.Revision()
	}
	if to <= from {
		return r.e.sleep(ctx, r.e.backoff(1, nil))
	}
	r.m.lostHistory.Add(float64(to - from))
	r.log.Error("export: changes lost: the store's history no longer reaches back to the sink's cursor; resuming at the oldest kept revision",
		"cursor", from, "resumeAt", to, "lostRevisions", to-from)
	b.consumed = to
	return r.saveCursor(ctx, to, true)
}

// loadCursor reads the sink's cursor; a sink without one starts at the
// store's current revision (a new sink gets changes from now on) and saves
// it.
func (r *sinkRunner) loadCursor(ctx context.Context) (int64, bool) {
	for attempt := 1; ; attempt++ {
		c, found, err := r.e.opts.Store.Cursor(ctx, r.spec.Name)
		if err == nil {
			if found {
				r.log.Info("export: resuming the sink at its cursor", "cursor", c, "storeRevision", r.e.opts.Store.Revision())
				return c, true
			}
			c = r.e.opts.Store.Revision()
			if !r.saveCursor(ctx, c, true) {
				return 0, false
			}
			r.log.Info("export: new sink: exporting changes after the store's current revision", "revision", c)
			return c, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		r.warn(r.saveLog, "export: cannot read the sink's cursor; trying again", "err", err)
		if !r.e.sleep(ctx, r.e.backoff(attempt, nil)) {
			return 0, false
		}
	}
}

// saveCursor saves rev as the sink's cursor. With mustSave it tries until
// it succeeds or ctx ends (false); otherwise one failed attempt is left
// for a later save.
func (r *sinkRunner) saveCursor(ctx context.Context, rev int64, mustSave bool) bool {
	for attempt := 1; ; attempt++ {
		err := r.e.opts.Store.SaveCursor(ctx, r.spec.Name, rev)
		if err == nil {
			r.acked.Store(rev)
			r.lastSave = r.e.opts.Clock.Now()
			r.e.holdHistory()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		r.warn(r.saveLog, "export: cannot save the sink's cursor", "revision", rev, "err", err)
		if !mustSave {
			r.lastSave = r.e.opts.Clock.Now()
			return true
		}
		if !r.e.sleep(ctx, r.e.backoff(attempt, nil)) {
			return false
		}
	}
}

// warn logs at most once per logInterval per limiter, with the count of
// the lines held back.
func (r *sinkRunner) warn(l *ratelog.Limiter, msg string, args ...any) {
	if ok, suppressed := l.Allow(); ok {
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
		r.log.Warn(msg, args...)
	}
}

// recordOf returns the record of a change the store's watch delivered;
// false for what is no change (a bookmark). It is the one place events enter the exporter: a fleet's events are
// stored under storage namespaces ("~east~shop", storage.ClusterNamespace),
// and are split here into their cluster and real namespace, so that
// filters and sinks only ever see real namespaces.
func recordOf(ev storage.Event) (Record, bool) {
	if !isChange(ev.Type) || ev.Object == nil {
		return Record{}, false
	}
	cluster, ns := storage.SplitClusterNamespace(ev.Object.Namespace)
	return Record{Key: KeyOf(ev.Object, ev.Revision), Type: ev.Type, Revision: ev.Revision, Cluster: cluster, Event: exported(ev.Object, ns)}, true
}

// exported returns ev with namespace ns, apiVersion v1 and kind Event,
// copying it (shallowly: nothing below is changed) only when it differs,
// since stored objects are read-only.
func exported(ev *corev1.Event, ns string) *corev1.Event {
	if ev.APIVersion == "v1" && ev.Kind == "Event" && ev.Namespace == ns {
		return ev
	}
	c := *ev
	c.APIVersion, c.Kind, c.Namespace = "v1", "Event", ns
	return &c
}
