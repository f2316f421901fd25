package pleg

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
)

// Upstream's constants (pkg/kubelet/kubelet.go).
const (
	// DefaultChannelCapacity is the PLEG channel's capacity.
	DefaultChannelCapacity = 1000
	// GenericRelistPeriod and GenericRelistThreshold are the generic
	// PLEG's: relist every second, unhealthy after 3 minutes without a
	// successful relist.
	GenericRelistPeriod    = 1 * time.Second
	GenericRelistThreshold = 3 * time.Minute
	// EventedRelistPeriod and EventedRelistThreshold are the generic
	// PLEG's while the evented PLEG follows a live stream: relisting stays
	// mandatory, because every runtime can lose events.
	EventedRelistPeriod    = 300 * time.Second
	EventedRelistThreshold = 10 * time.Minute
)

const (
	// relistTimeout bounds one relist's runtime calls.
	relistTimeout = 2 * time.Minute
	// tombstoneTTL is how long a deleted pod's tombstone refuses late
	// events; events are never this late on a live stream, and a
	// reconnect is followed by a relist.
	tombstoneTTL = 15 * time.Minute
	// logInterval spaces out repeated log lines of one condition.
	logInterval = 10 * time.Second
)

// GenericConfig configures a generic PLEG. Zero fields take the defaults.
type GenericConfig struct {
	// RelistPeriod is the time between relists (GenericRelistPeriod).
	RelistPeriod time.Duration
	// RelistThreshold is how long without a successful relist makes the
	// PLEG unhealthy (GenericRelistThreshold).
	RelistThreshold time.Duration
	// ChannelCapacity is the event channel's capacity
	// (DefaultChannelCapacity).
	ChannelCapacity int
	// Clock is the node's clock (clock.RealClock).
	Clock clock.Clock
	// Metrics receives the PLEG's metrics (NewMetrics, unregistered).
	Metrics *Metrics
	// Logger logs (klog's).
	Logger *logr.Logger
}

func (c GenericConfig) withDefaults() GenericConfig {
	if c.RelistPeriod <= 0 {
		c.RelistPeriod = GenericRelistPeriod
	}
	if c.RelistThreshold <= 0 {
		c.RelistThreshold = GenericRelistThreshold
	}
	if c.ChannelCapacity <= 0 {
		c.ChannelCapacity = DefaultChannelCapacity
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.Logger == nil {
		l := klog.Background().WithName("pleg")
		c.Logger = &l
	}
	return c
}

// podRecord is a pod as the previous and the current relist saw it.
type podRecord struct {
	old, current *runtimePod
}

// GenericPLEG relists the runtime periodically and turns what changed
// since the last relist into PodLifecycleEvents, updating the cache for
// the pods that changed.
type GenericPLEG struct {
	runtime Runtime
	cache   *Cache
	emitter *emitter
	clock   clock.Clock
	metrics *Metrics
	log     logr.Logger

	relistLimit *ratelog.Limiter
	inspLimit   *ratelog.Limiter

	// relistMu serializes relists and guards what they own.
	relistMu   sync.Mutex
	records    map[types.UID]*podRecord
	reinspect  map[types.UID]bool
	lastRelist time.Time // start of the last relist attempt
	// started numbers relist attempts; done is the number of the last
	// successful one. The evented PLEG uses them to know that a relist
	// began after some moment (a reconnect, a discard) and completed.
	started, done atomic.Int64
	// countMissed says whether transitions the relist finds count as
	// missed by the event stream (set by the evented PLEG).
	countMissed func() bool
	// missedCutoff says how recent a change may be and still be in flight
	// on the stream rather than missed.
	missedCutoff time.Duration

	mu         sync.Mutex
	period     time.Duration
	threshold  time.Duration
	relistTime time.Time // start of the last successful relist
	running    bool
	stop       context.CancelFunc
	stopped    chan struct{}
	wake       chan struct{} // relist now
	reschedule chan struct{} // the period changed
}

var _ PodLifecycleEventGenerator = (*GenericPLEG)(nil)

// NewGeneric returns a generic PLEG over rt with its own cache and event
// channel.
func NewGeneric(rt Runtime, cfg GenericConfig) *GenericPLEG {
	cfg = cfg.withDefaults()
	ch := make(chan *PodLifecycleEvent, cfg.ChannelCapacity)
	return newGeneric(rt, NewCache(), ch, cfg)
}

func newGeneric(rt Runtime, cache *Cache, ch chan *PodLifecycleEvent, cfg GenericConfig) *GenericPLEG {
	log := *cfg.Logger
	return &GenericPLEG{
		runtime:     rt,
		cache:       cache,
		emitter:     newEmitter(ch, cfg.Metrics, log, ratelog.New(cfg.Clock, logInterval)),
		clock:       cfg.Clock,
		metrics:     cfg.Metrics,
		log:         log,
		relistLimit: ratelog.New(cfg.Clock, logInterval),
		inspLimit:   ratelog.New(cfg.Clock, logInterval),
		records:     map[types.UID]*podRecord{},
		reinspect:   map[types.UID]bool{},
		period:      cfg.RelistPeriod,
		threshold:   cfg.RelistThreshold,
		wake:        make(chan struct{}, 1),
		reschedule:  make(chan struct{}, 1),
	}
}

// Watch returns the event channel.
func (g *GenericPLEG) Watch() <-chan *PodLifecycleEvent { return g.emitter.ch }

// Cache returns the pod status cache the PLEG keeps.
func (g *GenericPLEG) Cache() *Cache { return g.cache }

// Start relists at once and then every relist period, until Stop.
func (g *GenericPLEG) Start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.running, g.stop, g.stopped = true, cancel, make(chan struct{})
	go g.loop(ctx, g.stopped)
}

// Stop stops relisting and waits for a relist in progress to end.
func (g *GenericPLEG) Stop() {
	g.mu.Lock()
	if !g.running {
		g.mu.Unlock()
		return
	}
	g.running = false
	stop, done := g.stop, g.stopped
	g.mu.Unlock()
	stop()
	<-done
}

func (g *GenericPLEG) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		g.relist(ctx)
		if !g.waitNext(ctx) {
			return
		}
	}
}

// waitNext waits until the next relist is due, or asked for; false when
// the PLEG is stopping.
func (g *GenericPLEG) waitNext(ctx context.Context) bool {
	for {
		g.relistMu.Lock()
		next := g.lastRelist.Add(g.Period())
		g.relistMu.Unlock()
		t := deadlineTimer(g.clock, next)
		if t == nil {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-g.wake:
			t.Stop()
			return true
		case <-g.reschedule:
			t.Stop() // and wait again with the new period
		case <-t.C():
			return true
		}
	}
}

// RequestRelist asks the running PLEG for a relist now (requests made
// while one is pending are coalesced).
func (g *GenericPLEG) RequestRelist() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// SetRelistPeriod changes the relist period and health threshold.
func (g *GenericPLEG) SetRelistPeriod(period, threshold time.Duration) {
	g.mu.Lock()
	changed := g.period != period
	g.period, g.threshold = period, threshold
	g.mu.Unlock()
	if changed {
		select {
		case g.reschedule <- struct{}{}:
		default:
		}
	}
}

// Period returns the relist period and Threshold the health threshold.
func (g *GenericPLEG) Period() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.period
}

// Threshold returns the health threshold.
func (g *GenericPLEG) Threshold() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.threshold
}

// Healthy reports whether the last successful relist is recent enough.
func (g *GenericPLEG) Healthy() (bool, error) {
	g.mu.Lock()
	rt, threshold := g.relistTime, g.threshold
	g.mu.Unlock()
	if rt.IsZero() {
		return false, fmt.Errorf("pleg has yet to be successful")
	}
	g.metrics.LastSeen.Set(float64(rt.Unix()))
	if elapsed := g.clock.Since(rt); elapsed > threshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, threshold)
	}
	return true, nil
}

// Relist lists the runtime once, sends the events of what changed since
// the previous relist and updates the cache.
func (g *GenericPLEG) Relist() { g.relist(context.Background()) }

func (g *GenericPLEG) relist(parent context.Context) {
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	ctx, cancel := context.WithTimeout(parent, relistTimeout)
	defer cancel()

	seq := g.started.Add(1)
	start := g.clock.Now()
	if !g.lastRelist.IsZero() {
		g.metrics.RelistInterval.Observe(start.Sub(g.lastRelist).Seconds())
	}
	g.lastRelist = start
	defer func() { g.metrics.RelistDuration.Observe(g.clock.Since(start).Seconds()) }()

	pods, err := listPods(ctx, g.runtime)
	if err != nil {
		if ctx.Err() == nil {
			if ok, n := g.relistLimit.Allow(); ok {
				g.log.Error(err, "Relist failed", "suppressed", n)
			}
		}
		return
	}
	g.mu.Lock()
	g.relistTime = start
	g.mu.Unlock()
	g.updateRunningMetrics(pods)

	for _, r := range g.records {
		r.current = nil
	}
	for id, p := range pods {
		r := g.records[id]
		if r == nil {
			r = &podRecord{}
			g.records[id] = r
		}
		r.current = p
	}
	countMissed := g.done.Load() > 0 && g.countMissed != nil && g.countMissed()
	cutoff := start.Add(-g.missedCutoff)

	for id, r := range g.records {
		evs := computeEvents(id, r.old, r.current)
		// A pod is inspected when it changed, when its last inspection
		// failed, or when the cache holds a transient CREATED snapshot of
		// it, which only an inspection (or the next event) replaces.
		if len(evs) == 0 && !g.reinspect[id] && !g.cache.transient(id) {
			g.advance(id, r)
			continue
		}
		if r.current == nil {
			// The pod is gone.
			g.cache.Delete(id, start)
			delete(g.reinspect, id)
			g.advance(id, r)
			g.send(id, evs, countMissed, nil, cutoff)
			continue
		}
		st, err := inspect(ctx, g.runtime, r.current, start, g.clock.Now())
		if ctx.Err() != nil {
			return // stopping (or timed out): leave everything for the next relist
		}
		if err != nil {
			if ok, n := g.inspLimit.Allow(); ok {
				g.log.Error(err, "Inspecting pod failed; its events wait for the next relist", "pod", id, "suppressed", n)
			}
			g.reinspect[id] = true
			g.cache.Set(id, nil, err, start, false)
			continue
		}
		if g.cache.Set(id, st, nil, st.TimeStamp, false) == Rejected {
			// The cache holds something newer (an event applied since the
			// runtime was read): drop these events and diff again next time.
			continue
		}
		wasReinspect := g.reinspect[id]
		delete(g.reinspect, id)
		g.advance(id, r)
		if len(evs) == 0 && wasReinspect {
			evs = []*PodLifecycleEvent{{ID: id, Type: PodSync}}
		}
		g.send(id, evs, countMissed, st, cutoff)
	}
	// Pods the cache holds from events that no relist lists (a stale event
	// replayed for a pod long gone) are gone too.
	for _, id := range g.cache.sweep(func(id types.UID) bool { return pods[id] != nil }, start) {
		g.emitter.emit(g.emitter.removalEvents(id))
	}
	g.emitter.retain(func(id types.UID) bool { return g.records[id] != nil || g.cache.has(id) })
	g.cache.UpdateTime(start)
	g.cache.forgetTombstones(start.Add(-tombstoneTTL))
	g.done.Store(seq)
}

// advance makes the current relist's view of a pod the old one. What the
// emitter sent about a pod that is gone is kept until this relist's events
// are sent (so the stream's reports of its removal are not repeated) and
// dropped by the emitter's retain at the end of the relist.
func (g *GenericPLEG) advance(id types.UID, r *podRecord) {
	if r.current == nil {
		delete(g.records, id)
		return
	}
	g.emitter.prune(id, r.current.states())
	r.old, r.current = r.current, nil
}

// send emits a pod's events, computed from st, and, when asked, counts
// the containers whose transition no stream event had reported (those
// older than cutoff: younger ones may still be on their way).
func (g *GenericPLEG) send(id types.UID, evs []*PodLifecycleEvent, countMissed bool, st *PodStatus, cutoff time.Time) {
	for _, ev := range evs {
		ev.Status = st
	}
	news := g.emitter.emit(evs)
	if !countMissed {
		return
	}
	for cid := range news {
		if !changedBefore(st, cid, cutoff) {
			continue
		}
		g.metrics.MissedEvents.Inc()
		g.log.V(2).Info("Relist found a transition the event stream did not report", "pod", id, "container", cid)
	}
}

// changedBefore reports whether a container's last change, as its status
// tells, is older than cutoff; true when the status does not tell.
func changedBefore(st *PodStatus, id string, cutoff time.Time) bool {
	if st == nil {
		return true
	}
	for _, c := range st.ContainerStatuses {
		if c.GetId() != id {
			continue
		}
		last := max(c.CreatedAt, c.StartedAt, c.FinishedAt)
		return last == 0 || time.Unix(0, last).Before(cutoff)
	}
	for _, s := range st.SandboxStatuses {
		if s.GetId() == id && s.State == runtimeapi.PodSandboxState_SANDBOX_READY && s.CreatedAt != 0 {
			return time.Unix(0, s.CreatedAt).Before(cutoff)
		}
	}
	return true
}

// updateRunningMetrics sets running_pods and running_containers from a
// relist.
func (g *GenericPLEG) updateRunningMetrics(pods map[types.UID]*runtimePod) {
	var counts [len(containerStateLabels)]int
	running := 0
	for _, p := range pods {
		for _, s := range p.Sandboxes {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				running++
				break
			}
		}
		for _, c := range p.Containers {
			counts[stateIndex(c.State)]++
		}
	}
	g.metrics.RunningPods.Set(float64(running))
	for i, l := range containerStateLabels {
		g.metrics.RunningContainers.WithLabelValues(l).Set(float64(counts[i]))
	}
}

// containerStateLabels are running_containers' label values, indexed by
// stateIndex.
var containerStateLabels = [...]string{"created", "running", "exited", "unknown"}

// stateIndex is a container state's index in containerStateLabels.
func stateIndex(s runtimeapi.ContainerState) int {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return 0
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return 1
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return 2
	}
	return 3
}

// computeEvents diffs a pod's old and current views, ID by ID (sandboxes
// included), with upstream's rules; events are ordered by ID.
func computeEvents(id types.UID, old, cur *runtimePod) []*PodLifecycleEvent {
	o, c := old.states(), cur.states()
	ids := make([]string, 0, len(o)+len(c))
	for k := range o {
		ids = append(ids, k)
	}
	for k := range c {
		if _, ok := o[k]; !ok {
			ids = append(ids, k)
		}
	}
	sort.Strings(ids)
	var evs []*PodLifecycleEvent
	for _, cid := range ids {
		evs = append(evs, transition(id, cid, o[cid], c[cid])...)
	}
	return evs
}

// transition is the events of one container going from one state to
// another (a missing state is non-existent).
func transition(pod types.UID, id string, from, to containerState) []*PodLifecycleEvent {
	if from == to {
		return nil
	}
	ev := func(t PodLifeCycleEventType) *PodLifecycleEvent {
		return &PodLifecycleEvent{ID: pod, Type: t, Data: id}
	}
	switch to {
	case stateRunning:
		return []*PodLifecycleEvent{ev(ContainerStarted)}
	case stateExited:
		return []*PodLifecycleEvent{ev(ContainerDied)}
	case stateUnknown:
		return []*PodLifecycleEvent{ev(ContainerChanged)}
	}
	if from == stateExited {
		return []*PodLifecycleEvent{ev(ContainerRemoved)}
	}
	return []*PodLifecycleEvent{ev(ContainerDied), ev(ContainerRemoved)}
}
