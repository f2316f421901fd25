package fakecri

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Labels and annotations the kubelet puts on sandboxes and containers; the
// fake sets them the same way, so a kubelet-style client can group
// containers by pod with the LabelPodUID label.
const (
	// LabelPodName is the pod name label of sandboxes and containers.
	LabelPodName = "io.kubernetes.pod.name"
	// LabelPodNamespace is the pod namespace label of sandboxes and containers.
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	// LabelPodUID is the pod UID label of sandboxes and containers.
	LabelPodUID = "io.kubernetes.pod.uid"
	// LabelContainerName is the container name label of containers.
	LabelContainerName = "io.kubernetes.container.name"
	// AnnotationRestartCount is the container annotation holding its attempt.
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
)

// Defaults of Options.
const (
	// DefaultBlockBuffer is the per-subscriber buffer of BufferBlock
	// (containerd 2.x's eventq).
	DefaultBlockBuffer = 100
	// DefaultDropBuffer is the shared buffer of BufferDrop and
	// BufferDropBroadcast (containerd 1.7's containerEventsChan, CRI-O's
	// ContainerEventsChan).
	DefaultDropBuffer = 1000
	// DefaultStaleRetention is how long BufferBlock keeps events while no
	// one is subscribed (containerd 2.x's discardAfter).
	DefaultStaleRetention = 5 * time.Minute
	// DefaultRuntimeName is what Version reports as runtime_name.
	DefaultRuntimeName = "fakecri"
	// DefaultRuntimeVersion is what Version reports as runtime_version.
	DefaultRuntimeVersion = "0.1.0"
)

// ErrNotFound is returned (wrapped) by the state API for an unknown
// sandbox or container ID. The gRPC server maps it to codes.NotFound.
var ErrNotFound = errors.New("not found")

// ErrInvalidState is returned (wrapped) by the state API for a transition a
// runtime would refuse, such as starting a container that is not CREATED.
// The gRPC server maps it to codes.FailedPrecondition.
var ErrInvalidState = errors.New("invalid state")

// ErrExists is returned (wrapped) when an explicit ID is already in use.
var ErrExists = errors.New("already exists")

// BufferMode is how the runtime buffers container events between the
// state change that produces them and the GetContainerEvents streams.
type BufferMode int

const (
	// BufferBlock is containerd 2.x: every subscriber has its own buffer of
	// Options.Buffer events (default 100) and every event goes to every
	// subscriber; publishing blocks while a subscriber's buffer is full, so
	// a client that does not read stalls the state change (RunPodSandbox,
	// StopContainer, ...) that produced the event. Nothing is dropped.
	// While no one is subscribed, events are kept for
	// Options.StaleRetention (default 5 min, runtime clock) and replayed,
	// in order, to the next subscriber.
	BufferBlock BufferMode = iota
	// BufferDrop is containerd 1.7: one shared buffer of Options.Buffer
	// events (default 1000), filled with a non-blocking send that drops and
	// counts (Stats.Dropped) the event when the buffer is full. Every
	// stream reads the same buffer, so with two subscribers each event goes
	// to only one of them; while no one is subscribed events wait in the
	// buffer and go, stale, to the next subscriber.
	BufferDrop
	// BufferDropBroadcast is CRI-O: the shared buffer of BufferDrop
	// (non-blocking, drops and counts when full), drained by one
	// broadcaster, started with the first subscription, that hands each
	// event to every subscriber in turn and waits for each. A slow
	// subscriber stalls the broadcaster, the buffer fills and events are
	// dropped for all. Before the first subscription events wait in the
	// buffer; afterwards, events published while no one is subscribed are
	// consumed by the broadcaster and lost (Stats.Lost).
	BufferDropBroadcast
)

// String returns the mode's name as ParseBufferMode accepts it.
func (m BufferMode) String() string {
	switch m {
	case BufferBlock:
		return "block"
	case BufferDrop:
		return "drop"
	case BufferDropBroadcast:
		return "broadcast"
	}
	return "BufferMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseBufferMode parses "block", "drop" or "broadcast".
func ParseBufferMode(s string) (BufferMode, error) {
	switch s {
	case "block":
		return BufferBlock, nil
	case "drop":
		return BufferDrop, nil
	case "broadcast":
		return BufferDropBroadcast, nil
	}
	return 0, fmt.Errorf("unknown buffer mode %q (want block, drop or broadcast)", s)
}

// Options configure a Runtime. The zero value is valid.
type Options struct {
	// Clock is the runtime clock: it stamps created_at, started_at,
	// finished_at, event created_at and PodSandboxStatusResponse.timestamp
	// (in ns since the epoch), and times Delay, Refuse, the stale-event
	// retention and the scenarios. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Buffer is the event buffer size: per subscriber in BufferBlock
	// (default DefaultBlockBuffer, 100), shared in the drop modes (default
	// DefaultDropBuffer, 1000).
	Buffer int
	// Mode is the event buffering mode. Default BufferBlock.
	Mode BufferMode
	// StaleRetention is how long BufferBlock keeps events published while
	// no one is subscribed, to replay them to the next subscriber. Default
	// DefaultStaleRetention (5 min); negative: keep none.
	StaleRetention time.Duration
	// StatusWithContainers makes PodSandboxStatus fill containers_statuses
	// and timestamp, as CRI-O with enable_pod_events does. Default false:
	// neither is set, as containerd does.
	StatusWithContainers bool
	// MonotonicTimestamps makes every event's created_at strictly greater
	// than the previous one's, adding 1 ns on ties (a fake clock that is not
	// stepped otherwise gives equal stamps). Default false: created_at is
	// exactly the runtime clock.
	MonotonicTimestamps bool
	// EagerStreamHeaders makes GetContainerEvents send the response headers
	// as soon as the stream is subscribed, so a client can tell an open
	// stream from one that has not been answered yet. Default false: like
	// containerd and CRI-O, headers go out with the first event (gRPC's
	// default), and an idle stream shows nothing.
	EagerStreamHeaders bool
	// RuntimeName and RuntimeVersion are what Version reports. Defaults
	// DefaultRuntimeName and DefaultRuntimeVersion.
	RuntimeName, RuntimeVersion string
	// Logger receives what the runtime does: state changes and faults at
	// Info, events and RPCs at Debug. Default: discard.
	Logger *slog.Logger
}

// Runtime is a scriptable fake CRI runtime: an in-memory set of sandboxes
// and containers, changed through the state API (RunPodSandbox,
// CreateContainer, ...) or scenarios, served over the CRI RuntimeService
// (see Server, Register, Listen, Dial), with the container event stream of
// a real runtime and injectable faults (see Faults).
//
// All methods are safe for concurrent use. Call Close when done: it ends
// streams and stops the servers and goroutines the runtime started.
type Runtime struct {
	opts Options
	clk  clock.WithTicker
	log  *slog.Logger

	// opMu serializes state changes and the publication of their events,
	// so events leave in the order of the changes. It is held while a
	// publisher blocks (BufferBlock); reads never take it.
	opMu sync.Mutex

	mu          sync.RWMutex // guards the state below
	sandboxes   map[string]*sandbox
	containers  map[string]*container
	nextSandbox uint64
	nextCtr     uint64
	seq         uint64
	lastStamp   int64

	callsMu sync.Mutex
	calls   map[string]int

	faultsMu    sync.Mutex
	faults      Faults
	refuseUntil time.Time
	hook        RPCHook

	ev *eventQueue

	srvMu   sync.Mutex
	servers []*serving
	closed  bool
}

type sandbox struct {
	id          string
	seq         uint64
	uid         string
	namespace   string
	name        string
	attempt     uint32
	state       runtimeapi.PodSandboxState
	createdAt   int64
	ip          string
	labels      map[string]string
	annotations map[string]string
	containers  []string // IDs, creation order
}

type container struct {
	id          string
	sandboxID   string
	seq         uint64
	name        string
	attempt     uint32
	image       string
	state       runtimeapi.ContainerState
	createdAt   int64
	startedAt   int64
	finishedAt  int64
	exitCode    int32
	reason      string
	labels      map[string]string
	annotations map[string]string
	logPath     string
}

// New returns a Runtime with no sandboxes.
func New(opts Options) *Runtime {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Buffer <= 0 {
		if opts.Mode == BufferBlock {
			opts.Buffer = DefaultBlockBuffer
		} else {
			opts.Buffer = DefaultDropBuffer
		}
	}
	if opts.StaleRetention == 0 {
		opts.StaleRetention = DefaultStaleRetention
	}
	if opts.RuntimeName == "" {
		opts.RuntimeName = DefaultRuntimeName
	}
	if opts.RuntimeVersion == "" {
		opts.RuntimeVersion = DefaultRuntimeVersion
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		opts:       opts,
		clk:        opts.Clock,
		log:        opts.Logger,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		calls:      map[string]int{},
	}
	r.ev = newEventQueue(r)
	return r
}

// Clock returns the runtime clock.
func (r *Runtime) Clock() clock.WithTicker { return r.clk }

// Close ends every event stream with codes.Unavailable, stops the servers
// started by Listen and Dial, and stops the runtime's goroutines. State
// changes after Close still work but their events are lost. Close is
// idempotent.
func (r *Runtime) Close() {
	r.srvMu.Lock()
	r.closed = true
	servers := r.servers
	r.servers = nil
	r.srvMu.Unlock()
	r.ev.close()
	for _, s := range servers {
		s.stop()
	}
}

// SandboxSpec describes a sandbox for RunPodSandboxSpec.
type SandboxSpec struct {
	// ID is the sandbox ID. Default: the next free "s<N>".
	ID string
	// UID, Namespace, Name and Attempt are the PodSandboxMetadata.
	// Namespace defaults to "default", Name to UID, UID to ID.
	UID, Namespace, Name string
	// Attempt is the sandbox attempt.
	Attempt uint32
	// IP is the sandbox IP. Default: "10.0.X.Y" from a counter.
	IP string
	// Labels and Annotations are added to the kubelet's pod labels.
	Labels, Annotations map[string]string
}

// ContainerSpec describes a container for CreateContainerSpec.
type ContainerSpec struct {
	// ID is the container ID. Default: the next free "c<N>".
	ID string
	// SandboxID is the sandbox the container belongs to. Required.
	SandboxID string
	// Name is the container name (ContainerMetadata.name). Required.
	Name string
	// Attempt is the container attempt (ContainerMetadata.attempt).
	Attempt uint32
	// Image is the image reference. Default "fake.invalid/<name>:latest".
	Image string
	// Labels and Annotations are added to the kubelet's container labels.
	Labels, Annotations map[string]string
}

// nowNS returns the runtime clock in ns.
func (r *Runtime) nowNS() int64 { return r.clk.Now().UnixNano() }

// idInUse reports whether id names a sandbox or a container.
func (r *Runtime) idInUse(id string) bool {
	_, a := r.sandboxes[id]
	_, b := r.containers[id]
	return a || b
}

// RunPodSandbox creates and starts a sandbox for the pod (uid, namespace,
// name, attempt), READY with an IP, and emits its CREATED and STARTED
// events (container_id = sandbox ID). It returns the sandbox ID.
func (r *Runtime) RunPodSandbox(uid, namespace, name string, attempt uint32) string {
	id, _ := r.RunPodSandboxSpec(SandboxSpec{UID: uid, Namespace: namespace, Name: name, Attempt: attempt})
	return id
}

// RunPodSandboxSpec is RunPodSandbox with every field settable. It fails
// only if spec.ID is already in use.
func (r *Runtime) RunPodSandboxSpec(spec SandboxSpec) (string, error) {
	var id string
	err := r.mutate(func() ([]*resp, error) {
		id = spec.ID
		if id != "" && r.idInUse(id) {
			return nil, fmt.Errorf("sandbox %q: %w", id, ErrExists)
		}
		if id == "" {
			id = r.freeID("s", &r.nextSandbox)
		} else {
			r.nextSandbox++
		}
		n := r.nextSandbox
		if spec.UID == "" {
			spec.UID = id
		}
		if spec.Namespace == "" {
			spec.Namespace = "default"
		}
		if spec.Name == "" {
			spec.Name = spec.UID
		}
		if spec.IP == "" {
			spec.IP = fmt.Sprintf("10.0.%d.%d", (n/254)%256, n%254+1)
		}
		labels := maps.Clone(spec.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelPodName] = spec.Name
		labels[LabelPodNamespace] = spec.Namespace
		labels[LabelPodUID] = spec.UID
		r.seq++
		sb := &sandbox{
			id: id, seq: r.seq, uid: spec.UID, namespace: spec.Namespace, name: spec.Name, attempt: spec.Attempt,
			state: runtimeapi.PodSandboxState_SANDBOX_READY, createdAt: r.nowNS(), ip: spec.IP,
			labels: labels, annotations: maps.Clone(spec.Annotations),
		}
		r.sandboxes[id] = sb
		evs := []*resp{
			r.eventLocked(id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb),
			r.eventLocked(id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb),
		}
		r.log.Info("RunPodSandbox", "sandbox", id, "uid", spec.UID, "namespace", spec.Namespace, "name", spec.Name, "attempt", spec.Attempt, "ip", spec.IP)
		return evs, nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// mutate runs fn, a state change, under opMu and mu, then publishes the
// events it returns, in order, still under opMu (so events leave in the
// order of the changes). If fn fails, nothing is published and its error
// is returned.
func (r *Runtime) mutate(fn func() ([]*resp, error)) error {
	r.opMu.Lock()
	defer r.opMu.Unlock()
	r.mu.Lock()
	evs, err := fn()
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.ev.publish(evs...)
	return nil
}

// freeID returns prefix+N for the first N after *next that names neither a
// sandbox nor a container, and leaves *next at N. The caller holds mu.
func (r *Runtime) freeID(prefix string, next *uint64) string {
	for {
		*next++
		if id := prefix + strconv.FormatUint(*next, 10); !r.idInUse(id) {
			return id
		}
	}
}

// StopPodSandbox stops a sandbox: its RUNNING (or UNKNOWN) containers exit
// with code 137 (each with a STOPPED event), then the sandbox becomes
// NOTREADY, loses its IP (the network is torn down, as in containerd) and
// emits STOPPED. Stopping a NOTREADY sandbox does nothing.
func (r *Runtime) StopPodSandbox(id string) error {
	return r.mutate(func() ([]*resp, error) {
		sb, ok := r.sandboxes[id]
		if !ok {
			return nil, fmt.Errorf("stop sandbox %q: %w", id, ErrNotFound)
		}
		evs := r.stopSandboxLocked(sb)
		if len(evs) > 0 {
			r.log.Info("StopPodSandbox", "sandbox", id)
		}
		return evs, nil
	})
}

// stopSandboxLocked stops sb (see StopPodSandbox) and returns the events,
// none if it is already NOTREADY. The caller holds mu.
func (r *Runtime) stopSandboxLocked(sb *sandbox) []*resp {
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		return nil
	}
	var evs []*resp
	for _, cid := range sb.containers {
		if ev := r.stopLocked(r.containers[cid], sb, 137); ev != nil {
			evs = append(evs, ev)
		}
	}
	sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	sb.ip = ""
	return append(evs, r.eventLocked(sb.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb))
}

// stopLocked makes c, in sandbox sb, exit with exitCode if it is RUNNING or
// UNKNOWN and returns its STOPPED event; otherwise it does nothing and
// returns nil. The caller holds mu.
func (r *Runtime) stopLocked(c *container, sb *sandbox, exitCode int32) *resp {
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING && c.state != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		return nil
	}
	r.exitLocked(c, exitCode)
	return r.eventLocked(c.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, sb)
}

// RemovePodSandbox removes a sandbox: it is stopped first if READY (see
// StopPodSandbox), its containers are removed (a DELETED event each), then
// the sandbox is removed and emits DELETED with its last status (NOTREADY)
// and no container statuses.
func (r *Runtime) RemovePodSandbox(id string) error {
	return r.mutate(func() ([]*resp, error) {
		sb, ok := r.sandboxes[id]
		if !ok {
			return nil, fmt.Errorf("remove sandbox %q: %w", id, ErrNotFound)
		}
		evs := r.stopSandboxLocked(sb)
		for len(sb.containers) > 0 {
			cid := sb.containers[0]
			sb.containers = sb.containers[1:]
			delete(r.containers, cid)
			evs = append(evs, r.eventLocked(cid, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb))
		}
		delete(r.sandboxes, id)
		evs = append(evs, r.eventLocked(id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb))
		r.log.Info("RemovePodSandbox", "sandbox", id)
		return evs, nil
	})
}

// CreateContainer creates a container, CREATED, in a sandbox and emits its
// CREATED event. It returns the container ID, or "" if the sandbox does not
// exist (use CreateContainerSpec to get the error).
func (r *Runtime) CreateContainer(sandboxID, name string, attempt uint32) string {
	id, err := r.CreateContainerSpec(ContainerSpec{SandboxID: sandboxID, Name: name, Attempt: attempt})
	if err != nil {
		r.log.Error("CreateContainer", "err", err)
	}
	return id
}

// CreateContainerSpec is CreateContainer with every field settable.
func (r *Runtime) CreateContainerSpec(spec ContainerSpec) (string, error) {
	if spec.Name == "" {
		return "", errors.New("create container: empty name")
	}
	var id string
	err := r.mutate(func() ([]*resp, error) {
		sb, ok := r.sandboxes[spec.SandboxID]
		if !ok {
			return nil, fmt.Errorf("create container %q: sandbox %q: %w", spec.Name, spec.SandboxID, ErrNotFound)
		}
		id = spec.ID
		if id != "" && r.idInUse(id) {
			return nil, fmt.Errorf("container %q: %w", id, ErrExists)
		}
		if id == "" {
			id = r.freeID("c", &r.nextCtr)
		}
		if spec.Image == "" {
			spec.Image = "fake.invalid/" + spec.Name + ":latest"
		}
		labels := maps.Clone(spec.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelPodName] = sb.name
		labels[LabelPodNamespace] = sb.namespace
		labels[LabelPodUID] = sb.uid
		labels[LabelContainerName] = spec.Name
		annotations := maps.Clone(spec.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationRestartCount] = strconv.FormatUint(uint64(spec.Attempt), 10)
		r.seq++
		c := &container{
			id: id, sandboxID: sb.id, seq: r.seq, name: spec.Name, attempt: spec.Attempt, image: spec.Image,
			state: runtimeapi.ContainerState_CONTAINER_CREATED, createdAt: r.nowNS(),
			labels: labels, annotations: annotations,
			logPath: fmt.Sprintf("/var/log/pods/%s_%s_%s/%s/%d.log", sb.namespace, sb.name, sb.uid, spec.Name, spec.Attempt),
		}
		r.containers[id] = c
		sb.containers = append(sb.containers, id)
		ev := r.eventLocked(id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb)
		r.log.Info("CreateContainer", "container", id, "sandbox", sb.id, "name", spec.Name, "attempt", spec.Attempt)
		return []*resp{ev}, nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// StartContainer starts a CREATED container: RUNNING, started_at = now,
// and a STARTED event.
func (r *Runtime) StartContainer(id string) error {
	return r.mutate(func() ([]*resp, error) {
		c, ok := r.containers[id]
		if !ok {
			return nil, fmt.Errorf("start container %q: %w", id, ErrNotFound)
		}
		if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
			return nil, fmt.Errorf("start container %q in state %s: %w", id, c.state, ErrInvalidState)
		}
		c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
		c.startedAt = r.nowNS()
		ev := r.eventLocked(id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, r.sandboxes[c.sandboxID])
		r.log.Info("StartContainer", "container", id)
		return []*resp{ev}, nil
	})
}

// StopContainer makes a RUNNING (or UNKNOWN) container exit with exitCode:
// EXITED, finished_at = now, reason "Completed" for 0 and "Error"
// otherwise, and a STOPPED event. Stopping a CREATED or EXITED container
// does nothing, as in containerd.
func (r *Runtime) StopContainer(id string, exitCode int32) error {
	return r.mutate(func() ([]*resp, error) {
		c, ok := r.containers[id]
		if !ok {
			return nil, fmt.Errorf("stop container %q: %w", id, ErrNotFound)
		}
		ev := r.stopLocked(c, r.sandboxes[c.sandboxID], exitCode)
		if ev == nil {
			return nil, nil
		}
		r.log.Info("StopContainer", "container", id, "exitCode", exitCode)
		return []*resp{ev}, nil
	})
}

// exitLocked makes c EXITED with exitCode at the current time. The caller
// holds mu.
func (r *Runtime) exitLocked(c *container, exitCode int32) {
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = r.nowNS()
	c.exitCode = exitCode
	c.reason = "Completed"
	if exitCode != 0 {
		c.reason = "Error"
	}
}

// RemoveContainer removes a container; a RUNNING one is stopped first
// (exit 137, STOPPED event). It emits DELETED after the container is gone,
// so the event's containers_statuses no longer list it.
func (r *Runtime) RemoveContainer(id string) error {
	return r.mutate(func() ([]*resp, error) {
		c, ok := r.containers[id]
		if !ok {
			return nil, fmt.Errorf("remove container %q: %w", id, ErrNotFound)
		}
		sb := r.sandboxes[c.sandboxID]
		var evs []*resp
		if ev := r.stopLocked(c, sb, 137); ev != nil {
			evs = append(evs, ev)
		}
		delete(r.containers, id)
		for i, cid := range sb.containers {
			if cid == id {
				sb.containers = append(sb.containers[:i:i], sb.containers[i+1:]...)
				break
			}
		}
		evs = append(evs, r.eventLocked(id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, sb))
		r.log.Info("RemoveContainer", "container", id)
		return evs, nil
	})
}

// SetContainerState changes a container's state without emitting any
// event: the "missed event" of a real runtime. RUNNING sets started_at if
// unset; EXITED sets finished_at, exitCode and the reason; UNKNOWN sets
// reason "Unknown". exitCode is ignored for other states.
func (r *Runtime) SetContainerState(id string, state runtimeapi.ContainerState, exitCode int32) error {
	return r.mutate(func() ([]*resp, error) {
		c, ok := r.containers[id]
		if !ok {
			return nil, fmt.Errorf("set container %q state: %w", id, ErrNotFound)
		}
		switch state {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			c.state = state
			if c.startedAt == 0 {
				c.startedAt = r.nowNS()
			}
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			r.exitLocked(c, exitCode)
		case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
			c.state = state
			c.reason = "Unknown"
		default:
			c.state = state
		}
		r.log.Info("SetContainerState (silent)", "container", id, "state", state, "exitCode", exitCode)
		return nil, nil
	})
}

// SetSandboxIP changes a sandbox's IP without emitting any event.
func (r *Runtime) SetSandboxIP(id, ip string) error {
	return r.mutate(func() ([]*resp, error) {
		sb, ok := r.sandboxes[id]
		if !ok {
			return nil, fmt.Errorf("set sandbox %q IP: %w", id, ErrNotFound)
		}
		sb.ip = ip
		r.log.Info("SetSandboxIP (silent)", "sandbox", id, "ip", ip)
		return nil, nil
	})
}

// SetSandboxState changes a sandbox's state without emitting any event
// and without touching its containers or IP.
func (r *Runtime) SetSandboxState(id string, state runtimeapi.PodSandboxState) error {
	return r.mutate(func() ([]*resp, error) {
		sb, ok := r.sandboxes[id]
		if !ok {
			return nil, fmt.Errorf("set sandbox %q state: %w", id, ErrNotFound)
		}
		sb.state = state
		r.log.Info("SetSandboxState (silent)", "sandbox", id, "state", state)
		return nil, nil
	})
}

// Pod is a snapshot of one sandbox and its containers.
type Pod struct {
	// Sandbox is the sandbox status, as PodSandboxStatus returns it.
	Sandbox *runtimeapi.PodSandboxStatus
	// Containers are the sandbox's containers, in creation order.
	Containers []*runtimeapi.ContainerStatus
}

// Pods returns a snapshot of every sandbox, in creation order.
func (r *Runtime) Pods() []Pod {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Pod
	for _, sb := range inCreationOrder(r.sandboxes) {
		out = append(out, Pod{Sandbox: sb.status(), Containers: r.containerStatusesLocked(sb)})
	}
	return out
}

// ContainerStatusOf returns a container's status, or false if there is no
// such container.
func (r *Runtime) ContainerStatusOf(id string) (*runtimeapi.ContainerStatus, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, false
	}
	return c.status(), true
}

// SandboxStatusOf returns a sandbox's status, or false if there is no such
// sandbox.
func (r *Runtime) SandboxStatusOf(id string) (*runtimeapi.PodSandboxStatus, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb, ok := r.sandboxes[id]
	if !ok {
		return nil, false
	}
	return sb.status(), true
}

// findSandbox returns the ID of the newest sandbox with metadata name
// name, or "".
func (r *Runtime) findSandbox(name string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var best *sandbox
	for _, sb := range r.sandboxes {
		if sb.name == name && (best == nil || sb.seq > best.seq) {
			best = sb
		}
	}
	if best == nil {
		return ""
	}
	return best.id
}

// findContainer returns the ID of the newest container named name in a
// sandbox, or "".
func (r *Runtime) findContainer(sandboxID, name string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb, ok := r.sandboxes[sandboxID]
	if !ok {
		return ""
	}
	for i := len(sb.containers) - 1; i >= 0; i-- {
		if c := r.containers[sb.containers[i]]; c.name == name {
			return c.id
		}
	}
	return ""
}

// inCreationOrder returns the sandboxes or containers of m sorted by
// creation (seq, which is unique, so the order is total).
func inCreationOrder[T interface{ creationSeq() uint64 }](m map[string]T) []T {
	return slices.SortedFunc(maps.Values(m), func(a, b T) int { return cmp.Compare(a.creationSeq(), b.creationSeq()) })
}

// creationSeq returns the sandbox's creation sequence number.
func (sb *sandbox) creationSeq() uint64 { return sb.seq }

// creationSeq returns the container's creation sequence number.
func (c *container) creationSeq() uint64 { return c.seq }

// containerStatusesLocked returns the statuses of sb's containers, in
// creation order. The caller holds mu.
func (r *Runtime) containerStatusesLocked(sb *sandbox) []*runtimeapi.ContainerStatus {
	out := make([]*runtimeapi.ContainerStatus, 0, len(sb.containers))
	for _, cid := range sb.containers {
		out = append(out, r.containers[cid].status())
	}
	return out
}

// eventLocked builds the event a real runtime sends for a change of id
// (a container, or the sandbox itself) in sb, at the current state.
func (r *Runtime) eventLocked(id string, typ runtimeapi.ContainerEventType, sb *sandbox) *runtimeapi.ContainerEventResponse {
	f := r.faultsSnapshot()
	now := r.nowNS()
	if r.opts.MonotonicTimestamps {
		if now <= r.lastStamp {
			now = r.lastStamp + 1
		}
		r.lastStamp = now
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          f.stamp(now),
		ContainersStatuses: r.containerStatusesLocked(sb),
	}
	if !f.NilSandboxStatus {
		ev.PodSandboxStatus = sb.status()
	}
	return ev
}

func (sb *sandbox) metadata() *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: sb.name, Uid: sb.uid, Namespace: sb.namespace, Attempt: sb.attempt}
}

func (sb *sandbox) status() *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id:          sb.id,
		Metadata:    sb.metadata(),
		State:       sb.state,
		CreatedAt:   sb.createdAt,
		Network:     &runtimeapi.PodSandboxNetworkStatus{Ip: sb.ip},
		Labels:      maps.Clone(sb.labels),
		Annotations: maps.Clone(sb.annotations),
	}
}

func (sb *sandbox) item() *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Id:          sb.id,
		Metadata:    sb.metadata(),
		State:       sb.state,
		CreatedAt:   sb.createdAt,
		Labels:      maps.Clone(sb.labels),
		Annotations: maps.Clone(sb.annotations),
	}
}

func (c *container) status() *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.name, Attempt: c.attempt},
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.image},
		ImageRef:    c.image,
		ImageId:     c.image,
		Reason:      c.reason,
		Labels:      maps.Clone(c.labels),
		Annotations: maps.Clone(c.annotations),
		LogPath:     c.logPath,
	}
}

func (c *container) item() *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           c.id,
		PodSandboxId: c.sandboxID,
		Metadata:     &runtimeapi.ContainerMetadata{Name: c.name, Attempt: c.attempt},
		Image:        &runtimeapi.ImageSpec{Image: c.image},
		ImageRef:     c.image,
		ImageId:      c.image,
		State:        c.state,
		CreatedAt:    c.createdAt,
		Labels:       maps.Clone(c.labels),
		Annotations:  maps.Clone(c.annotations),
	}
}

// matchLabels reports whether labels has every key=value of selector.
func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
