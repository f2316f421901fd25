package nodeagent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/pleg"
)

// podEvent is a PLEG event about container id of pod uid-p (default/p),
// with a status holding the container as given.
func podEvent(typ pleg.PodLifeCycleEventType, id, name string, attempt uint32, state runtimeapi.ContainerState, started, finished time.Time, code int32) *pleg.PodLifecycleEvent {
	cs := &runtimeapi.ContainerStatus{Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		State: state, StartedAt: started.UnixNano(), ExitCode: code}
	if !finished.IsZero() {
		cs.FinishedAt = finished.UnixNano()
	}
	return &pleg.PodLifecycleEvent{ID: "uid-p", Type: typ, Data: id,
		Status: &pleg.PodStatus{ID: "uid-p", Name: "p", Namespace: "default", ContainerStatuses: []*runtimeapi.ContainerStatus{cs}}}
}

const ref = "Pod default/p(uid-p) spec.containers{app} "

// TestAgentExitCodeOtherThanSeries: failed exits with the series' code
// (the container's first failure's) share its action, so they form one
// series; an exit with another code (containerd's 255 for a container
// that exited while it was down) has an action of its own, so it is an
// Event of its own, not one more "exited with code 1".
func TestAgentExitCodeOtherThanSeries(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(base)
	rec := &capture{}
	a := New(nil, nil, rec, Config{Clock: clk})
	at := base.Add(time.Second)
	for i, code := range []int32{1, 1, 255, 1, 137} {
		id := string(rune('a' + i))
		a.Handle(podEvent(pleg.ContainerDied, id, "app", uint32(i), runtimeapi.ContainerState_CONTAINER_EXITED, at, at.Add(time.Second), code))
	}
	w := func(action string, code int) string {
		return fmt.Sprintf("%sWarning Exited/%s Container app exited with code %d (Error)", ref, action, code)
	}
	var exits []string
	for _, e := range rec.take() {
		if strings.Contains(e, " Exited/") {
			exits = append(exits, e)
		}
	}
	want := []string{w("ObserveExit", 1), w("ObserveExit", 1), w("ObserveExitCode255", 255), w("ObserveExit", 1), w("ObserveExitCode137", 137)}
	if !slices.Equal(exits, want) {
		t.Fatalf("exits recorded as\n%q\nwant\n%q", exits, want)
	}
}

// TestAgentResumesState: an agent stopped while a container runs leaves
// its state; its successor, resumed from it, records the container's
// exit (which happened before the successor began, with its code) and
// not its start again; a container the predecessor never saw, which
// started and exited before the chain began, is not recorded.
func TestAgentResumesState(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(base)
	rec := &capture{}
	first := New(nil, nil, rec, Config{Clock: clk})
	startedAt := base.Add(time.Second)
	first.Handle(podEvent(pleg.ContainerStarted, "c1", "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING, startedAt, time.Time{}, 0))
	if got := rec.take(); !slices.Equal(got, []string{ref + "Normal Started/StartContainer Started container app"}) {
		t.Fatalf("first agent recorded %q", got)
	}

	path := filepath.Join(t.TempDir(), "state")
	if err := writeState(path, first.State()); err != nil {
		t.Fatal(err)
	}
	// The container exits while no agent runs; the next starts later.
	finishedAt := base.Add(5 * time.Second)
	clk.SetTime(base.Add(10 * time.Second))
	s, err := takeState(path)
	if err != nil || s == nil {
		t.Fatalf("takeState: %v, %v", s, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the state file is still there after it was taken: %v", err)
	}
	second := New(nil, nil, rec, Config{Clock: clk, Resume: s})
	exited := func(id string, started, finished time.Time) *pleg.PodLifecycleEvent {
		return podEvent(pleg.ContainerDied, id, "app", 0, runtimeapi.ContainerState_CONTAINER_EXITED, started, finished, 3)
	}
	second.Handle(exited("c1", startedAt, finishedAt))
	second.Handle(exited("c1", startedAt, finishedAt)) // a relist more
	second.Handle(podEvent(pleg.ContainerStarted, "c1", "app", 0, runtimeapi.ContainerState_CONTAINER_EXITED, startedAt, finishedAt, 3))
	second.Handle(exited("c0", base.Add(-3*time.Second), base.Add(-2*time.Second)))
	want := []string{ref + "Warning Exited/ObserveExit Container app exited with code 3 (Error)"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("resumed agent recorded\n%q\nwant\n%q", got, want)
	}

	// Without a state, the same exit is before the agent began: not
	// recorded (what the restart lost before).
	fresh := New(nil, nil, rec, Config{Clock: clk})
	fresh.Handle(exited("c1", startedAt, finishedAt))
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("an agent without state recorded %q", got)
	}
}

// TestTakeState: no file is no state; a file that is not a state is an
// error naming it, and stays for a human to look at.
func TestTakeState(t *testing.T) {
	dir := t.TempDir()
	if s, err := takeState(filepath.Join(dir, "none")); s != nil || err != nil {
		t.Errorf("takeState of no file = %v, %v; want nil, nil", s, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := takeState(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("takeState of a bad file: %v, want an error naming it", err)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Errorf("the bad file was removed: %v", err)
	}
}
