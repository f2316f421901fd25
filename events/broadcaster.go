package events

import (
	"container/heap"
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/recordermetrics"
	"github.com/kubevents/kubevents/internal/sinkretry"
)

// Broadcaster records events to one sink. It implements client-go's
// EventBroadcaster.
type Broadcaster struct {
	sink     EventSink
	o        options // o.clock and o.logger serve the broadcaster too
	metrics  *recordermetrics.Metrics
	retry    sinkretry.Policy
	hostname string
	drops    *recordermetrics.Dropper // every cause logged under dropLogKey

	mu        sync.Mutex
	series    map[eventKey]*series
	jobs      []job // the worker's FIFO; resume jobs go first
	newWrites int   // queued writes of events not yet created
	deadlines deadlineHeap
	started   bool
	stopped   bool
	busy      bool // the worker is carrying out a job
	parked    bool // the worker is waiting for work or a deadline
	watchers  map[*watcher]struct{}
	nWatchers atomic.Int32
	lastNano  atomic.Int64 // for unique event names

	wake       chan struct{}
	stopCh     chan struct{}
	workerDone chan struct{}
	cancel     context.CancelFunc
}

// series is one event the broadcaster tracks: a singleton or a series.
type series struct {
	key          eventKey
	event        *eventsv1.Event // as first created, without Series
	count        int32
	lastObserved time.Time

	created     bool      // the object exists on the server, as far as we know
	createTried bool      // a create was sent whose outcome is unknown
	written     int32     // the count last written
	state       string    // the series state last written
	lastWrite   time.Time // when it was written
	liveBase    time.Time // the last live check that found nothing new (WithLiveSeriesCounts)
	queued      bool      // a write job is pending
	finished    bool      // idle for FinishAfter: a final write, then forgotten
	removed     bool      // no longer in the map
	deadline    time.Time // of its live entry in the deadline heap
}

type job struct {
	s      *series
	resume *resumeJob
}

// NewBroadcaster returns a broadcaster writing to sink, for example
// &events.EventSinkImpl{Interface: clientset.EventsV1()} from client-go.
// Nothing is written until StartRecordingToSinkWithContext.
func NewBroadcaster(sink EventSink, opts ...Option) *Broadcaster {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	b := &Broadcaster{
		sink:       sink,
		o:          o,
		metrics:    recordermetrics.New("events.k8s.io/v1"),
		retry:      sinkretry.Policy(o.retry).WithDefaults(),
		hostname:   o.hostname,
		series:     map[eventKey]*series{},
		watchers:   map[*watcher]struct{}{},
		wake:       make(chan struct{}, 1),
		stopCh:     make(chan struct{}),
		workerDone: make(chan struct{}),
	}
	if b.hostname == "" {
		b.hostname, _ = os.Hostname()
	}
	if o.registerer != nil {
		if err := b.metrics.Register(o.registerer); err != nil {
			b.o.logger.Error(err, "registering event recorder metrics")
		}
	}
	b.drops = recordermetrics.NewDropper(b.metrics, o.clock, dropLogInterval, dropLogKey)
	return b
}

// Metrics returns the broadcaster's metrics (registered with WithMetrics,
// if given).
func (b *Broadcaster) Metrics() *recordermetrics.Metrics { return b.metrics }

// StartRecordingToSinkWithContext starts writing events to the sink.
// Cancelling ctx shuts the broadcaster down, as Shutdown does.
func (b *Broadcaster) StartRecordingToSinkWithContext(ctx context.Context) error {
	b.mu.Lock()
	if b.started || b.stopped {
		b.mu.Unlock()
		return errors.New("events broadcaster already started or shut down")
	}
	b.started = true
	wctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.mu.Unlock()
	go b.run(wctx)
	go func() {
		select {
		case <-ctx.Done():
			b.Shutdown()
		case <-b.stopCh:
		}
	}()
	return nil
}

// StartRecordingToSink starts writing events to the sink until stopCh is
// closed.
//
// Deprecated: use StartRecordingToSinkWithContext, as in client-go.
func (b *Broadcaster) StartRecordingToSink(stopCh <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stopCh:
			cancel()
		case <-b.stopCh:
			cancel()
		}
	}()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		b.o.logger.Error(err, "starting the events broadcaster")
	}
}

// Shutdown stops accepting events, writes the current count of every
// tracked event that has unwritten occurrences, and the state
// SeriesUnknown on every ongoing series (waiting at most the shutdown
// timeout), and stops the broadcaster's goroutines. Events emitted
// afterwards are dropped and counted.
func (b *Broadcaster) Shutdown() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	close(b.stopCh)
	for _, s := range b.series {
		if s.count > s.written || !s.created || (b.o.stateAnnotation && s.count >= 2 && s.state != SeriesUnknown) {
			b.queueWriteLocked(s) // the final count, and the state unknown
		}
	}
	started := b.started
	b.mu.Unlock()
	if started {
		b.signal()
		t := b.o.clock.NewTimer(b.o.shutdownTimeout)
		select {
		case <-b.workerDone:
		case <-t.C():
			b.cancel() // abandon what is left
			<-b.workerDone
		}
		t.Stop()
		b.cancel()
	} else {
		b.mu.Lock()
		b.dropPendingLocked()
		b.mu.Unlock()
	}
	b.mu.Lock()
	ws := b.watchers
	b.watchers = map[*watcher]struct{}{}
	b.nWatchers.Store(0)
	b.mu.Unlock()
	for w := range ws {
		w.stop()
	}
}

func (b *Broadcaster) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// drop counts an event or occurrence given up on and logs msg (which
// starts "Event dropped: "), at most once per dropLogInterval for every
// cause together.
func (b *Broadcaster) drop(cause, msg string, kv ...any) {
	b.drops.Drop(b.o.logger, dropLogKey, cause, 1, nil, msg, kv...)
}

// observe counts an occurrence of a tracked event. It reports false if
// the key is not tracked (a new event), true if the occurrence is handled.
func (b *Broadcaster) observe(last *lastHit, k eventKey, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		b.drop(recordermetrics.DropShutdown, "Event dropped: the broadcaster is shut down", "reason", k.reason)
		return true
	}
	s := last.s
	if s == nil || s.removed || last.key != k {
		if s = b.series[k]; s == nil {
			return false
		}
		last.key, last.s = k, s
	}
	b.countLocked(s, now)
	return true
}

func (b *Broadcaster) countLocked(s *series, now time.Time) {
	s.count++
	s.lastObserved = now
	b.metrics.Deduplicated.Inc()
	if s.count == 2 {
		b.queueWriteLocked(s) // the series starts: written at once
	}
}

// add tracks a new event and queues its creation.
func (b *Broadcaster) add(last *lastHit, k eventKey, ev *eventsv1.Event, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		b.drop(recordermetrics.DropShutdown, "Event dropped: the broadcaster is shut down", "reason", k.reason)
		return
	}
	if s := b.series[k]; s != nil { // another goroutine created it meanwhile
		b.countLocked(s, now)
		return
	}
	if len(b.series) >= b.o.maxSeries || b.newWrites >= b.o.maxQueued {
		b.drop(recordermetrics.DropQueueFull, "Event dropped: too many events pending", "reason", k.reason, "name", ev.Name)
		return
	}
	s := &series{key: k, event: ev, count: 1, lastObserved: now}
	b.series[k] = s
	last.key, last.s = k, s
	b.metrics.ActiveSeries.Set(float64(len(b.series)))
	b.queueWriteLocked(s)
	b.scheduleLocked(s, now.Add(b.o.finishAfter))
}

// queueWriteLocked queues a write of s's current state, once.
func (b *Broadcaster) queueWriteLocked(s *series) {
	if s.queued {
		return
	}
	s.queued = true
	if !s.created {
		b.newWrites++
	}
	b.jobs = append(b.jobs, job{s: s})
	b.signal()
}

// scheduleLocked makes sure s is looked at by time t.
func (b *Broadcaster) scheduleLocked(s *series, t time.Time) {
	if !s.deadline.IsZero() && !t.Before(s.deadline) {
		return
	}
	s.deadline = t
	heap.Push(&b.deadlines, deadlineEntry{t: t, s: s})
}

// forgetLocked stops tracking s.
func (b *Broadcaster) forgetLocked(s *series) {
	if !s.removed {
		s.removed = true
		if b.series[s.key] == s {
			delete(b.series, s.key)
		}
		b.metrics.ActiveSeries.Set(float64(len(b.series)))
	}
}

// maintainLocked handles every series whose deadline has come: finishes
// idle series, forgets idle singletons, queues heartbeats.
func (b *Broadcaster) maintainLocked(now time.Time) {
	for len(b.deadlines) > 0 && !b.deadlines[0].t.After(now) {
		e := heap.Pop(&b.deadlines).(deadlineEntry)
		s := e.s
		if s.removed || !e.t.Equal(s.deadline) {
			continue // stale entry
		}
		s.deadline = time.Time{}
		finishAt := s.lastObserved.Add(b.o.finishAfter)
		switch {
		case !now.Before(finishAt) && s.count == 1:
			b.forgetLocked(s) // a singleton is forgotten with no API call
		case !now.Before(finishAt):
			s.finished = true
			b.forgetLocked(s)
			b.queueWriteLocked(s) // the final count
		default:
			next := finishAt
			if s.count >= 2 && s.created && !s.lastWrite.IsZero() {
				hb := s.lastWrite.Add(b.o.heartbeat)
				if live := b.liveDueLocked(s); !now.Before(hb) {
					b.queueWriteLocked(s)
					hb = now.Add(b.o.heartbeat)
					s.liveBase = now
				} else if !live.IsZero() && !now.Before(live) {
					if s.count > s.written {
						b.queueWriteLocked(s)
					}
					// Written or not, the next look is once the age has
					// doubled again: the stored count then reflects every
					// occurrence up to half the series' age.
					s.liveBase = now
				}
				next = minTime(next, hb)
				if live := b.liveDueLocked(s); !live.IsZero() {
					next = minTime(next, live)
				}
			}
			b.scheduleLocked(s, next)
		}
	}
}

// liveDueLocked returns when live counting next looks at s (zero when it
// is off or s is not a written series): at LiveSeriesFirstWrite of age,
// then at twice the age of its last write or look.
func (b *Broadcaster) liveDueLocked(s *series) time.Time {
	if !b.o.liveCounts || s.count < 2 || !s.created || s.lastWrite.IsZero() {
		return time.Time{}
	}
	start := s.event.EventTime.Time
	base := s.lastWrite
	if s.liveBase.After(base) {
		base = s.liveBase
	}
	age := 2 * base.Sub(start)
	if age < LiveSeriesFirstWrite {
		age = LiveSeriesFirstWrite
	}
	return start.Add(age)
}

// nextDueLocked is when s next needs a look after a write: its finish, its
// heartbeat or its live count, whichever comes first.
func (b *Broadcaster) nextDueLocked(s *series) time.Time {
	next := minTime(s.lastObserved.Add(b.o.finishAfter), s.lastWrite.Add(b.o.heartbeat))
	if live := b.liveDueLocked(s); !live.IsZero() {
		next = minTime(next, live)
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// dropPendingLocked counts the occurrences of queued writes that will never
// happen as dropped, and takes them out of their series' counts (see
// giveUp).
func (b *Broadcaster) dropPendingLocked() {
	for _, j := range b.jobs {
		if j.s == nil {
			continue
		}
		j.s.queued = false
		if n := j.s.count - j.s.written; n > 0 {
			j.s.count -= n
			b.drops.Drop(b.o.logger, dropLogKey, recordermetrics.DropShutdown, int(n), nil, "Event dropped: not written before shutdown",
				"reason", j.s.key.reason, "name", j.s.event.Name)
		}
	}
	b.jobs = nil
}

// run is the worker: it performs queued writes and resumes in order and
// handles series deadlines, until shut down.
func (b *Broadcaster) run(ctx context.Context) {
	defer close(b.workerDone)
	for {
		b.mu.Lock()
		now := b.o.clock.Now()
		if !b.stopped {
			b.maintainLocked(now)
		}
		if ctx.Err() != nil {
			b.dropPendingLocked()
			b.mu.Unlock()
			return
		}
		if len(b.jobs) > 0 {
			j := b.jobs[0]
			b.jobs = b.jobs[1:]
			b.busy = true
			var snap snapshot
			needed := false
			if j.s != nil {
				j.s.queued = false
				if !j.s.created {
					b.newWrites--
				}
				snap, needed = b.snapshotLocked(j.s, now)
			}
			b.mu.Unlock()
			if j.s != nil {
				if needed {
					b.write(ctx, j.s, snap)
				}
			} else {
				b.resume(ctx, j.resume)
			}
			b.mu.Lock()
			b.busy = false
			b.mu.Unlock()
			continue
		}
		if b.stopped {
			b.mu.Unlock()
			return // drained
		}
		var timeout <-chan time.Time
		var t clock.Timer
		if len(b.deadlines) > 0 {
			next := b.deadlines[0].t
			t = b.o.clock.NewTimer(next.Sub(b.o.clock.Now()))
			timeout = t.C()
			if !b.o.clock.Now().Before(next) {
				// The clock moved while the timer was armed (a stepped
				// fake clock): its deadline may be late; look again now.
				t.Stop()
				b.mu.Unlock()
				continue
			}
		}
		b.parked = true
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-timeout:
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.parked = false
		b.mu.Unlock()
		if t != nil {
			t.Stop()
		}
	}
}

// deadlineHeap orders series by the time they next need attention.
type deadlineEntry struct {
	t time.Time
	s *series
}

type deadlineHeap []deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].t.Before(h[j].t) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *deadlineHeap) Push(x any) { *h = append(*h, x.(deadlineEntry)) }

// Pop implements heap.Interface.
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// watcher delivers emitted events to a StartEventWatcher handler.
type watcher struct {
	ch   chan *eventsv1.Event
	done chan struct{}
	once sync.Once
}

func (w *watcher) stop() {
	w.once.Do(func() { close(w.ch) })
	<-w.done
}

func (b *Broadcaster) hasWatchers() bool { return b.nWatchers.Load() > 0 }

// notifyWatchers hands ev to every watcher, dropping (and counting) it for
// a watcher whose queue is full rather than blocking the caller.
func (b *Broadcaster) notifyWatchers(ev *eventsv1.Event) {
	if !b.hasWatchers() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.watchers {
		select {
		case w.ch <- ev:
		default:
			b.drop(recordermetrics.DropQueueFull, "Event dropped: an event watcher is too slow", "reason", ev.Reason)
		}
	}
}

// StartEventWatcher calls handler with every event emitted (each
// occurrence), in a goroutine of its own. The returned function stops it.
func (b *Broadcaster) StartEventWatcher(handler func(event runtime.Object)) (func(), error) {
	w := &watcher{ch: make(chan *eventsv1.Event, watcherQueue), done: make(chan struct{})}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil, errors.New("events broadcaster is shut down")
	}
	b.watchers[w] = struct{}{}
	b.nWatchers.Add(1)
	b.mu.Unlock()
	go func() {
		defer close(w.done)
		for ev := range w.ch {
			handler(ev)
		}
	}()
	return func() {
		b.mu.Lock()
		if _, ok := b.watchers[w]; ok {
			delete(b.watchers, w)
			b.nWatchers.Add(-1)
		}
		b.mu.Unlock()
		w.stop()
	}, nil
}

// StartLogging logs every emitted event with logger.
func (b *Broadcaster) StartLogging(logger klog.Logger) (func(), error) {
	return b.StartEventWatcher(func(obj runtime.Object) {
		ev, ok := obj.(*eventsv1.Event)
		if !ok {
			return
		}
		logger.Info("Event occurred", "object", klog.KRef(ev.Regarding.Namespace, ev.Regarding.Name),
			"kind", ev.Regarding.Kind, "apiVersion", ev.Regarding.APIVersion, "type", ev.Type,
			"reason", ev.Reason, "action", ev.Action, "note", ev.Note)
	})
}

// StartStructuredLogging logs every emitted event at verbosity.
//
// Deprecated: use StartLogging, as in client-go.
func (b *Broadcaster) StartStructuredLogging(verbosity klog.Level) func() {
	stop, err := b.StartLogging(klog.Background().V(int(verbosity)))
	if err != nil {
		b.o.logger.Error(err, "starting event logging")
		return func() {}
	}
	return stop
}

// uniqueNano returns now in Unix nanoseconds, bumped past any value it
// returned before, so that two events about one object emitted in the same
// clock tick (coarse clocks; a fake clock) never get the same name.
func (b *Broadcaster) uniqueNano(now time.Time) int64 {
	n := now.UnixNano()
	for {
		last := b.lastNano.Load()
		if n <= last {
			n = last + 1
		}
		if b.lastNano.CompareAndSwap(last, n) {
			return n
		}
	}
}

// idle reports whether the worker is waiting with nothing queued and
// nothing due at the clock's current time.
func (b *Broadcaster) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.jobs) == 0 && !b.busy && b.parked &&
		(len(b.deadlines) == 0 || b.deadlines[0].t.After(b.o.clock.Now()))
}
