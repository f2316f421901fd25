package record

import (
	"container/heap"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/recordermetrics"
	"github.com/kubevents/kubevents/internal/sinkretry"
)

// Write verbs and results, the labels of the writes metric.
const (
	verbCreate    = "create"
	verbPatch     = "patch"
	resultSuccess = "success"
	resultError   = "error"
)

// sinkWorker is one sink's goroutine: it correlates the sink's events in
// order, writes them with retries, and flushes held-back counts.
//
// Held-back occurrences: the spam filter keeps an occurrence from being
// written when its bucket is empty, but the occurrence is already counted
// in its deduplication entry (as in client-go), so the entry's next write
// carries it. When the event keeps recurring, that next write is the next
// occurrence the bucket admits, exactly as in client-go. When it stops
// recurring, client-go never writes the count; here a deferred flush
// writes it one refill interval after the bucket next has a token (so an
// occurrence arriving meanwhile takes that token and carries the count,
// leaving client-go's request sequence unchanged), and Shutdown flushes
// whatever is still pending. Held-back occurrences count as deduplicated,
// not dropped: they reach the server in a count. They count as dropped
// (rate_limited) only if their entry is evicted from the cache before they
// are written.
type sinkWorker struct {
	watcher
	sink    EventSink
	corr    *correlator
	flushes flushQueue
	seq     uint64
	timer   clock.Timer
	timerAt time.Time
	// draining: the worker is finishing (Shutdown or Stop): one attempt
	// per write, no retry waits.
	draining bool
	resumed  map[corev1.EventSource]bool
}

func (w *sinkWorker) run() {
	defer w.exit()
	defer w.release()
	global, own := w.stopping()
	for {
		var timerC <-chan time.Time
		if w.arm() {
			timerC = w.timer.C()
		}
		select {
		case it := <-w.queue:
			w.flushDue()
			w.handle(it)
		case <-timerC:
			w.timer = nil
			w.flushDue()
		case <-global:
			w.drain()
			return
		case <-own:
			w.drain()
			return
		}
	}
}

// arm makes w.timer fire at the earliest deferred flush, running flushes
// that are already due first; it reports whether a timer is set.
func (w *sinkWorker) arm() bool {
	w.flushDue()
	if len(w.flushes) == 0 {
		w.stopTimer()
		return false
	}
	at := w.flushes[0].at
	if w.timer != nil && w.timerAt.Equal(at) {
		return true
	}
	w.stopTimer()
	w.timer, w.timerAt = w.b.clock.NewTimer(at.Sub(w.b.clock.Now())), at
	return true
}

func (w *sinkWorker) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// release gives up the worker's state when it returns.
func (w *sinkWorker) release() {
	w.stopTimer()
	w.b.metrics.ActiveSeries.Sub(float64(w.corr.dedup.len()))
}

func (w *sinkWorker) handle(it item) {
	if it.barrier != nil {
		close(it.barrier)
		return
	}
	if w.b.abandoned() {
		w.b.drop(w.b.logger, recordermetrics.DropShutdown, 1, nil, "Unable to write event (shutdown timed out)", "event", klog.KObj(it.ev))
		return
	}
	if w.b.resume && !w.resumed[it.ev.Source] {
		w.resumed[it.ev.Source] = true
		w.resumeFrom(it.ev.Source)
	}
	ev := *it.ev // the queued event is shared with other watchers
	r := w.corr.correlate(&ev)
	if r.aggregated {
		w.b.metrics.Aggregated.Inc()
	}
	if r.repeat || r.skip {
		w.b.metrics.Deduplicated.Inc()
	}
	if r.skip {
		w.schedule(r.entry, w.corr.nextToken(r.entry.spam, w.b.clock.Now()).Add(w.corr.refillInterval()))
		return
	}
	w.write(r.entry, r.event, r.patch)
}

// evicted is called when the correlator drops a deduplication entry; its
// deferred flush goes too, so the flush queue never holds more than the
// cache.
func (w *sinkWorker) evicted(e *dedupEntry) {
	if e.scheduled {
		heap.Remove(&w.flushes, e.heapIndex)
		e.scheduled = false
	}
	w.b.metrics.ActiveSeries.Dec()
	if n := e.pending(); n > 0 {
		w.b.drop(w.b.logger, recordermetrics.DropRateLimited, int(n), nil,
			"Held-back occurrences lost: their event left the deduplication cache before they were written",
			"event", klog.KRef(e.last.Namespace, e.name))
	}
}

// schedule queues a deferred flush of e at at, unless one is queued.
func (w *sinkWorker) schedule(e *dedupEntry, at time.Time) {
	if e.scheduled {
		return
	}
	e.scheduled = true
	w.seq++
	heap.Push(&w.flushes, &flushItem{at: at, seq: w.seq, e: e})
}

// flushDue writes the held-back counts whose flush is due and whose bucket
// has a token; the others wait for their bucket's next token.
func (w *sinkWorker) flushDue() {
	now := w.b.clock.Now()
	for len(w.flushes) > 0 && !w.flushes[0].at.After(now) {
		e := heap.Pop(&w.flushes).(*flushItem).e
		e.scheduled = false
		if e.evicted || e.pending() <= 0 {
			continue
		}
		if !w.corr.take(e.spam, now) {
			w.schedule(e, w.corr.nextToken(e.spam, now).Add(w.corr.refillInterval()))
			continue
		}
		w.flush(e)
	}
}

// flush writes e's latest occurrence with its current count.
func (w *sinkWorker) flush(e *dedupEntry) {
	ev := *e.last
	ev.Name, ev.ResourceVersion, ev.FirstTimestamp, ev.Count = e.name, e.rv, e.first, e.count
	var patch []byte
	if ev.Count > 1 {
		patch = countPatch(&ev)
	}
	w.write(e, &ev, patch)
}

// drain finishes the worker: it processes what is queued and flushes every
// held-back count, one attempt per write, until the shutdown deadline.
func (w *sinkWorker) drain() {
	w.draining = true
queued:
	for {
		select {
		case it := <-w.queue:
			w.handle(it)
		default:
			break queued
		}
	}
	for len(w.flushes) > 0 {
		e := heap.Pop(&w.flushes).(*flushItem).e
		e.scheduled = false
		if e.evicted || e.pending() <= 0 {
			continue
		}
		if w.b.abandoned() {
			w.giveUp(e, recordermetrics.DropShutdown, nil, "Held-back occurrences not written (shutdown timed out)")
			continue
		}
		w.flush(e)
	}
}

// write writes ev (a Patch when ev.Count > 1, else a Create) with retries,
// and records the outcome in e. ev carries e's count, so a write given up
// on drops exactly e's unwritten occurrences (see giveUp).
func (w *sinkWorker) write(e *dedupEntry, ev *corev1.Event, patch []byte) {
	b := w.b
	for attempt := 1; ; attempt++ {
		if b.abandoned() {
			w.giveUp(e, recordermetrics.DropShutdown, nil, "Unable to write event (shutdown timed out)")
			return
		}
		out, err := w.attempt(ev, patch)
		if err == nil {
			w.corr.written(e, ev.Count, out)
			return
		}
		if w.refused(e, ev, err) {
			return
		}
		if w.draining {
			w.giveUp(e, recordermetrics.DropShutdown, err, "Unable to write event (broadcaster is shut down)")
			return
		}
		if attempt >= b.retry.MaxAttempts {
			w.giveUp(e, recordermetrics.DropRetriesExhausted, err, "Unable to write event (retry limit exceeded!)", "attempts", attempt)
			return
		}
		delay := b.retry.Delay(attempt, err)
		b.logger.V(2).Info("Unable to write event (may retry after sleeping)", "event", klog.KObj(ev), "err", err,
			"attempt", attempt, "delay", delay)
		if !w.sleep(delay) {
			w.draining = true
			w.giveUp(e, recordermetrics.DropShutdown, err, "Unable to write event (broadcaster is shut down)")
			return
		}
		b.metrics.Retries.Inc()
	}
}

// giveUp counts e's unwritten occurrences as dropped under cause, logs
// msg, and takes them out of e's count, so that no later write of e (its
// next occurrence's patch) carries them: every occurrence is either in a
// stored count or counted as dropped, never both.
func (w *sinkWorker) giveUp(e *dedupEntry, cause string, err error, msg string, kv ...any) {
	n := e.dropPending()
	w.b.drop(w.b.logger, cause, int(n), err, msg, append([]any{"event", klog.KRef(e.last.Namespace, e.name)}, kv...)...)
}

// attempt makes one write: Patch for a repeat, falling back to Create with
// the same name, count and first timestamp when the server no longer has
// the object (404); Create otherwise.
func (w *sinkWorker) attempt(ev *corev1.Event, patch []byte) (*corev1.Event, error) {
	if ev.Count > 1 {
		out, err := w.sink.Patch(ev, patch)
		w.b.countWrite(true, err)
		if !apierrors.IsNotFound(err) {
			return out, wrapSinkErr(verbPatch, err)
		}
	}
	ev.ResourceVersion = ""
	out, err := w.sink.Create(ev)
	w.b.countWrite(false, err)
	return out, wrapSinkErr(verbCreate, err)
}

func wrapSinkErr(verb string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("event sink %s: %w", verb, err)
}

// refused reports whether err means retrying cannot help, counting e's
// unwritten occurrences as dropped (see giveUp) and logging if so: a
// request that cannot be built, or an API error other than 429 and 5xx.
// AlreadyExists and a terminating namespace are logged at V(5), as in
// client-go.
func (w *sinkWorker) refused(e *dedupEntry, ev *corev1.Event, err error) bool {
	b := w.b
	var rce *restclient.RequestConstructionError
	switch {
	case errors.As(err, &rce):
		b.drops.Count(recordermetrics.DropRejected, int(e.dropPending()))
		b.drops.Log(b.logger, recordermetrics.DropRejected, 0, err, "Unable to construct event (will not retry!)", "event", klog.KObj(ev))
	case apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		b.drops.Count(recordermetrics.DropRejected, int(e.dropPending()))
		b.drops.Log(b.logger, logAlreadyExists, 5, err, "Server rejected event (will not retry!)", "event", klog.KObj(ev))
	case sinkretry.Classify(err) == sinkretry.Drop:
		b.drops.Count(recordermetrics.DropRejected, int(e.dropPending()))
		b.drops.Log(b.logger, recordermetrics.DropRejected, 0, err, "Server rejected event (will not retry!)", "event", klog.KObj(ev))
	default:
		return false
	}
	return true
}

// sleep waits d on the broadcaster's clock; it returns false at once when
// the worker is told to finish.
func (w *sinkWorker) sleep(d time.Duration) bool {
	t := w.b.clock.NewTimer(d)
	defer t.Stop()
	global, own := w.stopping()
	select {
	case <-t.C():
		return true
	case <-global:
		return false
	case <-own:
		return false
	}
}

// flushItem is a deferred flush; flushQueue orders them by time, then by
// when they were scheduled, and keeps each entry's heapIndex current so an
// evicted entry's flush can be removed.
type flushItem struct {
	at  time.Time
	seq uint64
	e   *dedupEntry
}

// flushQueue is a container/heap of deferred flushes.
type flushQueue []*flushItem

// Len is the number of queued flushes.
func (q flushQueue) Len() int { return len(q) }

// Less orders by time, then by scheduling order.
func (q flushQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}

// Swap swaps two flushes and their entries' indexes.
func (q flushQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].e.heapIndex, q[j].e.heapIndex = i, j
}

// Push appends a *flushItem.
func (q *flushQueue) Push(x any) {
	it := x.(*flushItem)
	it.e.heapIndex = len(*q)
	*q = append(*q, it)
}

// Pop removes the last flush.
func (q *flushQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return it
}
