package fakecri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runBackground runs fn in a goroutine until the test ends (or stop is
// called) and checks it returned nil.
func runBackground(t *testing.T, fn func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- fn(ctx) }()
	var done bool
	stop = func() {
		if done {
			return
		}
		done = true
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("scenario: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// podState summarises the state: "name:sandboxState[ctr@attempt=state,...]".
func podState(r *Runtime) []string {
	var out []string
	for _, p := range r.Pods() {
		var cs []string
		for _, c := range p.Containers {
			cs = append(cs, fmt.Sprintf("%s@%d=%s", c.Metadata.Name, c.Metadata.Attempt,
				strings.TrimPrefix(c.State.String(), "CONTAINER_")))
		}
		out = append(out, fmt.Sprintf("%s:%s[%s]", p.Sandbox.Metadata.Name,
			strings.TrimPrefix(p.Sandbox.State.String(), "SANDBOX_"), strings.Join(cs, ",")))
	}
	return out
}

func waitState(t *testing.T, r *Runtime, want ...string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = podState(r)
		if cmp.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %v, want %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestScenarioSteady(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	c := dial(t, r)
	stop := runBackground(t, func(ctx context.Context) error {
		return r.RunScenario(ctx, ScenarioSteady, ScenarioOptions{Pods: 100, Containers: 5})
	})
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	eventually(t, "500 running containers", func() bool {
		resp, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: running})
		return err == nil && len(resp.Containers) == 500
	})
	resp, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(resp.Items) != 100 {
		t.Fatalf("ListPodSandbox: %d, %v", len(resp.Items), err)
	}
	if p := resp.Items[42].Metadata; p.Name != "steady-42" || p.Uid != "uid-steady-42" || p.Namespace != "default" {
		t.Errorf("pod 42 = %v", p)
	}
	if st := r.Stats(); st.Published != 100*(2+5*2) {
		t.Errorf("Published = %d", st.Published)
	}
	stop()
	if len(r.Pods()) != 100 {
		t.Error("the scenario's end changed the state")
	}
}

func TestScenarioCrashloop(t *testing.T) {
	for _, scale := range []float64{1, 10} {
		t.Run(fmt.Sprint("scale ", scale), func(t *testing.T) {
			r, fc := newRuntime(t, Options{})
			sub := r.Subscribe()
			defer sub.Close()
			runBackground(t, func(ctx context.Context) error {
				return r.RunScenario(ctx, ScenarioCrashloop, ScenarioOptions{TimeScale: scale})
			})
			d := func(x time.Duration) time.Duration { return time.Duration(float64(x) / scale) }
			waitState(t, r, "crash:READY[app@0=RUNNING]")
			stepWhenWaiting(t, fc, d(5*time.Second)) // CrashAfter
			waitState(t, r, "crash:READY[app@0=EXITED]")
			st, _ := r.ContainerStatusOf(r.Pods()[0].Containers[0].Id)
			if st.ExitCode != 1 || st.Reason != "Error" {
				t.Errorf("exit %d %q", st.ExitCode, st.Reason)
			}
			// The back-off: nothing before it ends.
			stepWhenWaiting(t, fc, d(10*time.Second)-1)
			if got := podState(r); !cmp.Equal(got, []string{"crash:READY[app@0=EXITED]"}) {
				t.Fatalf("restarted early: %v", got)
			}
			fc.Step(1)
			waitState(t, r, "crash:READY[app@0=EXITED,app@1=RUNNING]")
			stepWhenWaiting(t, fc, d(5*time.Second))
			waitState(t, r, "crash:READY[app@0=EXITED,app@1=EXITED]")
			stepWhenWaiting(t, fc, d(20*time.Second))
			// attempt 2 runs; attempt 0 is removed, attempt 1 kept (kubelet GC)
			waitState(t, r, "crash:READY[app@1=EXITED,app@2=RUNNING]")
			backOffs := []time.Duration{40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
			for i, b := range backOffs {
				attempt := i + 2
				stepWhenWaiting(t, fc, d(5*time.Second))
				waitState(t, r, fmt.Sprintf("crash:READY[app@%d=EXITED,app@%d=EXITED]", attempt-1, attempt))
				stepWhenWaiting(t, fc, d(b)-1)
				if got := podState(r); len(got[0]) > 0 && strings.Contains(got[0], fmt.Sprintf("app@%d", attempt+1)) {
					t.Fatalf("attempt %d started before its %v back-off", attempt+1, b)
				}
				fc.Step(1)
				waitState(t, r, fmt.Sprintf("crash:READY[app@%d=EXITED,app@%d=RUNNING]", attempt, attempt+1))
			}
			// The first events: sandbox, attempt 0 created/started/stopped, attempt 1 ...
			want := []runtimeapi.ContainerEventType{created, started, created, started, stopped, created, started, stopped, created, started, deleted}
			evs := recvN(t, sub, len(want))
			for i, ev := range evs {
				if ev.ContainerEventType != want[i] {
					t.Fatalf("event %d: %v, want %v (all: %v)", i, ev.ContainerEventType, want[i], keys(evs))
				}
			}
		})
	}
}

func TestScenarioChurn(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	sub := r.Subscribe()
	defer sub.Close()
	runBackground(t, func(ctx context.Context) error {
		return r.RunScenario(ctx, ScenarioChurn, ScenarioOptions{ChurnInterval: time.Second, ChurnLifetime: 3 * time.Second})
	})
	waitState(t, r, "churn-0:READY[c0@0=RUNNING]")
	stepWhenWaiting(t, fc, time.Second)
	waitState(t, r, "churn-0:READY[c0@0=RUNNING]", "churn-1:READY[c0@0=RUNNING]")
	stepWhenWaiting(t, fc, time.Second)
	waitState(t, r, "churn-0:READY[c0@0=RUNNING]", "churn-1:READY[c0@0=RUNNING]", "churn-2:READY[c0@0=RUNNING]")
	stepWhenWaiting(t, fc, time.Second)
	waitState(t, r, "churn-1:READY[c0@0=RUNNING]", "churn-2:READY[c0@0=RUNNING]", "churn-3:READY[c0@0=RUNNING]")
	stepWhenWaiting(t, fc, time.Second)
	waitState(t, r, "churn-2:READY[c0@0=RUNNING]", "churn-3:READY[c0@0=RUNNING]", "churn-4:READY[c0@0=RUNNING]")
	// churn-0's life in events: created, started, c created, started,
	// then (after churn-1..3's creations) stopped, sandbox stopped,
	// c deleted, sandbox deleted.
	var s0 []evKey
	for len(s0) < 8 {
		ev := recv(t, sub)
		if ev.PodSandboxStatus.Metadata.Name == "churn-0" {
			s0 = append(s0, evKey{ev.ContainerId, ev.ContainerEventType})
		}
	}
	want := []evKey{{"s1", created}, {"s1", started}, {"c1", created}, {"c1", started}, {"c1", stopped}, {"s1", stopped}, {"c1", deleted}, {"s1", deleted}}
	if !cmp.Equal(s0, want) {
		t.Errorf("churn-0 events %v", s0)
	}
	if st, _ := r.ContainerStatusOf("c1"); st != nil {
		t.Error("churn-0's container still exists")
	}
}

func TestScenarioErrors(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	for _, tc := range []struct {
		name string
		opts ScenarioOptions
		want string
	}{
		{"nope", ScenarioOptions{}, `unknown scenario "nope"`},
		{ScenarioSteady, ScenarioOptions{Pods: -1}, "negative"},
		{ScenarioScript, ScenarioOptions{}, "no script file"},
		{ScenarioScript, ScenarioOptions{ScriptFile: filepath.Join(t.TempDir(), "missing")}, "opening script"},
	} {
		err := r.RunScenario(ctx, tc.name, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.name, tc.opts, err, tc.want)
		}
	}
	if !cmp.Equal(Scenarios(), []string{"steady", "crashloop", "churn", "script"}) {
		t.Errorf("Scenarios() = %v", Scenarios())
	}
}

// TestScenarioEndsWithContext: a cancelled context ends every scenario
// with nil, even while it sleeps on the clock.
func TestScenarioEndsWithContext(t *testing.T) {
	for _, name := range []string{ScenarioSteady, ScenarioCrashloop, ScenarioChurn} {
		r, fc := newRuntime(t, Options{})
		c, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- r.RunScenario(c, name, ScenarioOptions{Pods: 1}) }()
		if name != ScenarioSteady {
			eventually(t, "scenario sleeping", fc.HasWaiters)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// script9and10 is §7 scenarios 9 and 10 plus a few faults.
const script9and10 = `# §7 scenario 9: pod start sequence
at 0s run-pod web uid=p1 id=s1 ip=10.0.0.5
at 1s create web/c1 id=c1
      start web/c1            # right after the create, still at 1s
at 2s create web/c2 image=busybox:1
start web/c2
log started both
# scenario 10: stop and delete
at 10s stop web/c1 exit=137
sleep 500ms
remove web/c1
fault drop 1
stop web/c2 exit=0            # dropped: a missed event
fault duplicate on
set web/c2 state=unknown
set-ip web 10.0.0.6
set-pod web state=notready
run-pod db uid=p2
fault duplicate off
fault fail-rpc ListPodSandbox Unavailable
fault fail-status on
fault future 1h
fault seconds off
fault reorder off
fault nil-status off
fault timestamp-without-statuses off
fault delay 0s
fault unimplemented off
fault events-disabled off
`

func TestScript(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	c := dial(t, r)
	sub := r.Subscribe()
	defer sub.Close()
	done := make(chan error, 1)
	go func() { done <- r.RunScript(ctx, strings.NewReader(script9and10)) }()

	waitState(t, r, "web:READY[]")
	stepWhenWaiting(t, fc, time.Second)
	waitState(t, r, "web:READY[c1@0=RUNNING]")
	stepWhenWaiting(t, fc, time.Second)
	waitState(t, r, "web:READY[c1@0=RUNNING,c2@0=RUNNING]")
	stepWhenWaiting(t, fc, 8*time.Second)
	waitState(t, r, "web:READY[c1@0=EXITED,c2@0=RUNNING]")
	stepWhenWaiting(t, fc, 500*time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitState(t, r, "web:NOTREADY[c2@0=UNKNOWN]", "db:READY[]")

	want := []evKey{
		{"s1", created}, {"s1", started}, {"c1", created}, {"c1", started}, {"c2", created}, {"c2", started},
		{"c1", stopped}, {"c1", deleted}, // c2's STOPPED dropped
		{"s2", created}, {"s2", created}, {"s2", started}, {"s2", started}, // duplicated
	}
	evs := recvN(t, sub, len(want))
	if got := keys(evs); !cmp.Equal(got, want) {
		t.Errorf("events %v", got)
	}
	for i, at := range []time.Duration{0, 0, time.Second, time.Second, 2 * time.Second, 2 * time.Second, 10 * time.Second, 10*time.Second + 500*time.Millisecond} {
		if evs[i].CreatedAt != epoch.Add(at).UnixNano() {
			t.Errorf("event %d %v at %v, want %v", i, keys(evs[i:i+1]), time.Unix(0, evs[i].CreatedAt).Sub(epoch), at)
		}
	}
	if ip := evs[0].PodSandboxStatus.Network.Ip; ip != "10.0.0.5" {
		t.Errorf("ip %s", ip)
	}
	if st, _ := r.ContainerStatusOf("c2"); st.Image.Image != "busybox:1" {
		t.Errorf("image %v", st.Image)
	}
	if sb, _ := r.SandboxStatusOf("s1"); sb.Network.Ip != "10.0.0.6" || sb.Metadata.Uid != "p1" {
		t.Errorf("sandbox %v", sb)
	}
	f := r.Faults()
	if f.FailRPC["ListPodSandbox"] != codes.Unavailable || !f.FailSandboxStatus || f.FutureTimestamps != time.Hour || f.Duplicate {
		t.Errorf("faults %+v", f)
	}
	_, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	wantCode(t, err, codes.Unavailable)

	if err := r.RunScript(ctx, strings.NewReader("fault fail-rpc ListPodSandbox off\nfault clear\nfault drop 3\nfault break\nfault flush\nfault refuse 1s\n")); err != nil {
		t.Fatal(err)
	}
	if f := r.Faults(); f.FailSandboxStatus || f.DropNext != 3 || len(f.FailRPC) != 0 {
		t.Errorf("faults after clear %+v", f)
	}
	_, err = sub.Recv()
	wantCode(t, err, codes.Unavailable) // broken
}

func TestScriptActsOnScenarioPods(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	stop := runBackground(t, func(ctx context.Context) error {
		return r.RunScenario(ctx, ScenarioSteady, ScenarioOptions{Pods: 2, Containers: 1})
	})
	waitState(t, r, "steady-0:READY[c0@0=RUNNING]", "steady-1:READY[c0@0=RUNNING]")
	stop()
	if err := r.RunScript(ctx, strings.NewReader("stop steady-1/c0 exit=2\nremove-pod steady-0\n")); err != nil {
		t.Fatal(err)
	}
	waitState(t, r, "steady-1:READY[c0@0=EXITED]")
}

func TestScriptFile(t *testing.T) {
	r, _ := newRuntime(t, Options{})
	path := filepath.Join(t.TempDir(), "s.fcri")
	if err := os.WriteFile(path, []byte("run-pod web\ncreate web/app\nstart web/app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.RunScenario(ctx, ScenarioScript, ScenarioOptions{ScriptFile: path}); err != nil {
		t.Fatal(err)
	}
	waitState(t, r, "web:READY[app@0=RUNNING]")
	if err := os.WriteFile(path, []byte("run-pod web\nstart web/nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := r.RunScriptFile(ctx, path)
	var se *ScriptError
	if !errors.As(err, &se) || se.Line != 2 || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v", err)
	}
}

func TestScriptErrors(t *testing.T) {
	for _, tc := range []struct {
		script string
		line   int
		want   string
	}{
		{"run-pod web\n\n# comment\nstrat web/c1\n", 4, `line 4 (strat web/c1): unknown command "strat"`},
		{"at soon run-pod web\n", 1, `bad time "soon"`},
		{"at 1s\n", 1, `"at" wants a duration and a command`},
		{"run-pod web color=red\n", 1, `unknown option "color"`},
		{"run-pod\n", 1, "want 1 argument(s), got 0"},
		{"run-pod web\ncreate web\n", 2, `want POD/CONTAINER, got "web"`},
		{"create web/c1 attempt=-1\n", 1, `bad attempt "-1"`},
		{"stop web/c1 exit=x\n", 1, `bad exit "x"`},
		{"set web/c1 state=sleepy\n", 1, "want state=created|running|exited|unknown"},
		{"set-pod web state=gone\n", 1, "want state=ready or state=notready"},
		{"sleep forever\n", 1, `bad duration "forever"`},
		{"fault\n", 1, "fault wants a name"},
		{"fault explode\n", 1, `unknown fault "explode"`},
		{"fault duplicate maybe\n", 1, "want on or off"},
		{"fault drop\n", 1, "fault drop wants 1 argument(s), got 0"},
		{"fault drop -2\n", 1, `bad count "-2"`},
		{"fault fail-rpc Version Nope\n", 1, `unknown gRPC code "Nope"`},
		{"fault delay soon\n", 1, `bad duration "soon"`},
		{"fault break now\n", 1, "fault break wants 0 argument(s), got 1"},
		// Run-time errors name the line too.
		{"run-pod web\nstart web/c9\n", 2, `line 2 (start web/c9): no container "web/c9"`},
		{"stop-pod db\n", 1, `no pod "db"`},
		{"run-pod web id=x\nrun-pod db id=x\n", 2, "already exists"},
		{"run-pod web\ncreate web/c1\nstart web/c1\nstart web/c1\n", 4, "invalid state"},
	} {
		r := New(Options{})
		err := r.RunScript(ctx, strings.NewReader(tc.script))
		r.Close()
		var se *ScriptError
		if !errors.As(err, &se) || se.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want line %d and %q", tc.script, err, tc.line, tc.want)
		}
	}
}

// TestScriptWaitsOnClock: "at" and "sleep" wait on the runtime clock, and
// a cancelled script returns nil.
func TestScriptWaitsOnClock(t *testing.T) {
	r, fc := newRuntime(t, Options{})
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.RunScript(c, strings.NewReader("at 1m run-pod a\nsleep 1h\nrun-pod b\n")) }()
	stepWhenWaiting(t, fc, time.Minute-1)
	if len(r.Pods()) != 0 {
		t.Fatal("ran before its time")
	}
	fc.Step(1)
	waitState(t, r, "a:READY[]")
	eventually(t, "sleep", fc.HasWaiters)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("cancelled script: %v", err)
	}
	if len(r.Pods()) != 1 {
		t.Error("ran past the cancel")
	}
}
