package pleg

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/fakecri"
)

// The scenarios of pleg.md §7 A, against fakecri over gRPC.

// podP sets up pod P (uid p1, default/web) with sandbox s1.
func podP(e *env) string {
	id, err := e.rt.RunPodSandboxSpec(fakecri.SandboxSpec{ID: "s1", UID: "p1", Namespace: "default", Name: "web"})
	must(e.t, err)
	return id
}

// container creates container id (named id) in sandbox sb.
func container(e *env, sb, id string) string {
	id, err := e.rt.CreateContainerSpec(fakecri.ContainerSpec{ID: id, SandboxID: sb, Name: id})
	must(e.t, err)
	return id
}

// Scenario 1: first relist.
func TestFirstRelist(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	s1 := podP(e)
	must(t, e.rt.StartContainer(container(e, s1, "c1")))
	c2 := container(e, s1, "c2")
	must(t, e.rt.StartContainer(c2))
	must(t, e.rt.StopContainer(c2, 1))
	must(t, e.rt.SetContainerState(container(e, s1, "c3"), runtimeapi.ContainerState_CONTAINER_UNKNOWN, 0))
	container(e, s1, "c4")

	g := e.generic(0)
	start := e.clk.Now()
	g.Relist()
	expectEvents(t, g.Watch(), "ContainerStarted(s1)", "ContainerStarted(c1)", "ContainerDied(c2)")

	st, err := g.Cache().Get("p1")
	if err != nil || len(st.ContainerStatuses) != 4 {
		t.Fatalf("cache holds %s, %v; want 4 containers", states(st), err)
	}
	if got := g.Cache().peek("p1").modified; !got.Equal(start) {
		t.Errorf("entry stamped %v, want the relist's start %v", got, start)
	}
	if relistWM, _ := g.Cache().Watermarks(); !relistWM.Equal(start) {
		t.Errorf("global timestamp %v, want %v", relistWM, start)
	}
	if got := e.count(e.m.RunningPods); got != 1 {
		t.Errorf("running_pods = %v", got)
	}
	for _, s := range containerStateLabels {
		if got := e.count(e.m.RunningContainers.WithLabelValues(s)); got != 1 {
			t.Errorf("running_containers{%s} = %v, want 1", s, got)
		}
	}
}

// Scenario 2: steady state.
func TestSteadyRelist(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	g := e.generic(0)
	g.Relist()
	drain(g.Watch())
	first := g.Cache().peek("p1").modified

	e.clk.Step(time.Second)
	e.rt.ResetCalls()
	g.Relist()
	expectEvents(t, g.Watch())
	if got := g.Cache().peek("p1").modified; !got.Equal(first) {
		t.Errorf("entry rewritten at %v", got)
	}
	if relistWM, _ := g.Cache().Watermarks(); !relistWM.Equal(e.clk.Now()) {
		t.Errorf("global timestamp %v did not advance to %v", relistWM, e.clk.Now())
	}
	calls := e.rt.Calls()
	if calls["ListPodSandbox"] != 1 || calls["ListContainers"] != 1 || calls["PodSandboxStatus"] != 0 || calls["ContainerStatus"] != 0 {
		t.Errorf("a steady relist made %v", calls)
	}
}

// Scenario 3: transitions, the blind spot, and a pod disappearing.
func TestRelistTransitions(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	s1 := podP(e)
	c1 := container(e, s1, "c1")
	must(t, e.rt.StartContainer(c1))
	c2 := container(e, s1, "c2")
	must(t, e.rt.StartContainer(c2))
	must(t, e.rt.StopContainer(c2, 0))
	g := e.generic(0)
	g.Relist()
	drain(g.Watch())

	step := func() { e.clk.Step(time.Second); g.Relist() }
	must(t, e.rt.StopContainer(c1, 2))
	must(t, e.rt.RemoveContainer(c2))
	step()
	expectEvents(t, g.Watch(), "ContainerDied(c1)", "ContainerRemoved(c2)")

	c5 := container(e, s1, "c5")
	must(t, e.rt.StartContainer(c5))
	step()
	expectEvents(t, g.Watch(), "ContainerStarted(c5)")
	must(t, e.rt.RemoveContainer(c5))
	step()
	expectEvents(t, g.Watch(), "ContainerDied(c5)", "ContainerRemoved(c5)")

	// Never seen: created, run and removed between two relists.
	c6 := container(e, s1, "c6")
	must(t, e.rt.StartContainer(c6))
	must(t, e.rt.StopContainer(c6, 0))
	must(t, e.rt.RemoveContainer(c6))
	step()
	expectEvents(t, g.Watch())

	// The whole pod goes.
	c7 := container(e, s1, "c7")
	must(t, e.rt.StartContainer(c7))
	step()
	drain(g.Watch())
	must(t, e.rt.RemovePodSandbox(s1))
	step()
	// c1 had exited; s1 and c7 were running.
	expectEvents(t, g.Watch(), "ContainerRemoved(c1)", "ContainerDied(s1)", "ContainerRemoved(s1)",
		"ContainerDied(c7)", "ContainerRemoved(c7)")
	st, err := g.Cache().Get("p1")
	if err != nil || st.ID != "p1" || len(st.SandboxStatuses)+len(st.ContainerStatuses) != 0 {
		t.Fatalf("Get after the pod went = %s, %v; want an empty status", states(st), err)
	}
}

// Scenario 4: health.
func TestRelistHealth(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	g := e.generic(0)
	if ok, err := g.Healthy(); ok || err == nil || err.Error() != "pleg has yet to be successful" {
		t.Fatalf("before any relist: %v, %v", ok, err)
	}
	relisted := e.clk.Now()
	g.Relist()
	e.clk.Step(time.Minute)
	if ok, err := g.Healthy(); !ok {
		t.Fatalf("a minute after a relist: %v", err)
	}
	if got := e.count(e.m.LastSeen); got != float64(relisted.Unix()) {
		t.Errorf("pleg_last_seen_seconds = %v, want %v", got, relisted.Unix())
	}
	e.clk.Step(3*time.Minute + time.Second)
	ok, err := g.Healthy()
	if ok || err == nil || err.Error() != "pleg was last seen active 4m1s ago; threshold is 3m0s" {
		t.Fatalf("4m1s after the relist: %v, %v", ok, err)
	}
}

// Scenario 5: ListPodSandbox fails.
func TestRelistListError(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	g := e.generic(0)
	g.Relist()
	drain(g.Watch())
	relisted := e.clk.Now()

	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.FailRPC = map[string]codes.Code{"ListPodSandbox": codes.Unknown} })
	must(t, e.rt.StopContainer("c1", 1))
	e.clk.Step(time.Second)
	g.Relist()
	expectEvents(t, g.Watch())
	if g.relistTime != relisted {
		t.Errorf("relist time moved to %v", g.relistTime)
	}
	if relistWM, _ := g.Cache().Watermarks(); !relistWM.Equal(relisted) {
		t.Errorf("global timestamp moved to %v", relistWM)
	}
	if ok, _ := g.Healthy(); !ok {
		t.Error("unhealthy a second after a successful relist")
	}
	e.clk.Step(3 * time.Minute)
	if ok, _ := g.Healthy(); ok {
		t.Error("still healthy 3 min after the last successful relist")
	}
}

// Scenario 6: an inspection fails; the events wait for it to succeed.
func TestRelistInspectionError(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	g := e.generic(0)
	g.Relist()
	drain(g.Watch())

	must(t, e.rt.StopContainer("c1", 1))
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.FailSandboxStatus = true })
	e.clk.Step(time.Second)
	g.Relist()
	expectEvents(t, g.Watch())
	st, err := g.Cache().Get("p1")
	if st != nil || err == nil || !strings.Contains(err.Error(), "s1") {
		t.Fatalf("cache holds %v, %v; want a nil status and the error", st, err)
	}
	if !g.reinspect["p1"] {
		t.Fatal("pod not marked for reinspection")
	}

	e.clk.Step(time.Second)
	g.Relist() // still failing: still nothing
	expectEvents(t, g.Watch())

	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.FailSandboxStatus = false })
	e.clk.Step(time.Second)
	g.Relist()
	expectEvents(t, g.Watch(), "ContainerDied(c1)")
	e.clk.Step(time.Second)
	g.Relist()
	expectEvents(t, g.Watch())
}

// Scenario 7: a full channel drops and counts.
func TestRelistChannelFull(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	s1 := podP(e)
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
		must(t, e.rt.StartContainer(container(e, s1, id)))
	}
	g := e.generic(4)
	g.Relist()
	if got := len(drain(g.Watch())); got != 4 {
		t.Fatalf("%d events delivered, want 4", got)
	}
	if got := e.count(e.m.Discards); got != 2 {
		t.Fatalf("pleg_discard_events = %v, want 2", got)
	}
}

// Scenario 19: a timestamp without container statuses (containerd
// 2.0.0-2.0.2) does not make the pod look empty.
func TestTimestampWithoutStatuses(t *testing.T) {
	e := newEnv(t, fakecri.Options{StatusWithContainers: true})
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.TimestampWithoutStatuses = true })
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	g := e.generic(0)
	g.Relist()
	st, _ := g.Cache().Get("p1")
	if got := states(st); got != "c1=CONTAINER_RUNNING s1=SANDBOX_READY" {
		t.Fatalf("cache holds %q", got)
	}
	if e.rt.Calls()["ContainerStatus"] == 0 {
		t.Fatal("no fallback to ContainerStatus")
	}
}

// With statuses and a timestamp (CRI-O), the relist uses them and the
// runtime's time, and makes no ContainerStatus call.
func TestStatusWithContainers(t *testing.T) {
	e := newEnv(t, fakecri.Options{StatusWithContainers: true})
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	e.clk.Step(time.Second)
	g := e.generic(0)
	g.Relist()
	st, _ := g.Cache().Get("p1")
	if got := states(st); got != "c1=CONTAINER_RUNNING s1=SANDBOX_READY" {
		t.Fatalf("cache holds %q", got)
	}
	if n := e.rt.Calls()["ContainerStatus"]; n != 0 {
		t.Fatalf("%d ContainerStatus calls", n)
	}
	if !st.TimeStamp.Equal(e.clk.Now()) {
		t.Fatalf("status stamped %v, want the runtime's %v", st.TimeStamp, e.clk.Now())
	}
}

// The generic PLEG's own loop relists on its clock and stops cleanly.
func TestGenericLoop(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	g := e.generic(0)
	g.Start()
	g.Start() // idempotent
	e.waitRelists(g, 1)
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	e.clk.Step(time.Second)
	e.waitRelists(g, 2)
	if got := drain(g.Watch()); len(got) != 2 {
		t.Fatalf("events %v", got)
	}
	g.SetRelistPeriod(time.Minute, 5*time.Minute)
	e.clk.Step(time.Second)
	g.RequestRelist()
	e.waitRelists(g, 3)
	e.clk.Step(60 * time.Second)
	e.waitRelists(g, 4)
	g.Stop()
	g.Stop()
	if got := g.Threshold(); got != 5*time.Minute {
		t.Fatalf("threshold %v", got)
	}
}

// sandboxesLater is a runtime whose ListPodSandbox answers before a pod's
// sandbox exists while ListContainers already sees its container: the
// race of a relist with a pod being created.
type sandboxesLater struct{ Runtime }

func (sandboxesLater) ListPodSandbox(context.Context) ([]*runtimeapi.PodSandbox, error) {
	return nil, nil
}

// A relist that lists a pod's container but not its sandbox still names
// the pod (from the kubelet's container labels), and its events carry the
// status they were computed from.
func TestRelistContainerBeforeSandbox(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	must(t, e.rt.StartContainer(container(e, podP(e), "c1")))
	g := NewGeneric(sandboxesLater{e.cri}, GenericConfig{Clock: e.clk, Metrics: e.m, Logger: e.log})
	g.Relist()
	select {
	case ev := <-g.Watch():
		if ev.Type != ContainerStarted || ev.Data != "c1" {
			t.Fatalf("event %s(%v), want ContainerStarted(c1)", ev.Type, ev.Data)
		}
		if st := ev.Status; st == nil || st.Name != "web" || st.Namespace != "default" || states(st) != "c1=CONTAINER_RUNNING" {
			t.Fatalf("event status %+v (%s), want default/web with c1 running", st, states(st))
		}
	default:
		t.Fatal("no event")
	}
}

// TestRelistGroupsBySandbox: a relist puts a container in its sandbox's
// pod, as the runtime's event stream does (containerd sends a container's
// events with its sandbox's status), whatever its pod-UID label says;
// before, a label naming another pod made the relist and the stream
// disagree on which pod the container belonged to.
func TestRelistGroupsBySandbox(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	s1 := podP(e)
	mis := container(e, s1, "mis")
	must(t, e.rt.StartContainer(mis))
	// fakecri labels every container as the kubelet does; this runtime
	// lists mis with another pod's UID, as a container made by another
	// client of the runtime may be.
	e.cri = relabel{Runtime: e.cri, id: mis, uid: "other"}

	g := e.generic(0)
	g.Relist()
	var got []string
	for _, ev := range func() []*PodLifecycleEvent {
		var out []*PodLifecycleEvent
		for {
			select {
			case ev := <-g.Watch():
				out = append(out, ev)
			default:
				return out
			}
		}
	}() {
		got = append(got, fmt.Sprintf("%s %s(%v)", ev.ID, ev.Type, ev.Data))
	}
	sort.Strings(got)
	if want := []string{"p1 ContainerStarted(mis)", "p1 ContainerStarted(s1)"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if st, _ := g.Cache().Get("p1"); len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].Id != mis {
		t.Errorf("pod p1 holds %s, want the container mis", states(st))
	}
	if st, _ := g.Cache().Get("other"); st != nil && len(st.ContainerStatuses) != 0 {
		t.Errorf("pod other holds %s", states(st))
	}
}

// relabel lists one container with another pod-UID label.
type relabel struct {
	Runtime
	id, uid string
}

func (r relabel) ListContainers(ctx context.Context, sandboxID string) ([]*runtimeapi.Container, error) {
	cs, err := r.Runtime.ListContainers(ctx, sandboxID)
	for _, c := range cs {
		if c.Id == r.id {
			c.Labels = map[string]string{podUIDLabel: r.uid}
		}
	}
	return cs, err
}
