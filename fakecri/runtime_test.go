package fakecri

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var ctx = context.Background()

func sandboxIDs(items []*runtimeapi.PodSandbox) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Id)
	}
	return out
}

func containerIDs(items []*runtimeapi.Container) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Id)
	}
	return out
}

func TestVersionAndStatus(t *testing.T) {
	r, _ := newRuntime(t, Options{RuntimeVersion: "1.6.20~ds1"})
	c := dial(t, r)
	v, err := c.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "fakecri" || v.RuntimeVersion != "1.6.20~ds1" || v.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %v", v)
	}
	st, err := c.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Status.Conditions) != 2 || !st.Status.Conditions[0].Status {
		t.Errorf("Status = %v", st)
	}
}

func TestListPodSandboxFilters(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	s2 := r.RunPodSandbox("p2", "kube-system", "dns", 1)
	if err := r.StopPodSandbox(s2); err != nil {
		t.Fatal(err)
	}
	if s1 != "s1" || s2 != "s2" {
		t.Fatalf("IDs %q %q, want s1 s2", s1, s2)
	}
	list := func(f *runtimeapi.PodSandboxFilter) []string {
		t.Helper()
		resp, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		return sandboxIDs(resp.Items)
	}
	for _, tc := range []struct {
		name string
		f    *runtimeapi.PodSandboxFilter
		want []string
	}{
		{"nil", nil, []string{s1, s2}},
		{"empty", &runtimeapi.PodSandboxFilter{}, []string{s1, s2}},
		{"id", &runtimeapi.PodSandboxFilter{Id: s2}, []string{s2}},
		{"unknown id", &runtimeapi.PodSandboxFilter{Id: "nope"}, []string{}},
		{"ready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, []string{s1}},
		{"notready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, []string{s2}},
		{"uid label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodUID: "p2"}}, []string{s2}},
		{"two labels", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodNamespace: "default", LabelPodName: "web"}}, []string{s1}},
		{"label mismatch", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodNamespace: "default", LabelPodName: "dns"}}, []string{}},
		{"id and state mismatch", &runtimeapi.PodSandboxFilter{Id: s1, State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, []string{}},
	} {
		if got := list(tc.f); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	resp, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	it := resp.Items[1]
	if it.Metadata.Uid != "p2" || it.Metadata.Namespace != "kube-system" || it.Metadata.Name != "dns" || it.Metadata.Attempt != 1 ||
		it.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || it.CreatedAt != epoch.UnixNano() {
		t.Errorf("item = %v", it)
	}
	st, _ := r.SandboxStatusOf(s1)
	if !strings.HasPrefix(st.Network.Ip, "10.0.") {
		t.Errorf("s1 IP %q, want 10.0.x.y", st.Network.Ip)
	}
	st, _ = r.SandboxStatusOf(s2)
	if st.Network.Ip != "" {
		t.Errorf("stopped sandbox IP %q, want none", st.Network.Ip)
	}
}

func TestListContainersFilters(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	s2 := r.RunPodSandbox("p2", "default", "db", 0)
	c1 := r.CreateContainer(s1, "app", 0)
	c2 := r.CreateContainer(s1, "sidecar", 0)
	c3 := r.CreateContainer(s1, "init", 0)
	c4 := r.CreateContainer(s2, "app", 0)
	for _, id := range []string{c1, c2, c4} {
		if err := r.StartContainer(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.StopContainer(c2, 1); err != nil {
		t.Fatal(err)
	}
	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	for _, tc := range []struct {
		name string
		f    *runtimeapi.ContainerFilter
		want []string
	}{
		{"nil", nil, []string{c1, c2, c3, c4}},
		{"id", &runtimeapi.ContainerFilter{Id: c3}, []string{c3}},
		{"running", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{c1, c4}},
		{"exited", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, []string{c2}},
		{"created", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{c3}},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: s1}, []string{c1, c2, c3}},
		{"sandbox+state", &runtimeapi.ContainerFilter{PodSandboxId: s2, State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{c4}},
		{"pod uid label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{LabelPodUID: "p2"}}, []string{c4}},
		{"name label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{LabelContainerName: "app"}}, []string{c1, c4}},
		{"sandbox+label", &runtimeapi.ContainerFilter{PodSandboxId: s1, LabelSelector: map[string]string{LabelContainerName: "app"}}, []string{c1}},
		{"no match", &runtimeapi.ContainerFilter{PodSandboxId: "nope"}, []string{}},
	} {
		resp, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: tc.f})
		if err != nil {
			t.Fatal(err)
		}
		if got := containerIDs(resp.Containers); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	resp, _ := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: c2}})
	got := resp.Containers[0]
	if got.PodSandboxId != s1 || got.Metadata.Name != "sidecar" || got.State != runtimeapi.ContainerState_CONTAINER_EXITED ||
		got.Labels[LabelPodUID] != "p1" || got.Image.Image == "" {
		t.Errorf("container = %v", got)
	}
}

func TestPodSandboxStatus(t *testing.T) {
	for _, with := range []bool{false, true} {
		r, fc := newRuntime(t, Options{StatusWithContainers: with})
		c := dial(t, r)
		s1 := r.RunPodSandbox("p1", "default", "web", 2)
		c1 := r.CreateContainer(s1, "app", 0)
		fc.Step(time.Second)
		resp, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s1})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Status
		if st.Id != s1 || st.Metadata.Uid != "p1" || st.Metadata.Attempt != 2 || st.State != runtimeapi.PodSandboxState_SANDBOX_READY ||
			st.CreatedAt != epoch.UnixNano() || st.Network.Ip == "" || st.Labels[LabelPodName] != "web" {
			t.Errorf("status = %v", st)
		}
		if !with {
			if resp.Timestamp != 0 || len(resp.ContainersStatuses) != 0 {
				t.Errorf("containerd-like status has timestamp %d and %d statuses", resp.Timestamp, len(resp.ContainersStatuses))
			}
		} else {
			if resp.Timestamp != fc.Now().UnixNano() || len(resp.ContainersStatuses) != 1 || resp.ContainersStatuses[0].Id != c1 {
				t.Errorf("CRI-O-like status: timestamp %d statuses %v", resp.Timestamp, resp.ContainersStatuses)
			}
		}
		if resp.Info != nil {
			t.Errorf("non-verbose Info = %v", resp.Info)
		}
		resp, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s1, Verbose: true})
		if err != nil || resp.Info["info"] == "" {
			t.Errorf("verbose: %v %v", resp, err)
		}
		_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "nope"})
		wantCode(t, err, codes.NotFound)
	}
}

func TestContainerStatusFields(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	c := dial(t, r)
	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	t0 := fc.Now()
	c1 := r.CreateContainer(s1, "app", 3)
	fc.Step(time.Second)
	if err := r.StartContainer(c1); err != nil {
		t.Fatal(err)
	}
	fc.Step(time.Second)
	if err := r.StopContainer(c1, 137); err != nil {
		t.Fatal(err)
	}
	resp, err := c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c1})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Status
	if st.Id != c1 || st.Metadata.Name != "app" || st.Metadata.Attempt != 3 || st.State != runtimeapi.ContainerState_CONTAINER_EXITED ||
		st.CreatedAt != t0.UnixNano() || st.StartedAt != t0.Add(time.Second).UnixNano() || st.FinishedAt != t0.Add(2*time.Second).UnixNano() ||
		st.ExitCode != 137 || st.Reason != "Error" || st.Labels[LabelContainerName] != "app" || st.Labels[LabelPodUID] != "p1" ||
		st.Annotations[AnnotationRestartCount] != "3" || st.LogPath == "" {
		t.Errorf("status = %v", st)
	}
	c2 := r.CreateContainer(s1, "job", 0)
	_ = r.StartContainer(c2)
	_ = r.StopContainer(c2, 0)
	if st, _ := r.ContainerStatusOf(c2); st.Reason != "Completed" || st.ExitCode != 0 {
		t.Errorf("exit 0: reason %q", st.Reason)
	}
	_, err = c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)
}

func TestStateAPIErrors(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	c1 := r.CreateContainer(s1, "app", 0)
	if err := r.StartContainer(c1); err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(c1); !errors.Is(err, ErrInvalidState) {
		t.Errorf("second start: %v", err)
	}
	for name, err := range map[string]error{
		"start":    r.StartContainer("nope"),
		"stop":     r.StopContainer("nope", 0),
		"remove":   r.RemoveContainer("nope"),
		"set":      r.SetContainerState("nope", runtimeapi.ContainerState_CONTAINER_UNKNOWN, 0),
		"stop-pod": r.StopPodSandbox("nope"),
		"rm-pod":   r.RemovePodSandbox("nope"),
		"set-ip":   r.SetSandboxIP("nope", "1.2.3.4"),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if id := r.CreateContainer("nope", "app", 0); id != "" {
		t.Errorf("CreateContainer in unknown sandbox = %q", id)
	}
	if _, err := r.RunPodSandboxSpec(SandboxSpec{ID: c1}); !errors.Is(err, ErrExists) {
		t.Errorf("sandbox with a container's ID: %v", err)
	}
	if _, err := r.CreateContainerSpec(ContainerSpec{ID: s1, SandboxID: s1, Name: "x"}); !errors.Is(err, ErrExists) {
		t.Errorf("container with a sandbox's ID: %v", err)
	}
	// Generated IDs skip explicit ones.
	if id, _ := r.RunPodSandboxSpec(SandboxSpec{ID: "s2"}); id != "s2" {
		t.Fatalf("explicit ID %q", id)
	}
	if id := r.RunPodSandbox("p3", "", "", 0); id != "s3" {
		t.Errorf("generated ID %q, want s3", id)
	}
	// gRPC maps the errors.
	c := dial(t, r)
	_, err := c.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c1})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = c.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: "nope"})
	wantCode(t, err, codes.NotFound)
}

func TestSilentChanges(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	c1 := r.CreateContainer(s1, "app", 0)
	_ = r.StartContainer(c1)
	before := r.Stats().Published
	if err := r.SetContainerState(c1, runtimeapi.ContainerState_CONTAINER_EXITED, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSandboxIP(s1, "10.0.0.5"); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSandboxState(s1, runtimeapi.PodSandboxState_SANDBOX_NOTREADY); err != nil {
		t.Fatal(err)
	}
	if got := r.Stats().Published; got != before {
		t.Errorf("silent changes published %d events", got-before)
	}
	st, _ := r.ContainerStatusOf(c1)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 2 || st.Reason != "Error" || st.FinishedAt == 0 {
		t.Errorf("container = %v", st)
	}
	_ = r.SetContainerState(c1, runtimeapi.ContainerState_CONTAINER_UNKNOWN, 0)
	pods := r.Pods()
	if len(pods) != 1 || pods[0].Sandbox.Network.Ip != "10.0.0.5" || pods[0].Sandbox.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY ||
		len(pods[0].Containers) != 1 || pods[0].Containers[0].State != runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		t.Errorf("Pods() = %v", pods)
	}
}

func TestLifecycleRPCs(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	rs, err := c.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "p1", Namespace: "default"},
		Labels:   map[string]string{"app": "web"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: rs.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 1}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		t.Fatal(err)
	}
	st, _ := r.ContainerStatusOf(cc.ContainerId)
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Image.Image != "busybox" || st.Metadata.Attempt != 1 {
		t.Errorf("container = %v", st)
	}
	if sb, _ := r.SandboxStatusOf(rs.PodSandboxId); sb.Labels["app"] != "web" || sb.Labels[LabelPodUID] != "p1" {
		t.Errorf("sandbox labels = %v", sb.Labels)
	}
	if _, err := c.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: rs.PodSandboxId}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: rs.PodSandboxId}); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.Pods()) != 0 {
		t.Errorf("pods left: %v", r.Pods())
	}
	_, err = c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: "x"})
	wantCode(t, err, codes.Unimplemented)
}

func TestCallCounting(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	s1 := r.RunPodSandbox("p1", "default", "web", 0)
	for range 3 {
		_, _ = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	}
	_, _ = c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	_, _ = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s1})
	_, _ = c.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: "nope"}) // failed calls count
	s, _ := openStream(t, c)
	eventually(t, "stream", func() bool { return r.Calls()["GetContainerEvents"] == 1 })
	want := map[string]int{"ListPodSandbox": 3, "ListContainers": 1, "PodSandboxStatus": 1, "ContainerStatus": 1, "GetContainerEvents": 1}
	if diff := cmp.Diff(want, r.Calls()); diff != "" {
		t.Errorf("Calls() (-want +got):\n%s", diff)
	}
	_ = recvN(t, s, 2) // the sandbox's stale events
	r.ResetCalls()
	if len(r.Calls()) != 0 {
		t.Errorf("after ResetCalls: %v", r.Calls())
	}
	r.Refuse(time.Minute)
	_, err := c.Version(ctx, &runtimeapi.VersionRequest{})
	wantCode(t, err, codes.Unavailable)
	if got := r.Calls()["Version"]; got != 1 {
		t.Errorf("refused Version counted %d times", got)
	}
}

func TestListen(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	sock := filepath.Join(t.TempDir(), "cri.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil { // a regular file is not removed
		t.Fatal(err)
	}
	if _, _, err := r.Listen("unix://" + sock); err == nil {
		t.Fatal("Listen over a regular file succeeded")
	}
	os.Remove(sock)
	for i, ep := range []string{"unix://" + sock, "tcp://127.0.0.1:0"} {
		addr, stop, err := r.Listen(ep)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		c := runtimeapi.NewRuntimeServiceClient(conn)
		s := subscribed(t, r, c, 1)
		sb := r.RunPodSandbox("p1", "default", "web", uint32(i))
		if got := keys(recvN(t, s, 2)); !cmp.Equal(got, []evKey{{sb, created}, {sb, started}}) {
			t.Errorf("%s: events %v", ep, got)
		}
		resp, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil || len(resp.Items) != i+1 {
			t.Errorf("%s: ListPodSandbox = %v, %v", ep, resp, err)
		}
		stop() // ends the stream
		if _, err := s.Recv(); err == nil {
			t.Errorf("%s: stream survived stop", ep)
		}
		stop()
		conn.Close()
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket file left after stop: %v", err)
	}
	if _, _, err := r.Listen("http://x"); err == nil {
		t.Error("Listen accepted http://")
	}
}

// TestListenRefusesSocketInUse: a second runtime on the socket of one that
// serves is refused with an error saying so, and the first keeps serving
// on it.
func TestListenRefusesSocketInUse(t *testing.T) {
	first, _ := newRuntime(t, Options{})
	second, _ := newRuntime(t, Options{})
	sock := filepath.Join(t.TempDir(), "cri.sock")
	addr, stop, err := first.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	first.RunPodSandbox("p1", "default", "web", 0)
	for _, ep := range []string{sock, "unix://" + sock} {
		if _, _, err := second.Listen(ep); err == nil || !strings.Contains(err.Error(), "another process is serving on "+sock) {
			t.Fatalf("second Listen(%s) = %v, want it refused", ep, err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(resp.Items) != 1 {
		t.Fatalf("the first runtime after the refused takeover: %v, %v", resp, err)
	}
}

// TestListenRemovesStaleSocket: the socket file of a runtime that died
// without removing it is replaced.
func TestListenRemovesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no stale socket to test with: %v", err)
	}
	r, _ := newRuntime(t, Options{})
	_, stop, err := r.Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	stop()
}
