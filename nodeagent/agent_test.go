package nodeagent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/fakecri"
	"github.com/kubevents/kubevents/pleg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// capture is a Recorder that keeps what it is given.
type capture struct {
	mu  sync.Mutex
	got []string
}

func (c *capture) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	ref := regarding.(*corev1.ObjectReference)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, fmt.Sprintf("%s %s/%s(%s) %s %s %s %s", ref.Kind, ref.Namespace, ref.Name, ref.UID,
		ref.FieldPath, eventtype, reason+"/"+action, fmt.Sprintf(note, args...)))
}

func (c *capture) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.got
	c.got = nil
	return out
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var base = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// TestAgent drives fakecri through a crashloop and checks the Events the
// agent records from a real evented PLEG.
func TestAgent(t *testing.T) {
	clk := clocktesting.NewFakeClock(base)
	rt := fakecri.New(fakecri.Options{Clock: clk, EagerStreamHeaders: true})
	defer rt.Close()
	// Running before the agent: not told again.
	old := rt.RunPodSandbox("old-uid", "default", "old", 0)
	must(t, rt.StartContainer(rt.CreateContainer(old, "db", 0)))
	clk.Step(time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	conn, err := rt.Dial(ctx)
	must(t, err)
	defer conn.Close()
	p := pleg.NewEvented(pleg.NewCRIRuntime(conn), pleg.EventedConfig{Clock: clk})
	rec := &capture{}
	a := New(p.Watch(), p.Cache(), rec, Config{Clock: clk})
	p.Start()
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	defer func() { cancel(); <-done; p.Stop() }()
	eventually(t, p.InUse, "the stream")

	wait := func(want ...string) {
		t.Helper()
		var got []string
		eventually(t, func() bool { got = append(got, rec.take()...); return len(got) >= len(want) }, fmt.Sprint(want))
		got = append(got, rec.take()...)
		if !slices.Equal(got, want) {
			t.Fatalf("recorded\n%q\nwant\n%q", got, want)
		}
	}
	const pod = "Pod default/crash(uid-crash) spec.containers{app}"
	clk.Step(time.Second)
	s := rt.RunPodSandbox("uid-crash", "default", "crash", 0)
	c0 := rt.CreateContainer(s, "app", 0)
	must(t, rt.StartContainer(c0))
	wait(pod + " Normal Started/StartContainer Started container app")
	clk.Step(time.Second)
	must(t, rt.StopContainer(c0, 1))
	wait(pod + " Warning Exited/ObserveExit Container app exited with code 1 (Error)")

	clk.Step(10 * time.Second)
	c1 := rt.CreateContainer(s, "app", 1)
	must(t, rt.RemoveContainer(c0))
	must(t, rt.StartContainer(c1))
	wait(pod + " Normal Started/StartContainer Started container app")
	clk.Step(time.Second)
	must(t, rt.StopContainer(c1, 1))
	wait(pod+" Warning Exited/ObserveExit Container app exited with code 1 (Error)",
		pod+" Warning BackOff/RestartContainer Back-off restarting failed container app in pod crash_default(uid-crash)")

	// A clean exit is Normal, and not a back-off.
	clk.Step(time.Second)
	job := rt.CreateContainer(s, "job", 0)
	must(t, rt.StartContainer(job))
	clk.Step(time.Second)
	must(t, rt.StopContainer(job, 0))
	const jobRef = "Pod default/crash(uid-crash) spec.containers{job}"
	wait(jobRef+" Normal Started/StartContainer Started container job",
		jobRef+" Normal Exited/ObserveExit Container job exited with code 0 (Completed)")

	// The old pod's container, started before the agent, stops now.
	clk.Step(time.Second)
	must(t, rt.StopPodSandbox(old))
	wait("Pod default/old(old-uid) spec.containers{db} Warning Exited/ObserveExit Container db exited with code 137 (Error)")

	if got := testutil.ToFloat64(a.Recorded(ReasonBackOff)); got != 1 {
		t.Fatalf("BackOff recorded %v times", got)
	}
	if n := testutil.CollectAndCount(a.skipped); n != 0 {
		t.Fatalf("%d skip reasons", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAgentRaces: what the agent records when the PLEG's cache and its
// events disagree, as they do when a relist and the event stream race.
func TestAgentRaces(t *testing.T) {
	clk := clocktesting.NewFakeClock(base)
	status := func(state runtimeapi.ContainerState, started, finished time.Time) *pleg.PodStatus {
		cs := &runtimeapi.ContainerStatus{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: state,
			StartedAt: started.UnixNano(), ExitCode: 2, Reason: "Error"}
		if !finished.IsZero() {
			cs.FinishedAt = finished.UnixNano()
		}
		return &pleg.PodStatus{ID: "uid-p", Name: "p", Namespace: "default",
			SandboxStatuses:   []*runtimeapi.PodSandboxStatus{{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
			ContainerStatuses: []*runtimeapi.ContainerStatus{cs}}
	}
	const ref = "Pod default/p(uid-p) spec.containers{app}"
	started := ref + " Normal Started/StartContainer Started container app"
	exited := ref + " Warning Exited/ObserveExit Container app exited with code 2 (Error)"

	t.Run("the event's status, not the cache's", func(t *testing.T) {
		// The cache already holds a replayed sandbox event's status,
		// stamped newer, from before the container existed.
		cache := pleg.NewCache()
		empty := status(runtimeapi.ContainerState_CONTAINER_RUNNING, base, time.Time{})
		empty.ContainerStatuses = nil
		cache.Set("uid-p", empty, nil, base.Add(time.Second), false)
		rec := &capture{}
		a := New(nil, cache, rec, Config{Clock: clk})
		a.Handle(&pleg.PodLifecycleEvent{ID: "uid-p", Type: pleg.ContainerStarted, Data: "c1",
			Status: status(runtimeapi.ContainerState_CONTAINER_RUNNING, base, time.Time{})})
		if got := rec.take(); !slices.Equal(got, []string{started}) {
			t.Fatalf("recorded %q", got)
		}
	})
	t.Run("started and exited between two looks", func(t *testing.T) {
		rec := &capture{}
		a := New(nil, pleg.NewCache(), rec, Config{Clock: clk})
		a.Handle(&pleg.PodLifecycleEvent{ID: "uid-p", Type: pleg.ContainerDied, Data: "c1",
			Status: status(runtimeapi.ContainerState_CONTAINER_EXITED, base.Add(time.Second), base.Add(2*time.Second))})
		// The stream's late STARTED, if it still comes, is not news.
		a.Handle(&pleg.PodLifecycleEvent{ID: "uid-p", Type: pleg.ContainerStarted, Data: "c1",
			Status: status(runtimeapi.ContainerState_CONTAINER_RUNNING, base.Add(time.Second), time.Time{})})
		if got := rec.take(); !slices.Equal(got, []string{started, exited}) {
			t.Fatalf("recorded %q", got)
		}
	})
	t.Run("exited, started before the agent", func(t *testing.T) {
		rec := &capture{}
		a := New(nil, pleg.NewCache(), rec, Config{Clock: clk})
		a.Handle(&pleg.PodLifecycleEvent{ID: "uid-p", Type: pleg.ContainerDied, Data: "c1",
			Status: status(runtimeapi.ContainerState_CONTAINER_EXITED, base.Add(-time.Minute), base.Add(time.Second))})
		if got := rec.take(); !slices.Equal(got, []string{exited}) {
			t.Fatalf("recorded %q", got)
		}
	})
}
