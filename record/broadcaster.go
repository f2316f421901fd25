package record

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/recordermetrics"
	"github.com/kubevents/kubevents/internal/sinkretry"
)

// errStopped is logged for events emitted after Shutdown.
var errStopped = errors.New("broadcaster already stopped")

// Rate-limit keys for log lines that share a drop cause with others but
// must not be suppressed by them: the V(5) line for AlreadyExists refusals
// (apart from Error-level refusals), and events emitted after Shutdown
// (apart from events the workers abandon while shutting down).
const (
	logAlreadyExists = "already_exists"
	logEmitStopped   = "emit_stopped"
)

// Broadcaster fans events from its recorders out to sinks, watchers and
// logs. It implements client-go's record.EventBroadcaster. The zero value
// is not usable; call NewBroadcaster.
type Broadcaster struct {
	clock           clock.WithTicker
	logger          klog.Logger
	metrics         *recordermetrics.Metrics
	correlatorOpts  CorrelatorOptions
	retry           sinkretry.Policy
	queueSize       int
	shutdownTimeout time.Duration
	resume          bool
	// drops counts drops and rate-limits their log lines per cause (and
	// per logAlreadyExists, logEmitStopped); writes are the metrics'
	// children, resolved once. Both built at construction, then read
	// only.
	drops  *recordermetrics.Dropper
	writes [2][2]prometheus.Counter // [create, patch][success, error]

	// ctx bounds resume lists; Shutdown cancels it when it is done or
	// its deadline passes.
	ctx       context.Context
	cancel    context.CancelFunc
	stopAfter func() bool // unregisters the WithContext hook

	// lastName is the UnixNano of the latest event name (nameTime).
	lastName atomic.Int64

	mu       sync.RWMutex
	stopped  bool
	watchers []*watcher // receiving events; replaced, never modified in place
	running  int        // watcher goroutines that have not returned
	allDone  chan struct{}
	doneSet  bool

	stopping     chan struct{} // closed when Shutdown starts
	abandon      chan struct{} // closed when the shutdown deadline passes
	done         chan struct{} // closed when Shutdown returns
	shutdownOnce sync.Once
}

// NewBroadcaster returns a started broadcaster; add sinks and watchers with
// its Start methods and recorders with NewRecorder, and call Shutdown (or
// cancel WithContext's context) when done.
func NewBroadcaster(opts ...Option) *Broadcaster {
	var c config
	for _, o := range opts {
		o(&c)
	}
	b := &Broadcaster{
		correlatorOpts:  c.correlator,
		retry:           c.retry.internal(),
		queueSize:       c.queueSize,
		shutdownTimeout: c.shutdownTimeout,
		resume:          c.resume,
		metrics:         recordermetrics.New("v1"),
		allDone:         make(chan struct{}),
		stopping:        make(chan struct{}),
		abandon:         make(chan struct{}),
		done:            make(chan struct{}),
	}
	if b.queueSize <= 0 {
		b.queueSize = DefaultQueueSize
	}
	if b.shutdownTimeout <= 0 {
		b.shutdownTimeout = DefaultShutdownTimeout
	}
	switch {
	case c.clock != nil:
		b.clock = c.clock
	case c.correlator.Clock != nil:
		if wt, ok := c.correlator.Clock.(clock.WithTicker); ok {
			b.clock = wt
		} else {
			b.clock = passiveClock{PassiveClock: c.correlator.Clock}
		}
	default:
		b.clock = clock.RealClock{}
	}
	parent := c.ctx
	if parent == nil {
		parent = context.Background()
	}
	switch {
	case c.logger != nil:
		b.logger = *c.logger
	case c.ctx != nil:
		b.logger = klog.FromContext(c.ctx)
	default:
		b.logger = klog.Background()
	}
	// Cancelling the caller's context starts Shutdown, which still lists
	// while it drains; so b.ctx does not inherit that cancellation.
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(parent))
	if c.registerer != nil {
		if err := b.metrics.RegisterShared(c.registerer); err != nil {
			b.logger.Error(err, "Registering the event recorder's metrics failed")
		}
	}
	b.drops = recordermetrics.NewDropper(b.metrics, b.clock, dropLogInterval, logAlreadyExists, logEmitStopped)
	for i, verb := range []string{verbCreate, verbPatch} {
		for j, res := range []string{resultSuccess, resultError} {
			b.writes[i][j] = b.metrics.Writes.WithLabelValues(verb, res)
		}
	}
	if c.ctx != nil && c.ctx.Done() != nil {
		b.stopAfter = context.AfterFunc(c.ctx, b.Shutdown)
	}
	return b
}

// NewBroadcasterForTests is client-go's shorthand for
// NewBroadcaster(WithSleepDuration(sleepDuration)).
func NewBroadcasterForTests(sleepDuration time.Duration) *Broadcaster {
	return NewBroadcaster(WithSleepDuration(sleepDuration))
}

// NewBroadcasterWithCorrelatorOptions is client-go's shorthand for
// NewBroadcaster(WithCorrelatorOptions(options)).
func NewBroadcasterWithCorrelatorOptions(options CorrelatorOptions) *Broadcaster {
	return NewBroadcaster(WithCorrelatorOptions(options))
}

// countWrite counts one sink call.
func (b *Broadcaster) countWrite(patch bool, err error) {
	i, j := 0, 0
	if patch {
		i = 1
	}
	if err != nil {
		j = 1
	}
	b.writes[i][j].Inc()
}

// Metrics returns the broadcaster's metrics (registered with WithMetrics'
// registerer, if any).
func (b *Broadcaster) Metrics() *recordermetrics.Metrics { return b.metrics }

// Done is closed when Shutdown has finished, whether called directly or
// through WithContext's context.
func (b *Broadcaster) Done() <-chan struct{} { return b.done }

// NewRecorder returns a recorder whose events carry source (Source,
// ReportingController = source.Component, ReportingInstance = source.Host)
// and go to every sink and watcher of b.
func (b *Broadcaster) NewRecorder(scheme *runtime.Scheme, source corev1.EventSource) EventRecorderLogger {
	return &recorder{b: b, scheme: scheme, source: source, logger: b.logger}
}

// StartRecordingToSink writes the broadcaster's events to sink from one
// goroutine with its own correlator (aggregation, deduplication, spam
// filter) and a queue of WithQueueSize events. Stop on the result ends it
// after writing what it holds; ResultChan is closed then and carries
// nothing.
func (b *Broadcaster) StartRecordingToSink(sink EventSink) watch.Interface {
	w := &sinkWorker{sink: sink, resumed: map[corev1.EventSource]bool{}}
	w.corr = newCorrelator(b.correlatorOpts,
		func() { b.metrics.ActiveSeries.Inc() },
		w.evicted)
	return b.start(&w.watcher, w.run)
}

// StartEventWatcher calls handler with each event from one goroutine, in
// order; events share one object across watchers, which handler must not
// modify. Stop ends it after handling what is queued.
func (b *Broadcaster) StartEventWatcher(handler func(*corev1.Event)) watch.Interface {
	w := &handlerWatcher{handler: handler}
	return b.start(&w.watcher, w.run)
}

// StartLogging logs each event with logf in client-go's format:
// Event(<involvedObject %#v>): type: '<type>' reason: '<reason>' <message>.
func (b *Broadcaster) StartLogging(logf func(format string, args ...interface{})) watch.Interface {
	return b.StartEventWatcher(func(e *corev1.Event) {
		logf("Event(%#v): type: '%v' reason: '%v' %v", e.InvolvedObject, e.Type, e.Reason, e.Message)
	})
}

// StartStructuredLogging logs each event as "Event occurred" with the
// broadcaster's logger at the given verbosity, with client-go's keys.
func (b *Broadcaster) StartStructuredLogging(verbosity klog.Level) watch.Interface {
	logger := b.logger.V(int(verbosity))
	return b.StartEventWatcher(func(e *corev1.Event) {
		logger.Info("Event occurred", "object", klog.KRef(e.InvolvedObject.Namespace, e.InvolvedObject.Name),
			"fieldPath", e.InvolvedObject.FieldPath, "kind", e.InvolvedObject.Kind,
			"apiVersion", e.InvolvedObject.APIVersion, "type", e.Type, "reason", e.Reason, "message", e.Message)
	})
}

// start registers w and runs loop in its goroutine.
func (b *Broadcaster) start(w *watcher, loop func()) watch.Interface {
	w.b = b
	w.queue = make(chan item, b.queueSize)
	w.stopCh = make(chan struct{})
	w.result = make(chan watch.Event)
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		b.logger.Error(errStopped, "Unable to start event watcher (will not retry!)")
		return watch.NewEmptyWatch()
	}
	ws := make([]*watcher, 0, len(b.watchers)+1)
	b.watchers = append(append(ws, b.watchers...), w)
	b.running++
	b.mu.Unlock()
	go loop()
	return w
}

// emit queues ev for every watcher without blocking.
func (b *Broadcaster) emit(logger klog.Logger, ev *corev1.Event) {
	full := 0
	b.mu.RLock()
	if b.stopped {
		b.mu.RUnlock()
		b.drops.Drop(logger, logEmitStopped, recordermetrics.DropShutdown, 1, errStopped, "Unable to record event (will not retry!)", "event", klog.KObj(ev))
		return
	}
	for _, w := range b.watchers {
		select {
		case w.queue <- item{ev: ev}:
		default:
			full++
		}
	}
	b.mu.RUnlock()
	if full > 0 {
		b.drop(logger, recordermetrics.DropQueueFull, full, nil, "Unable to record event: too many queued events, dropped event",
			"event", klog.KObj(ev), "reason", ev.Reason, "involvedObject", klog.KRef(ev.InvolvedObject.Namespace, ev.InvolvedObject.Name))
	}
}

// drop counts n events or occurrences lost to cause and logs msg, at most
// once per dropLogInterval per cause, with the number of drops the line
// stands for.
func (b *Broadcaster) drop(logger klog.Logger, cause string, n int, err error, msg string, kv ...any) {
	b.drops.Drop(logger, cause, cause, n, err, msg, kv...)
}

// Shutdown stops the broadcaster: events emitted from now on are dropped
// (counted under "shutdown" and logged); each sink writes what it has
// queued and its held-back counts, one attempt each, and each watcher
// handles its queue, until everything is done or WithShutdownTimeout
// passes on the broadcaster's clock; retry waits end at once. Then every
// goroutine the broadcaster started has returned, except one still inside
// a sink call that has not returned by the deadline, which returns when
// the call does. Shutdown may be called more than once and concurrently;
// every call returns when the first has finished.
func (b *Broadcaster) Shutdown() {
	b.shutdownOnce.Do(b.shutdown)
}

func (b *Broadcaster) shutdown() {
	if b.stopAfter != nil {
		b.stopAfter()
	}
	b.mu.Lock()
	b.stopped = true
	b.watchers = nil
	b.checkAllDoneLocked()
	b.mu.Unlock()
	close(b.stopping)
	t := b.clock.NewTimer(b.shutdownTimeout)
	select {
	case <-b.allDone:
		b.cancel()
	case <-t.C():
		close(b.abandon)
		b.cancel() // ends a resume list in progress
		b.logger.Error(nil, "Event broadcaster shutdown timed out; abandoning unwritten events", "timeout", b.shutdownTimeout)
	}
	t.Stop()
	close(b.done)
}

// checkAllDoneLocked closes allDone once the broadcaster is stopped and
// every goroutine has returned. b.mu must be held.
func (b *Broadcaster) checkAllDoneLocked() {
	if b.stopped && b.running == 0 && !b.doneSet {
		b.doneSet = true
		close(b.allDone)
	}
}

// abandoned reports whether the shutdown deadline has passed.
func (b *Broadcaster) abandoned() bool {
	select {
	case <-b.abandon:
		return true
	default:
		return false
	}
}

// item is a queued event, or a barrier: an internal marker that a worker
// acknowledges once everything queued before it is processed (tests use
// it to wait for a worker).
type item struct {
	ev      *corev1.Event
	barrier chan struct{}
}

// watcher is the part sink workers and handler watchers share: a queue, a
// goroutine, and watch.Interface.
type watcher struct {
	b        *Broadcaster
	queue    chan item
	stopCh   chan struct{}
	stopOnce sync.Once
	result   chan watch.Event
}

// Stop detaches the watcher from the broadcaster; its goroutine finishes
// what it has queued and returns. It does not wait for that.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		b := w.b
		b.mu.Lock()
		ws := make([]*watcher, 0, len(b.watchers))
		for _, o := range b.watchers {
			if o != w {
				ws = append(ws, o)
			}
		}
		b.watchers = ws
		b.mu.Unlock()
		close(w.stopCh)
	})
}

// ResultChan is closed when the watcher's goroutine has returned; it
// carries no events (they go to the sink or handler).
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// stopping returns the two channels that tell the goroutine to finish:
// the broadcaster's Shutdown and the watcher's own Stop.
func (w *watcher) stopping() (<-chan struct{}, <-chan struct{}) { return w.b.stopping, w.stopCh }

// exit marks the goroutine returned.
func (w *watcher) exit() {
	close(w.result)
	b := w.b
	b.mu.Lock()
	b.running--
	b.checkAllDoneLocked()
	b.mu.Unlock()
}

// handlerWatcher calls a function with each event.
type handlerWatcher struct {
	watcher
	handler func(*corev1.Event)
}

func (h *handlerWatcher) run() {
	defer h.exit()
	global, own := h.stopping()
	for {
		select {
		case it := <-h.queue:
			h.handle(it)
		case <-global:
			h.drain()
			return
		case <-own:
			h.drain()
			return
		}
	}
}

func (h *handlerWatcher) handle(it item) {
	if it.barrier != nil {
		close(it.barrier)
		return
	}
	h.handler(it.ev)
}

func (h *handlerWatcher) drain() {
	lost := 0
	for {
		select {
		case it := <-h.queue:
			if it.ev != nil && h.b.abandoned() {
				lost++
				continue
			}
			h.handle(it)
		default:
			h.b.drop(h.b.logger, recordermetrics.DropShutdown, lost, nil, "Event watcher stopped before handling queued events")
			return
		}
	}
}
