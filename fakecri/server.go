package fakecri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Server is the Runtime's CRI RuntimeService gRPC server. It is a separate
// type because the Runtime's state API (RunPodSandbox(uid, ...), ...) has
// the names of CRI RPCs. It serves Version, Status, ListPodSandbox,
// PodSandboxStatus, ListContainers, ContainerStatus and GetContainerEvents
// for the PLEG, and RunPodSandbox, StopPodSandbox, RemovePodSandbox,
// CreateContainer, StartContainer, StopContainer and RemoveContainer
// through the state API (so crictl-style clients can drive it); the other
// RPCs answer codes.Unimplemented. Every call is counted (Runtime.Calls)
// and subject to Refuse, Faults.FailRPC and the RPCHook.
type Server struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	r *Runtime
}

var _ runtimeapi.RuntimeServiceServer = (*Server)(nil)

// Server returns the runtime's CRI RuntimeService server.
func (r *Runtime) Server() *Server { return &Server{r: r} }

// Register registers the runtime's RuntimeService on s.
func (r *Runtime) Register(s *grpc.Server) {
	runtimeapi.RegisterRuntimeServiceServer(s, r.Server())
}

// Calls returns the number of calls of each RPC (by method name, e.g.
// "ListPodSandbox") since New or ResetCalls, refused and failed ones
// included.
func (r *Runtime) Calls() map[string]int {
	r.callsMu.Lock()
	defer r.callsMu.Unlock()
	return maps.Clone(r.calls)
}

// ResetCalls sets every call count to zero.
func (r *Runtime) ResetCalls() {
	r.callsMu.Lock()
	defer r.callsMu.Unlock()
	clear(r.calls)
}

// enter counts a call of method, runs the before hook and returns the
// error the runtime's faults give it, if any.
func (r *Runtime) enter(method string) error {
	r.callsMu.Lock()
	r.calls[method]++
	r.callsMu.Unlock()
	r.log.Debug("RPC", "method", method)
	if h := r.rpcHook(); h != nil {
		h(method, false)
	}
	return r.rpcFault(method)
}

// rpcFault returns the error the runtime's faults give a call of method,
// if any: codes.Unavailable while refusing, else the Faults.FailRPC code
// of method, else (PodSandboxStatus only) Faults.FailSandboxStatus.
func (r *Runtime) rpcFault(method string) error {
	if r.refusing() {
		return status.Error(codes.Unavailable, "fakecri: runtime restarting")
	}
	f := r.Faults()
	if code, ok := f.FailRPC[method]; ok && code != codes.OK {
		return status.Errorf(code, "fakecri: injected %s failure", method)
	}
	if method == "PodSandboxStatus" && f.FailSandboxStatus {
		return status.Error(codes.Unknown, "fakecri: injected PodSandboxStatus failure")
	}
	return nil
}

// leave runs the after hook.
func (r *Runtime) leave(method string) {
	if h := r.rpcHook(); h != nil {
		h(method, true)
	}
}

// streamFault returns the error a GetContainerEvents client sees at its
// first Recv, if the faults make the stream fail: the call's rpcFault,
// else its eventsFault.
func (r *Runtime) streamFault() error {
	if err := r.rpcFault("GetContainerEvents"); err != nil {
		return err
	}
	return r.eventsFault()
}

// eventsFault returns the error Faults.Unimplemented (a status error) or
// Faults.EventsDisabled (io.EOF: the stream ends at once with OK) give a
// GetContainerEvents stream, if any.
func (r *Runtime) eventsFault() error {
	f := r.faultsSnapshot()
	if f.Unimplemented {
		return status.Error(codes.Unimplemented, "method GetContainerEvents not implemented")
	}
	if f.EventsDisabled {
		return io.EOF
	}
	return nil
}

// toStatus maps state API errors to gRPC status errors.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrInvalidState):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// Version implements RuntimeService.
func (s *Server) Version(_ context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if err := s.r.enter("Version"); err != nil {
		return nil, err
	}
	defer s.r.leave("Version")
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       s.r.opts.RuntimeName,
		RuntimeVersion:    s.r.opts.RuntimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status implements RuntimeService: the runtime and its network are ready.
func (s *Server) Status(_ context.Context, _ *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if err := s.r.enter("Status"); err != nil {
		return nil, err
	}
	defer s.r.leave("Status")
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

// ListPodSandbox implements RuntimeService, honouring the id, state and
// label selector filters. Sandboxes come in creation order.
func (s *Server) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	if err := s.r.enter("ListPodSandbox"); err != nil {
		return nil, err
	}
	defer s.r.leave("ListPodSandbox")
	f := req.GetFilter()
	r := s.r
	r.mu.RLock()
	defer r.mu.RUnlock()
	resp := &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{}}
	for _, sb := range inCreationOrder(r.sandboxes) {
		if f != nil {
			if f.Id != "" && f.Id != sb.id {
				continue
			}
			if f.State != nil && f.State.State != sb.state {
				continue
			}
			if !matchLabels(sb.labels, f.LabelSelector) {
				continue
			}
		}
		resp.Items = append(resp.Items, sb.item())
	}
	return resp, nil
}

// PodSandboxStatus implements RuntimeService. containers_statuses and
// timestamp are set only with Options.StatusWithContainers (both) or
// Faults.TimestampWithoutStatuses (timestamp only). Unknown IDs answer
// codes.NotFound.
func (s *Server) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := s.r.enter("PodSandboxStatus"); err != nil {
		return nil, err
	}
	defer s.r.leave("PodSandboxStatus")
	r := s.r
	f := r.faultsSnapshot()
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find sandbox %q: not found", req.GetPodSandboxId())
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: sb.status()}
	if req.GetVerbose() {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"runtime":%q,"ip":%q}`, r.opts.RuntimeName, sb.ip)}
	}
	switch {
	case f.TimestampWithoutStatuses:
		resp.Timestamp = f.stamp(r.nowNS())
	case r.opts.StatusWithContainers:
		resp.ContainersStatuses = r.containerStatusesLocked(sb)
		resp.Timestamp = f.stamp(r.nowNS())
	}
	return resp, nil
}

// ListContainers implements RuntimeService, honouring the id, state,
// pod_sandbox_id and label selector filters. Containers come in creation
// order.
func (s *Server) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if err := s.r.enter("ListContainers"); err != nil {
		return nil, err
	}
	defer s.r.leave("ListContainers")
	f := req.GetFilter()
	r := s.r
	r.mu.RLock()
	defer r.mu.RUnlock()
	resp := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{}}
	for _, c := range inCreationOrder(r.containers) {
		if f != nil {
			if f.Id != "" && f.Id != c.id {
				continue
			}
			if f.State != nil && f.State.State != c.state {
				continue
			}
			if f.PodSandboxId != "" && f.PodSandboxId != c.sandboxID {
				continue
			}
			if !matchLabels(c.labels, f.LabelSelector) {
				continue
			}
		}
		resp.Containers = append(resp.Containers, c.item())
	}
	return resp, nil
}

// ContainerStatus implements RuntimeService. Unknown IDs answer
// codes.NotFound.
func (s *Server) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	if err := s.r.enter("ContainerStatus"); err != nil {
		return nil, err
	}
	defer s.r.leave("ContainerStatus")
	st, ok := s.r.ContainerStatusOf(req.GetContainerId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "an error occurred when try to find container %q: not found", req.GetContainerId())
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

// GetContainerEvents implements RuntimeService: it streams the runtime's
// container events until the client goes away, BreakStreams, Refuse or
// Close. See Faults for Unimplemented and EventsDisabled.
func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	if err := s.r.enter("GetContainerEvents"); err != nil {
		return err
	}
	if err := s.r.eventsFault(); err != nil {
		if err == io.EOF {
			s.r.log.Debug("GetContainerEvents: events disabled, returning at once")
			return nil
		}
		return err
	}
	sub := s.r.ev.subscribe()
	defer sub.Close()
	if s.r.opts.EagerStreamHeaders {
		if err := stream.SendHeader(metadata.MD{}); err != nil {
			return fmt.Errorf("sending stream headers: %w", err)
		}
	}
	ctx := stream.Context()
	stop := context.AfterFunc(ctx, sub.Close)
	defer stop()
	s.r.log.Info("GetContainerEvents: subscriber connected")
	for {
		ev, err := sub.Recv()
		if err != nil {
			if ctx.Err() != nil {
				s.r.log.Info("GetContainerEvents: subscriber gone")
				return status.FromContextError(ctx.Err()).Err()
			}
			s.r.log.Info("GetContainerEvents: stream ended", "err", err)
			return err
		}
		if err := stream.Send(ev); err != nil {
			return fmt.Errorf("sending container event: %w", err)
		}
	}
}

// RunPodSandbox implements RuntimeService through Runtime.RunPodSandboxSpec.
func (s *Server) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	if err := s.r.enter("RunPodSandbox"); err != nil {
		return nil, err
	}
	defer s.r.leave("RunPodSandbox")
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil {
		return nil, status.Error(codes.InvalidArgument, "sandbox config metadata is required")
	}
	id, err := s.r.RunPodSandboxSpec(SandboxSpec{
		UID: md.Uid, Namespace: md.Namespace, Name: md.Name, Attempt: md.Attempt,
		Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox implements RuntimeService through Runtime.StopPodSandbox;
// an unknown sandbox is not an error (the RPC is idempotent).
func (s *Server) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := s.r.enter("StopPodSandbox"); err != nil {
		return nil, err
	}
	defer s.r.leave("StopPodSandbox")
	if err := s.r.StopPodSandbox(req.GetPodSandboxId()); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox implements RuntimeService through
// Runtime.RemovePodSandbox; an unknown sandbox is not an error.
func (s *Server) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := s.r.enter("RemovePodSandbox"); err != nil {
		return nil, err
	}
	defer s.r.leave("RemovePodSandbox")
	if err := s.r.RemovePodSandbox(req.GetPodSandboxId()); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// CreateContainer implements RuntimeService through
// Runtime.CreateContainerSpec.
func (s *Server) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	if err := s.r.enter("CreateContainer"); err != nil {
		return nil, err
	}
	defer s.r.leave("CreateContainer")
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil {
		return nil, status.Error(codes.InvalidArgument, "container config metadata is required")
	}
	id, err := s.r.CreateContainerSpec(ContainerSpec{
		SandboxID: req.GetPodSandboxId(), Name: md.Name, Attempt: md.Attempt,
		Image: cfg.GetImage().GetImage(), Labels: cfg.GetLabels(), Annotations: cfg.GetAnnotations(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer implements RuntimeService through Runtime.StartContainer.
func (s *Server) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := s.r.enter("StartContainer"); err != nil {
		return nil, err
	}
	defer s.r.leave("StartContainer")
	if err := s.r.StartContainer(req.GetContainerId()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer implements RuntimeService through Runtime.StopContainer;
// the container exits with code 0.
func (s *Server) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := s.r.enter("StopContainer"); err != nil {
		return nil, err
	}
	defer s.r.leave("StopContainer")
	if err := s.r.StopContainer(req.GetContainerId(), 0); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer implements RuntimeService through
// Runtime.RemoveContainer; an unknown container is not an error.
func (s *Server) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := s.r.enter("RemoveContainer"); err != nil {
		return nil, err
	}
	defer s.r.leave("RemoveContainer")
	if err := s.r.RemoveContainer(req.GetContainerId()); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// serving is one gRPC server the runtime started (Listen or Dial).
type serving struct {
	srv  *grpc.Server
	done chan struct{}
	once sync.Once
}

func (s *serving) stop() {
	s.once.Do(func() {
		s.srv.Stop()
		<-s.done
	})
}

// serve starts a gRPC server for the runtime on lis.
func (r *Runtime) serve(lis net.Listener) (*serving, error) {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	if r.closed {
		lis.Close()
		return nil, errors.New("fakecri: runtime closed")
	}
	srv := grpc.NewServer(grpc.WaitForHandlers(true))
	r.Register(srv)
	s := &serving{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := srv.Serve(lis); err != nil {
			r.log.Error("gRPC server stopped", "err", err)
		}
	}()
	r.servers = append(r.servers, s)
	return s, nil
}

// Listen serves the runtime's RuntimeService on endpoint:
// "unix:///path/to.sock" (a stale socket file at the path is removed
// first; a socket another process still serves on is an error), a bare
// absolute path (same), or "tcp://host:port" (port 0 picks
// a free one). It returns the address as a gRPC dial target
// ("unix:///path/to.sock" or "host:port") and a function that stops the
// server, ending its streams; Close also stops it.
func (r *Runtime) Listen(endpoint string) (addr string, stop func(), err error) {
	var lis net.Listener
	switch {
	case strings.HasPrefix(endpoint, "unix://") || strings.HasPrefix(endpoint, "/"):
		path := strings.TrimPrefix(endpoint, "unix://")
		if path == "" {
			return "", nil, fmt.Errorf("listen %q: empty socket path", endpoint)
		}
		if err := removeStaleSocket(path); err != nil {
			return "", nil, fmt.Errorf("listen %q: %w", endpoint, err)
		}
		lis, err = net.Listen("unix", path)
		if err != nil {
			return "", nil, fmt.Errorf("listen %q: %w", endpoint, err)
		}
		addr = "unix://" + path
	case strings.HasPrefix(endpoint, "tcp://"):
		lis, err = net.Listen("tcp", strings.TrimPrefix(endpoint, "tcp://"))
		if err != nil {
			return "", nil, fmt.Errorf("listen %q: %w", endpoint, err)
		}
		addr = lis.Addr().String()
	default:
		return "", nil, fmt.Errorf("listen %q: want unix:///path or tcp://host:port", endpoint)
	}
	s, err := r.serve(lis)
	if err != nil {
		return "", nil, fmt.Errorf("listen %q: %w", endpoint, err)
	}
	r.log.Info("serving CRI RuntimeService", "endpoint", addr)
	return addr, s.stop, nil
}

// socketProbeTimeout bounds the connection attempt that tells a socket in
// use from a stale one: a live server accepts at once, a stale socket
// refuses at once; only a server too busy to accept takes longer, and it
// is in use too.
const socketProbeTimeout = 2 * time.Second

// removeStaleSocket removes the socket file at path if nothing listens on
// it any more (a runtime that died without removing it), and refuses to
// take the path over from a process that still serves on it: removing
// that process's socket would leave it running unreachable and its
// clients talking to us. Anything but a socket is left alone (net.Listen
// then fails on it).
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil
	}
	c, err := net.DialTimeout("unix", path, socketProbeTimeout)
	switch {
	case err == nil:
		c.Close()
		return fmt.Errorf("another process is serving on %s: stop it first, or listen on another path", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		// Stale: nobody listens.
	case errors.Is(err, os.ErrNotExist):
		return nil // gone meanwhile
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("%s is in use: a process listens on it but did not accept a connection within %v", path, socketProbeTimeout)
		}
		return fmt.Errorf("cannot tell whether %s is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale socket: %w", err)
	}
	return nil
}

// Dial returns a client connection to the runtime over an in-process
// bufconn listener (each call starts a server on its own listener; Close
// stops them all), so tests need no socket file. It waits, bounded by ctx, until the connection is ready.
// opts are added to the defaults (insecure credentials and the bufconn
// dialer). The caller closes the connection.
func (r *Runtime) Dial(ctx context.Context, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	lis := bufconn.Listen(1 << 20)
	if _, err := r.serve(lis); err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///fakecri", all...)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	conn.Connect()
	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return conn, nil
		}
		if !conn.WaitForStateChange(ctx, st) {
			conn.Close()
			return nil, fmt.Errorf("dial: %w", ctx.Err())
		}
	}
}
