package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/pleg"
)

// Event reasons and actions, as the kubelet names them where it has one.
const (
	ReasonStarted = "Started"
	ReasonExited  = "Exited"
	ReasonBackOff = "BackOff"

	ActionStart   = "StartContainer"
	ActionObserve = "ObserveExit"
	ActionRestart = "RestartContainer"
)

// Recorder records events; the events package's recorders (and
// client-go's events.EventRecorder) are ones.
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// StatusGetter gives the PLEG's view of a pod; *pleg.Cache is one.
type StatusGetter interface {
	Get(id types.UID) (*pleg.PodStatus, error)
}

// Config configures an Agent. Zero fields take the defaults.
type Config struct {
	// Since: transitions that happened before it (by the container's
	// started or finished time) are not recorded: they happened before
	// the agent watched, and an earlier agent recorded them. Default: the
	// clock's now at New.
	Since time.Time
	// Clock is the clock (clock.RealClock).
	Clock clock.PassiveClock
	// Logger logs (klog's).
	Logger *klog.Logger
	// Registerer, when set, gets the agent's metrics.
	Registerer prometheus.Registerer
	// Resume, when set, is a predecessor's State (Agent.State) to take
	// over; its Since replaces Since.
	Resume *State
}

// Agent records Events from PLEG events.
type Agent struct {
	events   <-chan *pleg.PodLifecycleEvent
	statuses StatusGetter
	rec      Recorder
	since    time.Time
	log      klog.Logger
	skipLog  *ratelog.Limiter

	recorded *prometheus.CounterVec
	skipped  *prometheus.CounterVec

	// containers holds what the agent knows of each container it
	// recorded something about, by ID, until it is removed.
	containers map[string]*containerInfo
	// sandboxes holds the IDs of the sandboxes seen, to forget a pod's
	// failures when its sandbox goes (the removal's event names the pod).
	sandboxes map[string]struct{}
	// failures counts the non-zero exits of each pod's containers, by
	// container name.
	failures map[types.UID]map[string]int
	// seriesCodes is the exit code of each pod's containers' Exited
	// series, by container name: the first non-zero code recorded.
	seriesCodes map[types.UID]map[string]int32
}

type containerInfo struct {
	pod                types.UID
	namespace, podName string
	name               string
	// started and died say what was already handled.
	started, died bool
	// resumed: known from a predecessor's state, so its transitions not
	// yet handled are news whatever their time (they happened while no
	// agent ran).
	resumed bool
}

// New returns an agent reading events, looking pods up in statuses and
// recording with rec.
func New(events <-chan *pleg.PodLifecycleEvent, statuses StatusGetter, rec Recorder, cfg Config) *Agent {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Since.IsZero() {
		cfg.Since = cfg.Clock.Now()
	}
	log := klog.Background().WithName("nodeagent")
	if cfg.Logger != nil {
		log = *cfg.Logger
	}
	a := &Agent{
		events: events, statuses: statuses, rec: rec, since: cfg.Since, log: log,
		skipLog: ratelog.New(cfg.Clock, 10*time.Second),
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeagent_events_recorded_total",
			Help: "Kubernetes Events recorded, by reason."}, []string{"reason"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeagent_events_skipped_total",
			Help: "PLEG events not turned into a Kubernetes Event because the pod or container could not be identified."}, []string{"why"}),
		containers:  map[string]*containerInfo{},
		sandboxes:   map[string]struct{}{},
		failures:    map[types.UID]map[string]int{},
		seriesCodes: map[types.UID]map[string]int32{},
	}
	if cfg.Resume != nil {
		a.resume(cfg.Resume)
	}
	if cfg.Registerer != nil {
		if err := errors.Join(cfg.Registerer.Register(a.recorded), cfg.Registerer.Register(a.skipped)); err != nil {
			log.Error(err, "registering nodeagent metrics")
		}
	}
	return a
}

// Run handles events until ctx ends or the channel is closed.
func (a *Agent) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-a.events:
			if !ok {
				return
			}
			a.Handle(ev)
		}
	}
}

// Recorded returns how many events of a reason the agent recorded.
func (a *Agent) Recorded(reason string) prometheus.Counter { return a.recorded.WithLabelValues(reason) }

// Handle turns one PLEG event into Kubernetes Events.
func (a *Agent) Handle(ev *pleg.PodLifecycleEvent) {
	id, ok := ev.Data.(string)
	if !ok || id == "" {
		return
	}
	if ev.Type == pleg.ContainerRemoved {
		delete(a.containers, id)
		if _, ok := a.sandboxes[id]; ok {
			delete(a.sandboxes, id)
			delete(a.failures, ev.ID)
			delete(a.seriesCodes, ev.ID)
		}
		return
	}
	if ev.Type != pleg.ContainerStarted && ev.Type != pleg.ContainerDied {
		return
	}
	// The status the event came from: the cache may already hold another
	// (a relist and a replayed event race), which need not have the
	// container.
	st := ev.Status
	if st == nil {
		var err error
		if st, err = a.statuses.Get(ev.ID); err != nil || st == nil {
			st = &pleg.PodStatus{ID: ev.ID}
		}
	}
	for _, sb := range st.SandboxStatuses {
		if sb.GetId() == id {
			a.sandboxes[id] = struct{}{}
			return // the pod's sandbox: nothing a user needs told
		}
	}
	var cs *runtimeapi.ContainerStatus
	for _, c := range st.ContainerStatuses {
		if c.GetId() == id {
			cs = c
			break
		}
	}
	info := a.containers[id]
	if info == nil {
		if cs == nil || st.Name == "" {
			a.skip("unknown container", ev, id)
			return
		}
		info = &containerInfo{pod: ev.ID, namespace: st.Namespace, podName: st.Name, name: cs.GetMetadata().GetName()}
		a.containers[id] = info
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: info.namespace, Name: info.podName,
		UID: info.pod, FieldPath: fmt.Sprintf("spec.containers{%s}", info.name)}

	switch ev.Type {
	case pleg.ContainerStarted:
		a.started(ref, info, cs)
	case pleg.ContainerDied:
		if info.died {
			return
		}
		info.died = true
		if cs.GetStartedAt() != 0 {
			// Started and exited between two observations (a relist saw
			// it exited; the stream's STARTED came late and was older
			// than what the cache held): its start is news too.
			a.started(ref, info, cs)
		}
		if cs == nil {
			a.record(ref, corev1.EventTypeWarning, ReasonExited, ActionObserve, "Container %s exited (exit code unknown)", info.name)
			return
		}
		if !info.resumed && cs.FinishedAt != 0 && time.Unix(0, cs.FinishedAt).Before(a.since) {
			return
		}
		if cs.ExitCode == 0 {
			a.record(ref, corev1.EventTypeNormal, ReasonExited, ActionObserve, "Container %s exited with code 0 (%s)", info.name, reasonOr(cs.Reason, "Completed"))
			return
		}
		a.record(ref, corev1.EventTypeWarning, ReasonExited, a.exitAction(info, cs.ExitCode), "Container %s exited with code %d (%s)", info.name, cs.ExitCode, reasonOr(cs.Reason, "Error"))
		byName := a.failures[info.pod]
		if byName == nil {
			byName = map[string]int{}
			a.failures[info.pod] = byName
		}
		byName[info.name]++
		if byName[info.name] >= 2 || cs.GetMetadata().GetAttempt() >= 1 {
			// It failed before: the kubelet restarts it with a growing
			// back-off. One note for every repeat, so they form a series.
			a.record(ref, corev1.EventTypeWarning, ReasonBackOff, ActionRestart,
				"Back-off restarting failed container %s in pod %s_%s(%s)", info.name, info.podName, info.namespace, info.pod)
		}
	}
}

// exitAction is the action of a failed exit's Event: ActionObserve for
// the code of the container's series (its first failure's), and
// ActionObserve+"Code"+N for another code, so that an exit with another
// code (containerd's 255 for a container that exited while it was down,
// an OOM kill's 137 in a loop of 1s) is an Event of its own: the events
// recorder folds occurrences that differ only in their note into one
// series, which would count it as one more "exited with code 1".
func (a *Agent) exitAction(info *containerInfo, code int32) string {
	byName := a.seriesCodes[info.pod]
	if byName == nil {
		byName = map[string]int32{}
		a.seriesCodes[info.pod] = byName
	}
	first, ok := byName[info.name]
	if !ok {
		byName[info.name] = code
		return ActionObserve
	}
	if code == first {
		return ActionObserve
	}
	return fmt.Sprintf("%sCode%d", ActionObserve, code)
}

// started records a container's start once, unless it started before the
// agent did.
func (a *Agent) started(ref *corev1.ObjectReference, info *containerInfo, cs *runtimeapi.ContainerStatus) {
	if info.started {
		return
	}
	info.started = true
	if !info.resumed && cs != nil && cs.StartedAt != 0 && time.Unix(0, cs.StartedAt).Before(a.since) {
		return
	}
	a.record(ref, corev1.EventTypeNormal, ReasonStarted, ActionStart, "Started container %s", info.name)
}

func (a *Agent) record(ref *corev1.ObjectReference, eventtype, reason, action, note string, args ...interface{}) {
	a.rec.Eventf(ref, nil, eventtype, reason, action, note, args...)
	a.recorded.WithLabelValues(reason).Inc()
}

func (a *Agent) skip(why string, ev *pleg.PodLifecycleEvent, id string) {
	a.skipped.WithLabelValues(why).Inc()
	if ok, n := a.skipLog.Allow(); ok {
		a.log.Info("Not recording an event: "+why, "pod", ev.ID, "container", id, "type", ev.Type, "suppressed", n)
	}
}

func reasonOr(r, def string) string {
	if r == "" {
		return def
	}
	return r
}
