package pleg

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is what the PLEG needs from a CRI runtime.
type Runtime interface {
	// ListPodSandbox lists every sandbox, in any state.
	ListPodSandbox(ctx context.Context) ([]*runtimeapi.PodSandbox, error)
	// ListContainers lists every container, in any state, or only those of
	// one sandbox when sandboxID is set.
	ListContainers(ctx context.Context, sandboxID string) ([]*runtimeapi.Container, error)
	// PodSandboxStatus returns a sandbox's status (and, with some
	// runtimes, its containers' statuses and a timestamp).
	PodSandboxStatus(ctx context.Context, sandboxID string) (*runtimeapi.PodSandboxStatusResponse, error)
	// ContainerStatus returns a container's status.
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	// GetContainerEvents opens the runtime's event stream.
	GetContainerEvents(ctx context.Context) (EventStream, error)
}

// EventStream is an open GetContainerEvents stream.
type EventStream interface {
	// Header blocks until the runtime has answered the stream with headers
	// (or its first event), returning them, or returns nil metadata when
	// the stream ended without any (its error is then Recv's).
	Header() (metadata.MD, error)
	// Recv returns the next event, or the error that ended the stream.
	Recv() (*runtimeapi.ContainerEventResponse, error)
}

// PodLifecycleEventGenerator is what a PLEG's consumer uses.
type PodLifecycleEventGenerator interface {
	// Start starts generating events; calling it again does nothing.
	Start()
	// Stop stops every goroutine of the PLEG and returns when they are
	// gone; after it returns, the PLEG writes nothing more to its cache.
	Stop()
	// Watch returns the channel events are sent on.
	Watch() <-chan *PodLifecycleEvent
	// Healthy reports whether the PLEG keeps up, with the reason if not.
	Healthy() (bool, error)
}

// criRuntime is Runtime over a CRI gRPC connection.
type criRuntime struct {
	c runtimeapi.RuntimeServiceClient
}

// NewCRIRuntime returns the Runtime of the CRI RuntimeService at conn.
func NewCRIRuntime(conn grpc.ClientConnInterface) Runtime {
	return criRuntime{c: runtimeapi.NewRuntimeServiceClient(conn)}
}

func (r criRuntime) ListPodSandbox(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	resp, err := r.c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

func (r criRuntime) ListContainers(ctx context.Context, sandboxID string) ([]*runtimeapi.Container, error) {
	req := &runtimeapi.ListContainersRequest{}
	if sandboxID != "" {
		req.Filter = &runtimeapi.ContainerFilter{PodSandboxId: sandboxID}
	}
	resp, err := r.c.ListContainers(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

func (r criRuntime) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatusResponse, error) {
	return r.c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
}

func (r criRuntime) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	resp, err := r.c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

func (r criRuntime) GetContainerEvents(ctx context.Context) (EventStream, error) {
	return r.c.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
}
