package pleg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
)

// EventedConfig configures an evented PLEG. Zero fields take the defaults.
type EventedConfig struct {
	// Clock is the node's clock (clock.RealClock).
	Clock clock.Clock
	// ChannelCapacity is the event channel's (DefaultChannelCapacity).
	ChannelCapacity int
	// Metrics receives the PLEG's metrics (NewMetrics, unregistered).
	Metrics *Metrics
	// Logger logs (klog's).
	Logger *logr.Logger

	// LiveRelistPeriod and LiveRelistThreshold are the generic PLEG's
	// while the stream is live (EventedRelistPeriod, EventedRelistThreshold).
	LiveRelistPeriod, LiveRelistThreshold time.Duration
	// DownRelistPeriod and DownRelistThreshold are the generic PLEG's
	// while the stream is down or the runtime has none
	// (GenericRelistPeriod, GenericRelistThreshold).
	DownRelistPeriod, DownRelistThreshold time.Duration

	// QueueSize bounds the events received but not yet applied
	// (DefaultQueueSize). The stream is never blocked: an event that
	// finds the queue full is discarded, counted, and recovered by a relist.
	QueueSize int
	// Backoff is the delays before successive reconnection attempts
	// (DefaultBackoff); after the last, RetryPeriod (60 s) repeats.
	Backoff     []time.Duration
	RetryPeriod time.Duration
	// StableAfter is how long a stream must stay up for the backoff to
	// start over (DefaultStableAfter).
	StableAfter time.Duration
	// MaxEmptyStreams is how many streams in a row may end at once
	// without a word (a runtime with events disabled) before the PLEG
	// falls back to relisting (DefaultMaxEmptyStreams).
	MaxEmptyStreams int
	// ProbePeriod is how often a PLEG that fell back tries the stream
	// again, in case the runtime was upgraded (DefaultProbePeriod).
	ProbePeriod time.Duration
	// ConfirmAfter is how long a stream must stay open, without headers
	// or events, to count as established (DefaultConfirmAfter).
	ConfirmAfter time.Duration
	// WatermarkPeriod is how often a live stream advances the cache's
	// stream watermark (DefaultWatermarkPeriod).
	WatermarkPeriod time.Duration
	// StreamLag is how long an event may take from its creation in the
	// runtime to the PLEG's queue (DefaultStreamLag): the watermark stays
	// this far behind the clock, and a relist does not count a change
	// this recent as missed by the stream.
	StreamLag time.Duration
}

// Defaults of EventedConfig.
const (
	DefaultQueueSize       = 1000
	DefaultRetryPeriod     = 60 * time.Second
	DefaultStableAfter     = 30 * time.Second
	DefaultMaxEmptyStreams = 3
	DefaultProbePeriod     = 10 * time.Minute
	DefaultWatermarkPeriod = 1 * time.Second
	DefaultConfirmAfter    = 1 * time.Second
	DefaultStreamLag       = 200 * time.Millisecond
)

// DefaultBackoff is KEP-3386's: at once, then 1, 2, 4 ... 64 s.
var DefaultBackoff = []time.Duration{0, 1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
	16 * time.Second, 32 * time.Second, 64 * time.Second}

func (c EventedConfig) withDefaults() EventedConfig {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	g := GenericConfig{ChannelCapacity: c.ChannelCapacity, Clock: c.Clock, Metrics: c.Metrics, Logger: c.Logger}.withDefaults()
	c.ChannelCapacity, c.Metrics, c.Logger = g.ChannelCapacity, g.Metrics, g.Logger
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LiveRelistPeriod, EventedRelistPeriod)
	def(&c.LiveRelistThreshold, EventedRelistThreshold)
	def(&c.DownRelistPeriod, GenericRelistPeriod)
	def(&c.DownRelistThreshold, GenericRelistThreshold)
	def(&c.RetryPeriod, DefaultRetryPeriod)
	def(&c.StableAfter, DefaultStableAfter)
	def(&c.ProbePeriod, DefaultProbePeriod)
	def(&c.WatermarkPeriod, DefaultWatermarkPeriod)
	def(&c.ConfirmAfter, DefaultConfirmAfter)
	def(&c.StreamLag, DefaultStreamLag)
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.MaxEmptyStreams <= 0 {
		c.MaxEmptyStreams = DefaultMaxEmptyStreams
	}
	return c
}

// EventedPLEG follows the runtime's GetContainerEvents stream and keeps a
// generic PLEG relisting: every 300 s while the stream is live, every
// second while it is down or the runtime has none. Both feed one cache
// and one channel.
type EventedPLEG struct {
	runtime Runtime
	generic *GenericPLEG
	cache   *Cache
	emitter *emitter
	cfg     EventedConfig
	clock   clock.Clock
	metrics *Metrics
	log     logr.Logger

	queue   chan *runtimeapi.ContainerEventResponse
	pending atomic.Int64 // events received and not yet applied

	invalidLimit *ratelog.Limiter
	discardLimit *ratelog.Limiter
	streamLimit  *ratelog.Limiter

	mu         sync.Mutex
	live       bool  // a stream is established
	everLive   bool  // some stream was established
	fallenBack bool  // the runtime has no usable stream
	needRelist int64 // the relist that must complete before the stream watermark moves
	running    bool  // between Start and Stop
	cancel     context.CancelFunc
	wg         sync.WaitGroup

	// retryHook, when set (by tests), is told each reconnection delay.
	retryHook func(time.Duration)
}

var _ PodLifecycleEventGenerator = (*EventedPLEG)(nil)

// NewEvented returns an evented PLEG over rt, with its generic PLEG.
func NewEvented(rt Runtime, cfg EventedConfig) *EventedPLEG {
	cfg = cfg.withDefaults()
	cache := NewCache()
	ch := make(chan *PodLifecycleEvent, cfg.ChannelCapacity)
	g := newGeneric(rt, cache, ch, GenericConfig{
		RelistPeriod: cfg.DownRelistPeriod, RelistThreshold: cfg.DownRelistThreshold,
		ChannelCapacity: cfg.ChannelCapacity, Clock: cfg.Clock, Metrics: cfg.Metrics, Logger: cfg.Logger,
	})
	e := &EventedPLEG{
		runtime:      rt,
		generic:      g,
		cache:        cache,
		emitter:      g.emitter,
		cfg:          cfg,
		clock:        cfg.Clock,
		metrics:      cfg.Metrics,
		log:          cfg.Logger.WithName("evented"),
		queue:        make(chan *runtimeapi.ContainerEventResponse, cfg.QueueSize),
		invalidLimit: ratelog.New(cfg.Clock, logInterval),
		discardLimit: ratelog.New(cfg.Clock, logInterval),
		streamLimit:  ratelog.New(cfg.Clock, logInterval),
	}
	g.countMissed = e.countMissed
	cache.onTransient = func(types.UID) { g.RequestRelist() }
	g.missedCutoff = cfg.StreamLag
	return e
}

// Watch returns the event channel.
func (e *EventedPLEG) Watch() <-chan *PodLifecycleEvent { return e.emitter.ch }

// Cache returns the pod status cache.
func (e *EventedPLEG) Cache() *Cache { return e.cache }

// Generic returns the generic PLEG the evented one keeps relisting.
func (e *EventedPLEG) Generic() *GenericPLEG { return e.generic }

// InUse reports whether the PLEG follows a live event stream.
func (e *EventedPLEG) InUse() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live
}

// FellBack reports whether the PLEG gave up on the runtime's stream (it
// has none) and relies on relisting, probing the stream now and then.
func (e *EventedPLEG) FellBack() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fallenBack
}

// Start starts the generic PLEG and follows the runtime's stream; calling
// it again does nothing.
func (e *EventedPLEG) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.running, e.cancel = true, cancel
	e.generic.Start()
	e.wg.Add(3)
	go e.connectLoop(ctx)
	go e.processLoop(ctx)
	go e.watermarkLoop(ctx, e.clock.Now())
}

// Stop stops following the stream, applying events and relisting, and
// returns when every goroutine is gone; events received but not yet
// applied are dropped (a restart relists).
func (e *EventedPLEG) Stop() {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return
	}
	e.running = false
	cancel := e.cancel
	e.mu.Unlock()
	cancel()
	e.wg.Wait()
	e.generic.Stop()
	for {
		select {
		case <-e.queue:
			e.pending.Add(-1)
			continue
		default:
		}
		break
	}
	e.mu.Lock()
	e.live = false
	e.mu.Unlock()
	e.metrics.EventedInUse.Set(0)
}

// Healthy reports whether the generic PLEG relists in time and the event
// channel is not full.
func (e *EventedPLEG) Healthy() (bool, error) {
	if e.emitter.full() {
		return false, fmt.Errorf("EventedPLEG: pleg event channel capacity is full with %v events", cap(e.emitter.ch))
	}
	return e.generic.Healthy()
}

// countMissed says whether relisted transitions count as missed events:
// once a stream was established, unless the runtime turned out to have
// none.
func (e *EventedPLEG) countMissed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.everLive && !e.fallenBack
}

// streamResult is how one stream ended.
type streamResult struct {
	established bool
	upFor       time.Duration
	err         error
}

func (e *EventedPLEG) connectLoop(ctx context.Context) {
	defer e.wg.Done()
	failures, empty := 0, 0
	for {
		res := e.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		endedAt := e.clock.Now()
		e.metrics.ConnectionErrors.Inc()
		e.streamDown()
		switch {
		case status.Code(res.err) == codes.Unimplemented:
			e.fallBack(res.err, "the runtime does not implement GetContainerEvents")
		case !res.established && errors.Is(res.err, io.EOF):
			if empty++; empty >= e.cfg.MaxEmptyStreams {
				e.fallBack(res.err, "the runtime ends the event stream at once (events disabled?)")
			}
		}
		if res.established {
			empty = 0
			if res.upFor >= e.cfg.StableAfter {
				failures = 0
			}
		}
		var delay time.Duration
		if e.FellBack() {
			delay = e.cfg.ProbePeriod
		} else {
			delay = e.cfg.RetryPeriod
			if failures < len(e.cfg.Backoff) {
				delay = e.cfg.Backoff[failures]
			}
			failures++
			if ok, n := e.streamLimit.Allow(); ok {
				e.log.Error(res.err, "Runtime event stream ended; relisting every second until it is back",
					"retryIn", delay, "suppressed", n)
			}
		}
		if e.retryHook != nil {
			e.retryHook(delay)
		}
		if !e.sleepUntil(ctx, endedAt.Add(delay)) {
			return
		}
	}
}

// sleepUntil waits until the clock reads t (an absolute deadline, so
// that a clock that moved while the caller was busy still counts); false
// if ctx ended first.
func (e *EventedPLEG) sleepUntil(ctx context.Context, t time.Time) bool {
	timer := deadlineTimer(e.clock, t)
	if timer == nil {
		return ctx.Err() == nil
	}
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

// follow opens a stream and queues its events until it ends.
//
// The stream counts as established (ConnectionSuccess, evented mode) when
// the runtime answers it with headers or an event, or when it has stayed
// open ConfirmAfter without an answer: containerd and CRI-O send headers
// only with the first event, so a quiet node's stream shows nothing, while
// a runtime without events (Unimplemented, or disabled) ends the stream at
// once. Unlike upstream, a stream that fails at once is never counted as
// a success.
func (e *EventedPLEG) follow(ctx context.Context) streamResult {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := e.runtime.GetContainerEvents(sctx)
	if err != nil {
		return streamResult{err: err}
	}
	opened := e.clock.Now()
	var (
		mu          sync.Mutex
		established bool
		ended       bool
		since       time.Time
	)
	confirm := func() {
		mu.Lock()
		defer mu.Unlock()
		if !established && !ended {
			established, since = true, e.established()
		}
	}
	// Confirmed ConfirmAfter after opening; at once if that has passed.
	var quiet <-chan time.Time
	if timer := deadlineTimer(e.clock, opened.Add(e.cfg.ConfirmAfter)); timer != nil {
		defer timer.Stop()
		quiet = timer.C()
	} else {
		passed := make(chan time.Time, 1)
		passed <- opened
		quiet = passed
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-quiet:
			confirm()
		case <-done:
		}
	}()
	defer func() {
		close(done)
		wg.Wait()
	}()
	if md, _ := s.Header(); md != nil {
		confirm()
	}
	for {
		ev, err := s.Recv()
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			ended = true
			r := streamResult{established: established, err: err}
			if established {
				r.upFor = e.clock.Since(since)
			}
			return r
		}
		confirm()
		e.pending.Add(1) // before counting it, so that a reader of both never sees it in neither
		e.metrics.Notifications.Inc()
		e.enqueue(ev)
	}
}

// established switches to evented mode: a stream is up (the runtime
// answered with headers or an event). The generic PLEG relists at once,
// so that what happened while no stream was up is caught, and then every
// LiveRelistPeriod.
func (e *EventedPLEG) established() time.Time {
	now := e.clock.Now()
	e.metrics.ConnectionSuccess.Inc()
	e.metrics.EventedInUse.Set(1)
	e.mu.Lock()
	wasFallenBack := e.fallenBack
	e.live, e.everLive, e.fallenBack = true, true, false
	e.needRelist = e.generic.started.Load() + 1
	e.mu.Unlock()
	e.generic.SetRelistPeriod(e.cfg.LiveRelistPeriod, e.cfg.LiveRelistThreshold)
	e.generic.RequestRelist()
	e.log.Info("Following the runtime's event stream", "relistPeriod", e.cfg.LiveRelistPeriod, "wasFallenBack", wasFallenBack)
	return now
}

// streamDown returns to relisting every DownRelistPeriod, relisting at
// once to catch what the stream did not deliver.
func (e *EventedPLEG) streamDown() {
	e.mu.Lock()
	e.live = false
	e.mu.Unlock()
	e.metrics.EventedInUse.Set(0)
	e.generic.SetRelistPeriod(e.cfg.DownRelistPeriod, e.cfg.DownRelistThreshold)
	e.generic.RequestRelist()
}

func (e *EventedPLEG) fallBack(err error, why string) {
	e.mu.Lock()
	already := e.fallenBack
	e.fallenBack = true
	e.mu.Unlock()
	if !already {
		e.log.Info("Falling back to relisting: "+why, "err", err.Error(), "relistPeriod", e.cfg.DownRelistPeriod,
			"probeEvery", e.cfg.ProbePeriod)
	}
}

// enqueue hands an event to the processor without ever blocking the
// stream; when the queue is full the event is discarded, counted, and a
// relist recovers it.
func (e *EventedPLEG) enqueue(ev *runtimeapi.ContainerEventResponse) {
	select {
	case e.queue <- ev:
		return
	default:
	}
	e.pending.Add(-1)
	e.metrics.StreamDiscards.Inc()
	e.mu.Lock()
	e.needRelist = e.generic.started.Load() + 1
	e.mu.Unlock()
	e.generic.RequestRelist()
	if ok, n := e.discardLimit.Allow(); ok {
		e.log.Error(nil, "PLEG cannot keep up with the runtime's events; discarding, a relist recovers them",
			"queue", cap(e.queue), "suppressed", n)
	}
}

func (e *EventedPLEG) processLoop(ctx context.Context) {
	defer e.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-e.queue:
			if ctx.Err() != nil {
				e.pending.Add(-1)
				return
			}
			e.process(ev)
			e.pending.Add(-1)
		}
	}
}

// watermarkLoop considers the watermark every WatermarkPeriod from start.
func (e *EventedPLEG) watermarkLoop(ctx context.Context, start time.Time) {
	defer e.wg.Done()
	next := start
	for {
		next = next.Add(e.cfg.WatermarkPeriod)
		if now := e.clock.Now(); next.Before(now) {
			next = now // do not run missed ticks one after another
		}
		if !e.sleepUntil(ctx, next) {
			return
		}
		e.advanceWatermark()
	}
}

// advanceWatermark moves the cache's stream watermark to StreamLag ago,
// but only on evidence: a stream is up, a relist that began after it came
// up (and after the last discard) has completed, and every event received
// has been applied. Unlike upstream's unconditional UpdateTime(now) every
// 5 s, it never claims freshness while events may be missing.
func (e *EventedPLEG) advanceWatermark() {
	now := e.clock.Now()
	e.mu.Lock()
	ok := e.live && e.generic.done.Load() >= e.needRelist
	e.mu.Unlock()
	if !ok || e.pending.Load() != 0 {
		return
	}
	e.cache.UpdateStreamTime(now.Add(-e.cfg.StreamLag))
}

// process applies one runtime event to the cache and sends its
// PodLifecycleEvents: CREATED none (its snapshot is cached as transient),
// STARTED ContainerStarted, STOPPED ContainerDied, DELETED ContainerDied
// (unless the consumer heard it die) and ContainerRemoved, with the
// container (or sandbox) dropped from the cache. An event older than the
// cache's entry changes nothing and sends nothing.
func (e *EventedPLEG) process(ev *runtimeapi.ContainerEventResponse) {
	sb := ev.GetPodSandboxStatus()
	if sb.GetMetadata().GetUid() == "" {
		e.metrics.InvalidEvents.Inc()
		if ok, n := e.invalidLimit.Allow(); ok {
			e.log.Error(nil, "Ignoring a runtime event without pod sandbox status", "container", ev.ContainerId,
				"type", ev.ContainerEventType.String(), "suppressed", n)
		}
		return
	}
	now := e.clock.Now()
	ts := runtimeTime(ev.CreatedAt, now)
	e.metrics.EventLatency.Observe(max(now.Sub(ts), 0).Seconds())

	uid := types.UID(sb.Metadata.Uid)
	id := ev.ContainerId
	var prev *PodStatus
	if before := e.cache.peek(uid); before != nil {
		prev = before.status // nil after a failed inspection
	}
	ev1 := func(t PodLifeCycleEventType) *PodLifecycleEvent {
		return &PodLifecycleEvent{ID: uid, Type: t, Data: id}
	}

	var next *PodStatus
	var evs []*PodLifecycleEvent
	switch ev.ContainerEventType {
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		if id == sb.Id {
			rest := otherSandboxes(prev, id)
			if len(rest) == 0 {
				if !e.cache.Delete(uid, ts) {
					return
				}
			} else {
				next = withoutSandbox(prev, rest, ts)
				if e.cache.Set(uid, next, nil, ts, false) != Stored {
					return
				}
			}
		} else {
			next = statusFromEvent(ev, prev, ts)
			next.ContainerStatuses = withoutContainer(next.ContainerStatuses, id)
			if e.cache.Set(uid, next, nil, ts, false) != Stored {
				return
			}
		}
		evs = []*PodLifecycleEvent{ev1(ContainerDied), ev1(ContainerRemoved)}
	default:
		next = statusFromEvent(ev, prev, ts)
		created := ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
		if e.cache.Set(uid, next, nil, ts, created) != Stored {
			return
		}
		switch ev.ContainerEventType {
		case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
			evs = []*PodLifecycleEvent{ev1(ContainerStarted)}
		case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
			evs = []*PodLifecycleEvent{ev1(ContainerDied)}
		}
	}
	e.updateRunningMetrics(prev, next)
	for _, pe := range evs {
		pe.Status = next
		if ev.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
			pe.Status = prev // the last status that held what was deleted
		}
	}
	e.emitter.emit(evs)
}

// statusFromEvent builds a pod's status from an event: the event's
// sandbox (with the cached pod's other sandboxes kept), the event's
// containers, and the pod's IPs, kept from the cache when the event's
// sandbox has none and none is ready (upstream's getPodIPs).
func statusFromEvent(ev *runtimeapi.ContainerEventResponse, prev *PodStatus, ts time.Time) *PodStatus {
	sb := ev.PodSandboxStatus
	st := &PodStatus{
		ID:              types.UID(sb.Metadata.Uid),
		Name:            sb.Metadata.Name,
		Namespace:       sb.Metadata.Namespace,
		SandboxStatuses: append([]*runtimeapi.PodSandboxStatus{sb}, otherSandboxes(prev, sb.Id)...),
		TimeStamp:       ts,
	}
	sortSandboxes(st.SandboxStatuses)
	st.ContainerStatuses = append(st.ContainerStatuses, ev.ContainersStatuses...)
	sortContainers(st.ContainerStatuses)
	st.IPs = podIPs(st.SandboxStatuses, prev)
	return st
}

// podIPs are the IPs of the newest ready sandbox; when there is none,
// the cached pod's, so that a stopping pod keeps its IPs.
func podIPs(sandboxes []*runtimeapi.PodSandboxStatus, prev *PodStatus) []string {
	for _, s := range sandboxes {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return sandboxIPs(s)
		}
	}
	if prev != nil {
		return prev.IPs
	}
	return nil
}

func otherSandboxes(prev *PodStatus, id string) []*runtimeapi.PodSandboxStatus {
	if prev == nil {
		return nil
	}
	var out []*runtimeapi.PodSandboxStatus
	for _, s := range prev.SandboxStatuses {
		if s.GetId() != id {
			out = append(out, s)
		}
	}
	return out
}

func withoutSandbox(prev *PodStatus, rest []*runtimeapi.PodSandboxStatus, ts time.Time) *PodStatus {
	st := &PodStatus{ID: prev.ID, Name: prev.Name, Namespace: prev.Namespace, SandboxStatuses: rest,
		ContainerStatuses: prev.ContainerStatuses, TimeStamp: ts}
	st.IPs = podIPs(rest, prev)
	return st
}

func withoutContainer(cs []*runtimeapi.ContainerStatus, id string) []*runtimeapi.ContainerStatus {
	out := cs[:0:0]
	for _, c := range cs {
		if c.GetId() != id {
			out = append(out, c)
		}
	}
	return out
}

func sortSandboxes(ss []*runtimeapi.PodSandboxStatus) {
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].CreatedAt > ss[j].CreatedAt })
}

// updateRunningMetrics applies to running_pods and running_containers
// the difference an event made (a relist then sets them absolutely).
// Either status may be nil.
func (e *EventedPLEG) updateRunningMetrics(prev, next *PodStatus) {
	if d := b2f(podRunning(next)) - b2f(podRunning(prev)); d != 0 {
		e.metrics.RunningPods.Add(d)
	}
	var d [len(containerStateLabels)]int
	if prev != nil {
		for _, c := range prev.ContainerStatuses {
			d[stateIndex(c.GetState())]--
		}
	}
	if next != nil {
		for _, c := range next.ContainerStatuses {
			d[stateIndex(c.GetState())]++
		}
	}
	for i, l := range containerStateLabels {
		if d[i] != 0 {
			e.metrics.RunningContainers.WithLabelValues(l).Add(float64(d[i]))
		}
	}
}

func podRunning(s *PodStatus) bool {
	if s == nil {
		return false
	}
	for _, sb := range s.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
