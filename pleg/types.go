package pleg

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodLifeCycleEventType is what happened to a pod's container or sandbox.
type PodLifeCycleEventType string

// The event types, as the kubelet's.
const (
	// ContainerStarted: a container (or sandbox) is now running.
	ContainerStarted PodLifeCycleEventType = "ContainerStarted"
	// ContainerDied: a container (or sandbox) has exited.
	ContainerDied PodLifeCycleEventType = "ContainerDied"
	// ContainerRemoved: an exited container (or sandbox) is gone.
	ContainerRemoved PodLifeCycleEventType = "ContainerRemoved"
	// PodSync: the pod needs a sync though no container changed.
	PodSync PodLifeCycleEventType = "PodSync"
	// ContainerChanged: a container's state became unknown (computed, never
	// sent, as upstream).
	ContainerChanged PodLifeCycleEventType = "ContainerChanged"
)

// PodLifecycleEvent is one event of the PLEG: a pod (by UID) and, for
// container events, the container or sandbox ID in Data.
type PodLifecycleEvent struct {
	ID   types.UID
	Type PodLifeCycleEventType
	Data interface{}
	// Status is the pod status the event was computed from (for a
	// removal the evented PLEG saw, the last one that held the
	// container), or nil when there was none. The cache may hold a
	// different status by the time the event is read: events and relists
	// race, and a replayed event can be stamped newer than a relist that
	// saw more. Shared with the cache: read it, never modify it.
	Status *PodStatus
}

// PodStatus is what the runtime says of a pod: its sandboxes and
// containers, and when that was observed (runtime time).
type PodStatus struct {
	ID                types.UID
	Name, Namespace   string
	IPs               []string
	SandboxStatuses   []*runtimeapi.PodSandboxStatus
	ContainerStatuses []*runtimeapi.ContainerStatus
	TimeStamp         time.Time
}

// containerState is a container's state as the PLEG diffs it.
type containerState int

const (
	stateNonExistent containerState = iota
	stateRunning
	stateExited
	stateUnknown // CREATED counts as unknown, as upstream
)

func fromContainerState(s runtimeapi.ContainerState) containerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return stateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return stateExited
	}
	return stateUnknown
}

func fromSandboxState(s runtimeapi.PodSandboxState) containerState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return stateRunning
	}
	return stateExited
}

// The labels the kubelet puts on containers, naming their pod.
const (
	podUIDLabel       = "io.kubernetes.pod.uid"
	podNameLabel      = "io.kubernetes.pod.name"
	podNamespaceLabel = "io.kubernetes.pod.namespace"
)
