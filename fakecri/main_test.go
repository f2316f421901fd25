package fakecri

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is the fake runtime clock's start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newRuntime returns a Runtime on a fake clock, closed at the end of the
// test.
func newRuntime(t *testing.T, opts Options) (*Runtime, *testingclock.FakeClock) {
	t.Helper()
	fc := testingclock.NewFakeClock(epoch)
	opts.Clock = fc
	r := New(opts)
	t.Cleanup(r.Close)
	return r, fc
}

// dial returns a CRI client of r over bufconn.
func dial(t *testing.T, r *Runtime, opts ...grpc.DialOption) runtimeapi.RuntimeServiceClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := r.Dial(ctx, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

type eventStream = grpc.ServerStreamingClient[runtimeapi.ContainerEventResponse]

// openStream opens GetContainerEvents; the stream ends with the test or
// after a real-time deadline, so a missing event fails instead of hanging.
func openStream(t *testing.T, c runtimeapi.RuntimeServiceClient) (eventStream, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	s, err := c.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	return s, cancel
}

// subscribed opens a stream and waits until the runtime has n subscribers.
func subscribed(t *testing.T, r *Runtime, c runtimeapi.RuntimeServiceClient, n int) eventStream {
	t.Helper()
	s, _ := openStream(t, c)
	eventually(t, "subscribers", func() bool { return r.Stats().Subscribers == n })
	return s
}

// recv receives one event or fails.
func recv(t *testing.T, s interface {
	Recv() (*runtimeapi.ContainerEventResponse, error)
}) *runtimeapi.ContainerEventResponse {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return ev
}

// recvN receives n events.
func recvN(t *testing.T, s interface {
	Recv() (*runtimeapi.ContainerEventResponse, error)
}, n int) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	out := make([]*runtimeapi.ContainerEventResponse, 0, n)
	for range n {
		out = append(out, recv(t, s))
	}
	return out
}

// eventually polls cond with a real-time deadline (for asynchronous
// delivery only; time-dependent behaviour uses the fake clock).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// stepWhenWaiting waits until something waits on the fake clock, then
// steps it by d.
func stepWhenWaiting(t *testing.T, fc *testingclock.FakeClock, d time.Duration) {
	t.Helper()
	eventually(t, "a clock waiter", fc.HasWaiters)
	fc.Step(d)
}

// wantCode checks that err is a gRPC status error with code.
func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code || err == nil && code != codes.OK {
		t.Fatalf("error %v: want code %v", err, code)
	}
}

// wantEOF checks err is io.EOF.
func wantEOF(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("error %v: want io.EOF", err)
	}
}

// evKey is an event's (container ID, type), for compact comparisons.
type evKey struct {
	ID   string
	Type runtimeapi.ContainerEventType
}

func keys(evs []*runtimeapi.ContainerEventResponse) []evKey {
	out := make([]evKey, len(evs))
	for i, ev := range evs {
		out[i] = evKey{ev.ContainerId, ev.ContainerEventType}
	}
	return out
}

const (
	created = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	started = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	stopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	deleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
)
