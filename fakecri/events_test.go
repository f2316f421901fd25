package fakecri

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestEventFields checks every §5.1 event of a pod's life and its fields.
func TestEventFields(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)

	at := func() int64 { return fc.Now().UnixNano() }
	type want struct {
		id       string
		typ      runtimeapi.ContainerEventType
		at       int64
		sbState  runtimeapi.PodSandboxState
		ip       bool
		ctrs     []string
		ctrState map[string]runtimeapi.ContainerState
	}
	check := func(w want) *runtimeapi.ContainerEventResponse {
		t.Helper()
		ev := recv(t, s)
		if ev.ContainerId != w.id || ev.ContainerEventType != w.typ || ev.CreatedAt != w.at {
			t.Fatalf("event (%s %v @%d), want (%s %v @%d)", ev.ContainerId, ev.ContainerEventType, ev.CreatedAt, w.id, w.typ, w.at)
		}
		st := ev.PodSandboxStatus
		if st == nil || st.Id != "s1" || st.Metadata.Uid != "p1" || st.Metadata.Namespace != "default" || st.Metadata.Name != "web" ||
			st.State != w.sbState || (st.Network.Ip != "") != w.ip {
			t.Errorf("%s %v: sandbox status %v", w.id, w.typ, st)
		}
		var ids []string
		for _, c := range ev.ContainersStatuses {
			ids = append(ids, c.Id)
			if want, ok := w.ctrState[c.Id]; ok && c.State != want {
				t.Errorf("%s %v: container %s state %v, want %v", w.id, w.typ, c.Id, c.State, want)
			}
		}
		if !cmp.Equal(ids, w.ctrs) {
			t.Errorf("%s %v: containers_statuses %v, want %v (never the sandbox)", w.id, w.typ, ids, w.ctrs)
		}
		return ev
	}
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	const (
		cCreated = runtimeapi.ContainerState_CONTAINER_CREATED
		cRunning = runtimeapi.ContainerState_CONTAINER_RUNNING
		cExited  = runtimeapi.ContainerState_CONTAINER_EXITED
	)

	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	check(want{s1, created, at(), ready, true, nil, nil})
	check(want{s1, started, at(), ready, true, nil, nil})
	fc.Step(time.Second)
	c1 := r.CreateContainer(s1, "app", 0)
	check(want{c1, created, at(), ready, true, []string{c1}, map[string]runtimeapi.ContainerState{c1: cCreated}})
	fc.Step(time.Second)
	_ = r.StartContainer(c1)
	ev := check(want{c1, started, at(), ready, true, []string{c1}, map[string]runtimeapi.ContainerState{c1: cRunning}})
	if ev.ContainersStatuses[0].StartedAt != at() {
		t.Errorf("started_at %d, want %d", ev.ContainersStatuses[0].StartedAt, at())
	}
	c2 := r.CreateContainer(s1, "sidecar", 0)
	check(want{c2, created, at(), ready, true, []string{c1, c2}, nil})
	_ = r.StartContainer(c2)
	check(want{c2, started, at(), ready, true, []string{c1, c2}, nil})
	fc.Step(time.Second)
	_ = r.StopContainer(c1, 137)
	ev = check(want{c1, stopped, at(), ready, true, []string{c1, c2}, map[string]runtimeapi.ContainerState{c1: cExited, c2: cRunning}})
	if cs := ev.ContainersStatuses[0]; cs.ExitCode != 137 || cs.Reason != "Error" || cs.FinishedAt != at() {
		t.Errorf("stopped container status %v", cs)
	}
	fc.Step(time.Second)
	_ = r.RemoveContainer(c1)
	check(want{c1, deleted, at(), ready, true, []string{c2}, nil})
	fc.Step(time.Second)
	_ = r.StopPodSandbox(s1)
	check(want{c2, stopped, at(), ready, true, []string{c2}, map[string]runtimeapi.ContainerState{c2: cExited}})
	check(want{s1, stopped, at(), notReady, false, []string{c2}, nil})
	fc.Step(time.Second)
	_ = r.RemovePodSandbox(s1)
	check(want{c2, deleted, at(), notReady, false, nil, nil})
	check(want{s1, deleted, at(), notReady, false, nil, nil})
	if st := r.Stats(); st.Published != 12 || st.Delivered != 12 {
		t.Errorf("stats %+v", st)
	}
}

// recvUntilErr receives until the stream fails.
func recvUntilErr(s eventStream) ([]*runtimeapi.ContainerEventResponse, error) {
	var evs []*runtimeapi.ContainerEventResponse
	for {
		ev, err := s.Recv()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestUnimplemented(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	r.SetFaults(Faults{Unimplemented: true})
	s, _ := openStream(t, c) // succeeds: gRPC opens streams lazily
	_, err := s.Recv()
	wantCode(t, err, codes.Unimplemented)
	if err.Error() != "rpc error: code = Unimplemented desc = method GetContainerEvents not implemented" {
		t.Errorf("error %q", err)
	}
	if r.Calls()["GetContainerEvents"] != 1 || r.Stats().Subscribers != 0 {
		t.Errorf("calls %v stats %+v", r.Calls(), r.Stats())
	}
	_, err = r.Subscribe().Recv()
	wantCode(t, err, codes.Unimplemented)
	// Fault cleared: streams work again.
	r.SetFaults(Faults{})
	s = subscribed(t, r, c, 1)
	sb := r.RunPodSandbox("p1", "", "", 0)
	if ev := recv(t, s); ev.ContainerId != sb {
		t.Errorf("event %v", ev)
	}
}

func TestEventsDisabled(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	r.UpdateFaults(func(f *Faults) { f.EventsDisabled = true })
	s, _ := openStream(t, c)
	_, err := s.Recv()
	wantEOF(t, err)
	_, err = r.Subscribe().Recv()
	wantEOF(t, err)
}

func TestEagerStreamHeaders(t *testing.T) {
	for _, eager := range []bool{false, true} {
		r, _ := newRuntime(t, Options{EagerStreamHeaders: eager})
		s := subscribed(t, r, dial(t, r), 1)
		if !eager {
			r.RunPodSandbox("p1", "", "", 0) // headers come with the first event
		}
		if _, err := s.Header(); err != nil {
			t.Errorf("eager=%v: Header: %v", eager, err)
		}
	}
}

func TestBreakStreams(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	s1 := subscribed(t, r, c, 1)
	s2 := subscribed(t, r, c, 2)
	sb := r.RunPodSandbox("p1", "", "", 0)
	_ = recvN(t, s1, 2)
	r.BreakStreams()
	_, err := s1.Recv()
	wantCode(t, err, codes.Unavailable)
	evs, err := recvUntilErr(s2) // events already forwarded still arrive
	wantCode(t, err, codes.Unavailable)
	if len(evs) > 2 {
		t.Errorf("s2 got %d events", len(evs))
	}
	if n := r.Stats().Subscribers; n != 0 {
		t.Errorf("%d subscribers after BreakStreams", n)
	}
	// The gap's event is kept (BufferBlock) and replayed on reconnect.
	c1 := r.CreateContainer(sb, "app", 0)
	s3 := subscribed(t, r, c, 1)
	_ = r.StartContainer(c1)
	if got := keys(recvN(t, s3, 2)); !cmp.Equal(got, []evKey{{c1, created}, {c1, started}}) {
		t.Errorf("after reconnect: %v", got)
	}
}

func TestRefuse(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	c := dial(t, r)
	s := subscribed(t, r, c, 1)
	sb := r.RunPodSandbox("p1", "", "", 0)
	_ = recvN(t, s, 2)
	c1 := r.CreateContainer(sb, "app", 0) // may or may not be forwarded before the restart
	r.Refuse(30 * time.Second)
	_, err := recvUntilErr(s)
	wantCode(t, err, codes.Unavailable)
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	wantCode(t, err, codes.Unavailable)
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	wantCode(t, err, codes.Unavailable)
	s2, _ := openStream(t, c)
	_, err = s2.Recv()
	wantCode(t, err, codes.Unavailable)
	_ = r.StartContainer(c1) // produced while refusing: lost
	fc.Step(30*time.Second - time.Nanosecond)
	_, err = c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	wantCode(t, err, codes.Unavailable)
	fc.Step(time.Nanosecond)
	resp, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(resp.Containers) != 1 || resp.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after the restart: %v %v", resp, err)
	}
	s3 := subscribed(t, r, c, 1)
	_ = r.StopContainer(c1, 1)
	if ev := recv(t, s3); ev.ContainerId != c1 || ev.ContainerEventType != stopped {
		t.Errorf("first event after the restart: %v (nothing from before may be replayed)", keys([]*runtimeapi.ContainerEventResponse{ev}))
	}
	if st := r.Stats(); st.Lost != 1 {
		t.Errorf("Lost = %d, want 1 (the STARTED produced while refusing)", st.Lost)
	}

	// Stale (BufferBlock, no subscriber) events are lost too.
	r.BreakStreams()
	r.CreateContainer(sb, "x", 0)
	if st := r.Stats(); st.Stale != 1 {
		t.Fatalf("Stale = %d", st.Stale)
	}
	r.Refuse(time.Second)
	if st := r.Stats(); st.Stale != 0 || st.Lost != 2 {
		t.Errorf("after Refuse: %+v", st)
	}
}

func TestDropNext(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)
	r.DropNext(2)
	sb := r.RunPodSandbox("p1", "", "", 0)
	c1 := r.CreateContainer(sb, "app", 0)
	if ev := recv(t, s); ev.ContainerId != c1 {
		t.Errorf("first event %s, want %s (the sandbox's two dropped)", ev.ContainerId, c1)
	}
	if st := r.Stats(); st.FaultDropped != 2 || st.Published != 3 || r.Faults().DropNext != 0 {
		t.Errorf("stats %+v faults %+v", st, r.Faults())
	}
}

func TestDuplicate(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)
	r.UpdateFaults(func(f *Faults) { f.Duplicate = true })
	sb := r.RunPodSandbox("p1", "", "", 0)
	evs := recvN(t, s, 4)
	if got := keys(evs); !cmp.Equal(got, []evKey{{sb, created}, {sb, created}, {sb, started}, {sb, started}}) {
		t.Errorf("events %v", got)
	}
	if evs[0].CreatedAt != evs[1].CreatedAt {
		t.Error("duplicate differs")
	}
}

func TestReorder(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)
	sb := r.RunPodSandbox("p1", "", "", 0)
	c1 := r.CreateContainer(sb, "app", 0)
	_ = recvN(t, s, 3)
	r.UpdateFaults(func(f *Faults) { f.Reorder = true })
	fc.Step(10 * time.Second)
	_ = r.StartContainer(c1) // STARTED@10 is held
	if st := r.Stats(); st.Held != 1 || st.Delivered != 3 {
		t.Fatalf("stats %+v", st)
	}
	fc.Step(10 * time.Second)
	_ = r.StopContainer(c1, 1) // STOPPED@20 leaves, then STARTED@10
	evs := recvN(t, s, 2)
	if got := keys(evs); !cmp.Equal(got, []evKey{{c1, stopped}, {c1, started}}) || evs[0].CreatedAt <= evs[1].CreatedAt {
		t.Errorf("events %v at %d, %d", got, evs[0].CreatedAt, evs[1].CreatedAt)
	}
	// A held event waits for Flush once Reorder is off.
	c2 := r.CreateContainer(sb, "b", 0)
	r.UpdateFaults(func(f *Faults) { f.Reorder = false })
	r.Flush()
	if ev := recv(t, s); ev.ContainerId != c2 {
		t.Errorf("flushed %v", ev.ContainerId)
	}
}

func TestDelay(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)
	r.UpdateFaults(func(f *Faults) { f.Delay = 2 * time.Second })
	t0 := fc.Now()
	sb := r.RunPodSandbox("p1", "", "", 0)
	fc.Step(time.Second)
	r.UpdateFaults(func(f *Faults) { f.Delay = 0 })
	c1 := r.CreateContainer(sb, "app", 0) // not delayed, but queued behind the delayed ones
	if st := r.Stats(); st.Delivered != 0 || st.Delayed != 3 {
		t.Fatalf("before the delay: %+v", st)
	}
	fc.Step(time.Second - time.Nanosecond)
	if st := r.Stats(); st.Delivered != 0 {
		t.Fatalf("delivered early: %+v", st)
	}
	fc.Step(time.Nanosecond)
	evs := recvN(t, s, 3)
	if got := keys(evs); !cmp.Equal(got, []evKey{{sb, created}, {sb, started}, {c1, created}}) {
		t.Errorf("events %v", got)
	}
	if evs[0].CreatedAt != t0.UnixNano() {
		t.Errorf("created_at %d, want the production time %d", evs[0].CreatedAt, t0.UnixNano())
	}
	// Once the queue is empty, events go straight out again.
	eventually(t, "empty delay queue", func() bool { return r.Stats().Delayed == 0 })
	_ = r.StartContainer(c1)
	if ev := recv(t, s); ev.ContainerId != c1 || ev.ContainerEventType != started {
		t.Errorf("event %v", ev)
	}
}

func TestNilSandboxStatus(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)
	sb := r.RunPodSandbox("p1", "", "", 0)
	r.UpdateFaults(func(f *Faults) { f.NilSandboxStatus = true })
	c1 := r.CreateContainer(sb, "app", 0)
	evs := recvN(t, s, 3)
	if evs[1].PodSandboxStatus == nil {
		t.Error("status before the fault is nil")
	}
	if evs[2].ContainerId != c1 || evs[2].PodSandboxStatus != nil || len(evs[2].ContainersStatuses) != 1 {
		t.Errorf("event %v", evs[2])
	}
}

func TestFailRPCs(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	sb := r.RunPodSandbox("p1", "", "", 0)
	r.UpdateFaults(func(f *Faults) { f.FailSandboxStatus = true })
	_, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	wantCode(t, err, codes.Unknown)
	r.SetFaults(Faults{FailRPC: map[string]codes.Code{"ListPodSandbox": codes.Unknown, "ListContainers": codes.DeadlineExceeded}})
	_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	wantCode(t, err, codes.OK)
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	wantCode(t, err, codes.Unknown)
	_, err = c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	wantCode(t, err, codes.DeadlineExceeded)
	r.SetFaults(Faults{})
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	wantCode(t, err, codes.OK)
}

func TestStatusTimestamps(t *testing.T) {
	r, fc := newRuntime(t, Options{StatusWithContainers: true})
	c := dial(t, r)
	s := subscribed(t, r, c, 1)
	sb := r.RunPodSandbox("p1", "", "", 0)
	r.CreateContainer(sb, "app", 0)
	_ = recvN(t, s, 3)
	status := func() *runtimeapi.PodSandboxStatusResponse {
		t.Helper()
		resp, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	now := fc.Now()

	// containerd 2.0.0-2.0.2: a timestamp and no statuses.
	r.SetFaults(Faults{TimestampWithoutStatuses: true})
	if resp := status(); resp.Timestamp != now.UnixNano() || len(resp.ContainersStatuses) != 0 {
		t.Errorf("TimestampWithoutStatuses: %d, %d statuses", resp.Timestamp, len(resp.ContainersStatuses))
	}

	r.SetFaults(Faults{FutureTimestamps: time.Hour})
	if resp := status(); resp.Timestamp != now.Add(time.Hour).UnixNano() || len(resp.ContainersStatuses) != 1 {
		t.Errorf("FutureTimestamps: %d", resp.Timestamp)
	}
	sb2 := r.RunPodSandbox("p2", "", "", 0)
	if ev := recv(t, s); ev.ContainerId != sb2 || ev.CreatedAt != now.Add(time.Hour).UnixNano() {
		t.Errorf("FutureTimestamps event created_at %d", ev.CreatedAt)
	}
	_ = recv(t, s)

	r.SetFaults(Faults{SecondsTimestamps: true})
	if resp := status(); resp.Timestamp != now.Unix() {
		t.Errorf("SecondsTimestamps: %d, want %d", resp.Timestamp, now.Unix())
	}
	r.CreateContainer(sb2, "x", 0)
	if ev := recv(t, s); ev.CreatedAt != now.Unix() {
		t.Errorf("SecondsTimestamps event created_at %d", ev.CreatedAt)
	}
	// Container statuses keep their nanosecond times.
	if resp := status(); resp.ContainersStatuses[0].CreatedAt != now.UnixNano() {
		t.Errorf("container created_at %d", resp.ContainersStatuses[0].CreatedAt)
	}
}

func TestMonotonicTimestamps(t *testing.T) {
	r, fc := newRuntime(t, Options{MonotonicTimestamps: true})
	sub := r.Subscribe()
	defer sub.Close()
	r.RunPodSandbox("p1", "", "", 0)
	evs := recvN(t, sub, 2)
	if evs[0].CreatedAt != fc.Now().UnixNano() || evs[1].CreatedAt != evs[0].CreatedAt+1 {
		t.Errorf("created_at %d, %d", evs[0].CreatedAt, evs[1].CreatedAt)
	}
}

// TestBufferBlockBlocksPublisher: a subscriber that does not read stalls
// the state change that produces the event, not the reads.
func TestBufferBlockBlocksPublisher(t *testing.T) {
	r, _ := newRuntime(t, Options{Buffer: 2})
	c := dial(t, r)
	sb := r.RunPodSandbox("p1", "", "", 0) // 2 stale events, replayed outside the buffer
	sub := r.Subscribe()
	defer sub.Close()
	c1 := r.CreateContainer(sb, "a", 0)
	r.CreateContainer(sb, "b", 0) // the buffer (2) is now full
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.StartContainer(c1)
	}()
	eventually(t, "a blocked publisher", func() bool { return r.Stats().BlockedPublishers == 1 })
	select {
	case <-done:
		t.Fatal("StartContainer returned with the buffer full")
	default:
	}
	// Reads are not blocked, and show the change already made.
	resp, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: c1}})
	if err != nil || resp.Containers[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("ListContainers while blocked: %v %v", resp, err)
	}
	_ = recvN(t, sub, 2) // the replay does not free room
	select {
	case <-done:
		t.Fatal("StartContainer returned before the subscriber read its buffer")
	default:
	}
	_ = recv(t, sub)
	<-done
	if st := r.Stats(); st.BlockedPublishers != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	if got := keys(recvN(t, sub, 2)); !cmp.Equal(got, []evKey{{"c2", created}, {c1, started}}) {
		t.Errorf("events %v", got)
	}
}

// TestBufferBlockBackPressureOverGRPC: a gRPC client that does not read
// fills HTTP/2 flow control, then its buffer, then blocks the runtime;
// going away releases it.
func TestBufferBlockBackPressureOverGRPC(t *testing.T) {
	r, _ := newRuntime(t, Options{Buffer: 10})
	c := dial(t, r, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	sb := r.RunPodSandbox("p1", "", "", 0)
	_, cancel := openStream(t, c)
	eventually(t, "subscriber", func() bool { return r.Stats().Subscribers == 1 })
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			r.CreateContainer(sb, "c", 0)
			n++
		}
	}()
	eventually(t, "a blocked publisher", func() bool { return r.Stats().BlockedPublishers == 1 })
	close(stop)
	cancel() // the client goes away: the publisher is released
	n := <-done
	if st := r.Stats(); st.BlockedPublishers != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("blocked after %d events", n)
}

func TestBufferDropDropsAndCounts(t *testing.T) {
	r, _ := newRuntime(t, Options{Mode: BufferDrop, Buffer: 3})
	sb := r.RunPodSandbox("p1", "", "", 0)
	c1 := r.CreateContainer(sb, "a", 0)
	r.CreateContainer(sb, "b", 0) // dropped
	r.CreateContainer(sb, "c", 0) // dropped
	if st := r.Stats(); st.Buffered != 3 || st.Dropped != 2 || st.BlockedPublishers != 0 {
		t.Errorf("stats %+v", st)
	}
	// The buffered (stale) events go to the next subscriber.
	s := subscribed(t, r, dial(t, r), 1)
	if got := keys(recvN(t, s, 3)); !cmp.Equal(got, []evKey{{sb, created}, {sb, started}, {c1, created}}) {
		t.Errorf("events %v", got)
	}
}

// TestBufferDropSharesEvents: containerd 1.7's streams read one channel,
// so each event goes to one subscriber.
func TestBufferDropSharesEvents(t *testing.T) {
	r, _ := newRuntime(t, Options{Mode: BufferDrop})
	subs := []*Subscription{r.Subscribe(), r.Subscribe()}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Go(func() {
			for {
				ev, err := sub.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				seen[ev.ContainerId]++
				mu.Unlock()
			}
		})
	}
	sb := r.RunPodSandbox("p1", "", "", 0)
	for range 20 {
		r.CreateContainer(sb, "c", 0)
	}
	eventually(t, "every event delivered", func() bool { return r.Stats().Delivered == 22 })
	for _, sub := range subs {
		sub.Close()
	}
	wg.Wait()
	if len(seen) != 21 || seen[sb] != 2 {
		t.Errorf("seen %v", seen)
	}
	for id, n := range seen {
		if id != sb && n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}

// TestBufferDropBroadcast is CRI-O: every subscriber gets every event; a
// slow one stalls the broadcaster and the buffer drops; with no subscriber
// the broadcaster loses events.
func TestBufferDropBroadcast(t *testing.T) {
	r, _ := newRuntime(t, Options{Mode: BufferDropBroadcast, Buffer: 2})
	sb := r.RunPodSandbox("p1", "", "", 0) // waits in the buffer for the first subscriber
	a := r.Subscribe()
	if got := keys(recvN(t, a, 2)); !cmp.Equal(got, []evKey{{sb, created}, {sb, started}}) {
		t.Errorf("a: %v", got)
	}
	b := r.Subscribe()
	c1 := r.CreateContainer(sb, "a", 0)
	if ev := recv(t, a); ev.ContainerId != c1 {
		t.Errorf("a: %s", ev.ContainerId)
	}
	if ev := recv(t, b); ev.ContainerId != c1 {
		t.Errorf("b: %s", ev.ContainerId)
	}
	// b does not read: the broadcaster holds the next event for b, the
	// buffer takes two more, the fourth is dropped.
	r.CreateContainer(sb, "b", 0)
	eventually(t, "broadcaster took the event", func() bool { return r.Stats().Buffered == 0 })
	r.CreateContainer(sb, "c", 0)
	r.CreateContainer(sb, "d", 0)
	r.CreateContainer(sb, "e", 0)
	if st := r.Stats(); st.Dropped != 1 || st.Buffered != 2 {
		t.Errorf("stats %+v", st)
	}
	a.Close()
	b.Close()
	eventually(t, "buffer drained", func() bool { return r.Stats().Buffered == 0 })
	r.CreateContainer(sb, "f", 0)
	eventually(t, "no subscriber: lost", func() bool { return r.Stats().Lost >= 3 })
}

// TestStaleReplay: containerd 2.x keeps events for 5 minutes while no one
// is subscribed and replays them to the next subscriber.
func TestStaleReplay(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	c := dial(t, r)
	sb := r.RunPodSandbox("p1", "", "", 0) // t0
	fc.Step(4 * time.Minute)
	c1 := r.CreateContainer(sb, "app", 0) // t0+4m
	if st := r.Stats(); st.Stale != 3 {
		t.Fatalf("Stale = %d", st.Stale)
	}
	fc.Step(time.Minute + time.Nanosecond) // the sandbox's events are now older than 5 min
	s := subscribed(t, r, c, 1)
	_ = r.StartContainer(c1)
	evs := recvN(t, s, 2)
	if got := keys(evs); !cmp.Equal(got, []evKey{{c1, created}, {c1, started}}) {
		t.Errorf("replay %v", got)
	}
	if evs[0].CreatedAt != epoch.Add(4*time.Minute).UnixNano() {
		t.Errorf("replayed event created_at %d: want its original (stale) time", evs[0].CreatedAt)
	}
	if st := r.Stats(); st.Expired != 2 || st.Stale != 0 {
		t.Errorf("stats %+v", st)
	}

	// Disconnect and reconnect: the gap's events are replayed.
	r.BreakStreams()
	_ = r.StopContainer(c1, 1)
	s2 := subscribed(t, r, c, 1)
	if ev := recv(t, s2); ev.ContainerId != c1 || ev.ContainerEventType != stopped {
		t.Errorf("after reconnect %v", ev)
	}
}

func TestStaleRetentionDisabled(t *testing.T) {
	r, _ := newRuntime(t, Options{StaleRetention: -1})
	r.RunPodSandbox("p1", "", "", 0)
	if st := r.Stats(); st.Stale != 0 || st.Expired != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestMultipleSubscribersBlock: every stream gets every event.
func TestMultipleSubscribersBlock(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	var streams []eventStream
	for i := range 3 {
		streams = append(streams, subscribed(t, r, c, i+1))
	}
	sb := r.RunPodSandbox("p1", "", "", 0)
	c1 := r.CreateContainer(sb, "a", 0)
	_ = r.StartContainer(c1)
	_ = r.RemovePodSandbox(sb)
	want := []evKey{{sb, created}, {sb, started}, {c1, created}, {c1, started}, {c1, stopped}, {sb, stopped}, {c1, deleted}, {sb, deleted}}
	for i, s := range streams {
		if got := keys(recvN(t, s, len(want))); !cmp.Equal(got, want) {
			t.Errorf("stream %d: %v", i, got)
		}
	}
	if st := r.Stats(); st.Delivered != uint64(3*len(want)) {
		t.Errorf("Delivered = %d", st.Delivered)
	}
}

func TestClientGoneUnsubscribes(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	_, cancel := openStream(t, dial(t, r))
	eventually(t, "subscriber", func() bool { return r.Stats().Subscribers == 1 })
	cancel()
	eventually(t, "unsubscribed", func() bool { return r.Stats().Subscribers == 0 })
}

func TestCloseEndsStreams(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	s := subscribed(t, r, dial(t, r), 1)
	sub := r.Subscribe()
	r.UpdateFaults(func(f *Faults) { f.Delay = time.Hour })
	r.RunPodSandbox("p1", "", "", 0) // a delay goroutine and its timers
	r.Close()
	r.Close()
	if _, err := s.Recv(); err == nil {
		t.Error("stream survived Close")
	}
	_, err := sub.Recv()
	wantCode(t, err, codes.Unavailable)
	_, err = r.Subscribe().Recv()
	wantCode(t, err, codes.Unavailable)
	if _, err := r.Dial(ctx); err == nil {
		t.Error("Dial after Close succeeded")
	}
}

func TestSubscriptionClose(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	sub := r.Subscribe()
	sub.Close()
	if _, err := sub.Recv(); !errors.Is(err, ErrSubscriptionClosed) {
		t.Errorf("Recv after Close: %v", err)
	}
	sub.Close()
}

// TestRPCHook reproduces §7 scenario 17: a PodSandboxStatus response
// computed at rt(15) with C1 RUNNING reaches the client after the event
// STOPPED@rt(16).
func TestRPCHook(t *testing.T) {
	r, fc := newRuntime(t, Options{StatusWithContainers: true})
	c := dial(t, r)
	s := subscribed(t, r, c, 1)
	sb := r.RunPodSandbox("p1", "default", "web", 0)
	c1 := r.CreateContainer(sb, "app", 0)
	_ = r.StartContainer(c1)
	_ = recvN(t, s, 4)
	fc.SetTime(epoch.Add(15 * time.Second))
	var stoppedAt int64
	r.SetRPCHook(func(method string, after bool) {
		if method == "PodSandboxStatus" && after {
			fc.Step(time.Second)
			_ = r.StopContainer(c1, 1)
			stoppedAt = recv(t, s).CreatedAt
		}
	})
	resp, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	r.SetRPCHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Timestamp != epoch.Add(15*time.Second).UnixNano() || resp.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("status at %d: %v", resp.Timestamp, resp.ContainersStatuses[0].State)
	}
	if stoppedAt != epoch.Add(16*time.Second).UnixNano() {
		t.Errorf("STOPPED at %d", stoppedAt)
	}
	if st, _ := r.ContainerStatusOf(c1); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("state %v", st.State)
	}
}

// TestHookBeforeCanFail shows the before hook runs ahead of the faults.
func TestHookBefore(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	var calls []string
	var mu sync.Mutex
	r.SetRPCHook(func(method string, after bool) {
		mu.Lock()
		defer mu.Unlock()
		if !after {
			calls = append(calls, method)
			r.SetFaults(Faults{FailRPC: map[string]codes.Code{"Version": codes.Internal}})
		}
	})
	_, err := c.Version(context.Background(), &runtimeapi.VersionRequest{})
	wantCode(t, err, codes.Internal)
	mu.Lock()
	defer mu.Unlock()
	if !cmp.Equal(calls, []string{"Version"}) {
		t.Errorf("hook calls %v", calls)
	}
}
