package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/containerdproc"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/nodeagent"
	"github.com/kubevents/kubevents/pleg"
)

// The tests here run nodeagent against a real containerd 2.x
// (internal/containerdproc: built from tools/containerd, real runc
// containers of a local busybox image), driving it through CRI as the
// kubelet does: a sandbox per pod, the kubelet's labels, one container per
// attempt, the last dead one kept until the next attempt starts. They skip,
// saying why, where containerd cannot run or is not built yet.

// kubelet drives a containerd through CRI as the kubelet drives a
// runtime.
type kubelet struct {
	t  *testing.T
	c  *containerdproc.Containerd
	rt runtimeapi.RuntimeServiceClient
}

func newKubelet(t *testing.T, c *containerdproc.Containerd) *kubelet {
	rt, closeRT, err := c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeRT)
	return &kubelet{t: t, c: c, rt: rt}
}

// retry calls f until it succeeds or a minute passes: a kubelet retries
// what failed while the runtime restarted.
func retry[T any](k *kubelet, what string, f func(ctx context.Context) (T, error)) T {
	k.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		v, err := f(ctx)
		cancel()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *kubelet) runPod(uid, name string) *containerdproc.Pod {
	return retry(k, "running pod "+name, func(ctx context.Context) (*containerdproc.Pod, error) {
		return k.c.RunPod(ctx, k.rt, uid, "default", name)
	})
}

// start creates and starts attempt of a container running command.
func (k *kubelet) start(pod *containerdproc.Pod, name string, attempt uint32, command string) string {
	id := retry(k, "creating "+name, func(ctx context.Context) (string, error) {
		return pod.CreateContainer(ctx, k.rt, name, attempt, command, nil)
	})
	retry(k, "starting "+name, func(ctx context.Context) (struct{}, error) {
		_, err := k.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
		return struct{}{}, err
	})
	return id
}

func (k *kubelet) status(id string) *runtimeapi.ContainerStatus {
	return retry(k, "status of "+id, func(ctx context.Context) (*runtimeapi.ContainerStatus, error) {
		resp, err := k.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		return resp.GetStatus(), err
	})
}

// waitExited waits until the runtime reports the container exited.
func (k *kubelet) waitExited(id string) *runtimeapi.ContainerStatus {
	k.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := k.status(id)
		if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("container %s did not exit: %v", id, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (k *kubelet) remove(id string) {
	retry(k, "removing "+id, func(ctx context.Context) (struct{}, error) {
		_, err := k.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
		return struct{}{}, err
	})
}

// crashloop runs attempts of a container that fails, as the kubelet
// restarts one: each attempt after the previous one exited and a back-off
// (base, doubling), the previous dead container removed when the next is
// created. between, when set, is called after each attempt exited. It
// returns the last container's ID and the exit codes the runtime reported.
func (k *kubelet) crashloop(pod *containerdproc.Pod, name string, attempts int, command string, base time.Duration, between func(attempt int)) (string, []int32) {
	var last string
	var codes []int32
	backoff := base
	for a := range attempts {
		id := k.start(pod, name, uint32(a), command)
		if last != "" {
			k.remove(last)
		}
		last = id
		codes = append(codes, k.waitExited(id).ExitCode)
		if between != nil {
			between(a)
		}
		if a < attempts-1 {
			time.Sleep(backoff)
			backoff *= 2
		}
	}
	return last, codes
}

// startAgentWith runs nodeagent with o (its endpoint, server and node
// set by the caller) in the test's process, as startAgent does.
func startAgentWith(t *testing.T, o nodeagent.Options) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{logs: &syncbuf.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	o.MetricsAddr, o.LogLevel, o.ShutdownTimeout = "127.0.0.1:0", "info", 10*time.Second
	if o.NodeName == "" {
		o.NodeName = "node-1"
	}
	if o.PLEG == "" {
		o.PLEG = "evented"
	}
	o.Ready = func(addr string) { ready <- addr }
	go func() { a.done <- nodeagent.Run(ctx, o, a.logs) }()
	select {
	case addr := <-ready:
		a.metrics = "http://" + addr
	case err := <-a.done:
		cancel()
		t.Fatalf("nodeagent: %v\n%s", err, a.logs.String())
	}
	t.Cleanup(func() {
		if a.cancel != nil {
			a.cancel()
			<-a.done
		}
		if t.Failed() {
			t.Logf("nodeagent's log:\n%s", a.logs.String())
		}
	})
	return a
}

func (a *agent) metric(t *testing.T, name string) float64 {
	t.Helper()
	return scrape(t, a.metrics+"/metrics")[name]
}

func (a *agent) waitEvented(t *testing.T) {
	t.Helper()
	eventuallyE2E(t, func() bool { return a.metric(t, "kubelet_evented_pleg_in_use") == 1 }, "the agent following containerd's stream")
}

// storedEvents lists the events about a pod, by reason, failing on a
// reason stored twice unless allowed.
func storedEvents(t *testing.T, srv *eventsdtest.Process, pod string) []eventsv1.Event {
	t.Helper()
	list, err := srv.Clientset().EventsV1().Events("default").List(context.Background(),
		metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].Reason+list.Items[i].Note < list.Items[j].Reason+list.Items[j].Note
	})
	return list.Items
}

// countsByReason sums the stored occurrences of each reason.
func countsByReason(evs []eventsv1.Event) map[string]int {
	got := map[string]int{}
	for i := range evs {
		got[evs[i].Reason] += count(&evs[i])
	}
	return got
}

func describe(evs []eventsv1.Event) string {
	var b strings.Builder
	for i := range evs {
		fmt.Fprintf(&b, "\n  %s x%d %s (action %s)", evs[i].Reason, count(&evs[i]), evs[i].Note, evs[i].Action)
	}
	return b.String()
}

// waitRecorded waits until the agent's recorded counters equal want.
func waitRecorded(t *testing.T, a *agent, want map[string]int) {
	t.Helper()
	got := map[string]float64{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape(t, a.metrics+"/metrics")
		done := true
		for reason, n := range want {
			got[reason] = m["nodeagent_events_recorded_total{reason="+reason+"}"]
			done = done && got[reason] == float64(n)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the agent to record %v: recorded %v (missed events caught by relists: %v)",
				want, got, m["kubelet_pleg_missed_events_total"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestContainerdCrashloop: a container failing with exit code 1, restarted
// by a kubelet-like driver with a growing back-off; the stored Started,
// Exited and BackOff series count exactly the real starts, exits and
// restarts, one Event each, and say the real exit code.
func TestContainerdCrashloop(t *testing.T) {
	c := containerdproc.StartTest(t)
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	a := startAgentWith(t, nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL})
	a.waitEvented(t)
	k := newKubelet(t, c)
	pod := k.runPod("uid-crash", "crash")

	const attempts = 5
	_, codes := k.crashloop(pod, "app", attempts, "sleep 0.1; exit 1", 100*time.Millisecond, nil)
	for _, code := range codes {
		if code != 1 {
			t.Fatalf("the runtime reported exit codes %v, want 1 each", codes)
		}
	}
	want := map[string]int{"Started": attempts, "Exited": attempts, "BackOff": attempts - 1}
	waitRecorded(t, a, want)
	a.stop(t)

	evs := storedEvents(t, srv, "crash")
	if got := countsByReason(evs); fmt.Sprint(got) != fmt.Sprint(want) || len(evs) != 3 {
		t.Fatalf("stored %v in %d events, want %v in 3:%s", got, len(evs), want, describe(evs))
	}
	for _, ev := range evs {
		if ev.Reason == "Exited" && !strings.Contains(ev.Note, "exited with code 1") {
			t.Errorf("Exited note %q does not say code 1", ev.Note)
		}
		if ev.Regarding.UID != "uid-crash" || ev.Regarding.FieldPath != "spec.containers{app}" {
			t.Errorf("%s regards %+v", ev.Reason, ev.Regarding)
		}
	}
	t.Logf("containerd %s: %d attempts stored as%s", c.Version(), attempts, describe(evs))
}

// TestContainerdAgentRestartRecovery is KEP-3386's recovery test: the
// agent stops while a container runs, the container completes, the agent
// starts again (with the state its predecessor left): the completion is
// recorded once, with its real exit code, and the start not again.
func TestContainerdAgentRestartRecovery(t *testing.T) {
	c := containerdproc.StartTest(t)
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	state := filepath.Join(t.TempDir(), "nodeagent.state")
	opts := nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL, StateFile: state}
	a := startAgentWith(t, opts)
	a.waitEvented(t)
	k := newKubelet(t, c)
	pod := k.runPod("uid-job", "job")
	id := k.start(pod, "work", 0, "while [ ! -e /tmp/release ]; do sleep 0.05; done; exit 3")
	waitRecorded(t, a, map[string]int{"Started": 1})
	a.stop(t)

	// The container completes while no agent runs.
	if _, err := containerdExec(k, id, "touch /tmp/release"); err != nil {
		t.Fatal(err)
	}
	if st := k.waitExited(id); st.ExitCode != 3 {
		t.Fatalf("exit code %d, want 3", st.ExitCode)
	}

	b := startAgentWith(t, opts)
	b.waitEvented(t)
	waitRecorded(t, b, map[string]int{"Exited": 1, "Started": 0})
	b.stop(t)
	evs := storedEvents(t, srv, "job")
	got := countsByReason(evs)
	if got["Started"] != 1 || got["Exited"] != 1 || len(evs) != 2 {
		t.Fatalf("stored %v in %d events, want one Started and one Exited:%s", got, len(evs), describe(evs))
	}
	for _, ev := range evs {
		if ev.Reason == "Exited" && !strings.Contains(ev.Note, "exited with code 3") {
			t.Errorf("Exited note %q, want the real code 3", ev.Note)
		}
	}
	t.Logf("recorded across the restart:%s", describe(evs))
}

// containerdExec runs a shell command in a running container.
func containerdExec(k *kubelet, id, command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := k.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"/bin/sh", "-c", command}, Timeout: 10})
	if err != nil {
		return "", err
	}
	if resp.ExitCode != 0 {
		return string(resp.Stdout), fmt.Errorf("exec %q: exit %d: %s", command, resp.ExitCode, resp.Stderr)
	}
	return string(resp.Stdout), nil
}

// TestContainerdRestartMidCrashloop: containerd restarts while a container
// crashloops (the kubelet-like driver retrying what fails meanwhile); the
// agent reconnects on its back-off schedule (at once, then 1, 2, 4 s
// after the stream ended: the first attempt after containerd is back, plus
// the second a quiet stream takes to count as established) and the stored
// series still count exactly the real starts, exits and restarts: nothing
// lost, nothing twice.
func TestContainerdRestartMidCrashloop(t *testing.T) {
	c := containerdproc.StartTest(t)
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	a := startAgentWith(t, nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL})
	a.waitEvented(t)
	k := newKubelet(t, c)
	pod := k.runPod("uid-crash", "crash")

	const attempts = 6
	var down, back, reconnected time.Duration
	restarted := make(chan error, 1)
	_, codes := k.crashloop(pod, "app", attempts, "sleep 0.1; exit 1", 100*time.Millisecond, func(attempt int) {
		if attempt != 2 {
			return
		}
		before := a.metric(t, "kubelet_evented_pleg_connection_success_count")
		go func() {
			begun := time.Now()
			c.Halt()
			down = time.Since(begun)
			err := c.Resume()
			back = time.Since(begun)
			if err == nil {
				deadline := time.Now().Add(30 * time.Second)
				for a.metric(t, "kubelet_evented_pleg_connection_success_count") <= before || a.metric(t, "kubelet_evented_pleg_in_use") != 1 {
					if time.Now().After(deadline) {
						err = fmt.Errorf("the agent did not reconnect within 30 s")
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				reconnected = time.Since(begun)
			}
			restarted <- err
		}()
	})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	for _, code := range codes {
		if code != 1 {
			t.Fatalf("exit codes %v, want 1 each", codes)
		}
	}
	// The stream ended when containerd stopped (by down); attempts follow
	// at 0, 1, 3, 7 s after that: the first at or after containerd was
	// back, then ConfirmAfter (1 s) unless an event came first.
	var next time.Duration
	for i, sum := 0, time.Duration(0); i < len(pleg.DefaultBackoff); i++ {
		sum += pleg.DefaultBackoff[i]
		if next = sum; down+sum >= back {
			break
		}
	}
	if limit := down + next + pleg.DefaultConfirmAfter + time.Second; reconnected > limit {
		t.Errorf("reconnected %v after the restart began (containerd down at %v, back at %v): beyond the back-off's next attempt (limit %v)",
			reconnected, down, back, limit)
	}
	want := map[string]int{"Started": attempts, "Exited": attempts, "BackOff": attempts - 1}
	waitRecorded(t, a, want)
	missed := a.metric(t, "kubelet_pleg_missed_events_total")
	a.stop(t)
	evs := storedEvents(t, srv, "crash")
	if got := countsByReason(evs); fmt.Sprint(got) != fmt.Sprint(want) || len(evs) != 3 {
		t.Fatalf("stored %v in %d events, want %v in 3:%s", got, len(evs), want, describe(evs))
	}
	t.Logf("containerd down %v, back %v, stream again %v after the restart began; missed events caught by relists: %v; stored%s",
		down.Round(time.Millisecond), back.Round(time.Millisecond), reconnected.Round(time.Millisecond), missed, describe(evs))
}

// TestContainerdExitWhileRuntimeDown: in a crashloop whose exits are code
// 1, an attempt exits while containerd is down; after containerd's
// restart the exit is recorded once with the exit code the runtime
// reports for it, and an exit code other than the series' is an Event of
// its own, not a silent +1 on "exited with code 1".
func TestContainerdExitWhileRuntimeDown(t *testing.T) {
	c := containerdproc.StartTest(t)
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	a := startAgentWith(t, nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL})
	a.waitEvented(t)
	k := newKubelet(t, c)
	pod := k.runPod("uid-crash", "crash")
	last, _ := k.crashloop(pod, "app", 2, "sleep 0.1; exit 1", 100*time.Millisecond, nil)
	waitRecorded(t, a, map[string]int{"Started": 2, "Exited": 2, "BackOff": 1})

	// The third attempt exits (code 1) while containerd is down.
	id := k.start(pod, "app", 2, "while [ ! -e /tmp/release ]; do sleep 0.05; done; exit 1")
	k.remove(last)
	waitRecorded(t, a, map[string]int{"Started": 3})
	c.Halt()
	// The container's command waits for this file, made in its root
	// filesystem from outside (containerd is down).
	if err := os.WriteFile(filepath.Join(c.ContainerRootfs(id), "tmp", "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Gone while containerd is down: its shim saw it exit.
	time.Sleep(time.Second)
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	st := k.waitExited(id)
	t.Logf("containerd reports the exit that happened while it was down as code %d (%s)", st.ExitCode, st.Reason)
	want := map[string]int{"Started": 3, "Exited": 3, "BackOff": 2}
	waitRecorded(t, a, want)
	a.stop(t)

	evs := storedEvents(t, srv, "crash")
	var exited []eventsv1.Event
	for _, ev := range evs {
		if ev.Reason == "Exited" {
			exited = append(exited, ev)
		}
	}
	wantCode := fmt.Sprintf("exited with code %d", st.ExitCode)
	found := false
	for _, ev := range exited {
		if strings.Contains(ev.Note, wantCode) {
			found = true
		}
	}
	if !found {
		t.Errorf("no stored Exited event says %q:%s", wantCode, describe(evs))
	}
	if st.ExitCode != 1 && len(exited) != 2 {
		t.Errorf("exit code %d after series of code 1: want 2 Exited events, stored:%s", st.ExitCode, describe(evs))
	}
	if got := countsByReason(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored %v, want %v:%s", got, want, describe(evs))
	}
	t.Logf("stored:%s", describe(evs))
}

// TestContainerdRelistAndStreamAgree: the relisting PLEG (generic) and
// the stream (evented), each in an agent of its own, attribute every
// container of a pod's sandbox to that pod, including a container
// without the kubelet's pod-UID label and one whose label names another
// pod: containerd's stream reports a container with its sandbox, so the
// sandbox decides, not the label. Both agents store the same Events.
func TestContainerdRelistAndStreamAgree(t *testing.T) {
	c := containerdproc.StartTest(t)
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	evented := startAgentWith(t, nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL, NodeName: "node-evented"})
	generic := startAgentWith(t, nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL, NodeName: "node-generic", PLEG: "generic"})
	evented.waitEvented(t)
	k := newKubelet(t, c)
	pod := k.runPod("uid-mixed", "mixed")
	for _, ctr := range []struct {
		name   string
		labels map[string]string
	}{
		{"app", nil},
		{"unlabelled", map[string]string{containerdproc.LabelPodUID: ""}},
		{"mislabelled", map[string]string{containerdproc.LabelPodUID: "uid-other"}},
	} {
		id := retry(k, "creating "+ctr.name, func(ctx context.Context) (string, error) {
			return pod.CreateContainer(ctx, k.rt, ctr.name, 0, "sleep 600", ctr.labels)
		})
		retry(k, "starting "+ctr.name, func(ctx context.Context) (struct{}, error) {
			_, err := k.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
			return struct{}{}, err
		})
	}
	for _, a := range []*agent{evented, generic} {
		waitRecorded(t, a, map[string]int{"Started": 3})
	}
	evented.stop(t)
	generic.stop(t)

	list, err := srv.Clientset().EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	for _, ev := range list.Items {
		node := strings.TrimPrefix(ev.ReportingInstance, nodeagent.ReportingController+"-")
		seen[node] = append(seen[node], fmt.Sprintf("%s %s/%s(%s) %s", ev.Reason, ev.Regarding.Namespace, ev.Regarding.Name, ev.Regarding.UID, ev.Regarding.FieldPath))
	}
	for _, s := range seen {
		sort.Strings(s)
	}
	want := []string{
		"Started default/mixed(uid-mixed) spec.containers{app}",
		"Started default/mixed(uid-mixed) spec.containers{mislabelled}",
		"Started default/mixed(uid-mixed) spec.containers{unlabelled}",
	}
	for _, node := range []string{"node-evented", "node-generic"} {
		if fmt.Sprint(seen[node]) != fmt.Sprint(want) {
			t.Errorf("%s stored %q, want %q", node, seen[node], want)
		}
	}
}

// bucketLE1 is a histogram's count and its count at or below 1 s.
func bucketLE1(t *testing.T, url, name string) (total, le1 float64) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	f := fams[name]
	if f == nil || len(f.Metric) == 0 || f.Metric[0].Histogram == nil {
		return 0, 0
	}
	h := f.Metric[0].Histogram
	for _, b := range h.Bucket {
		if b.GetUpperBound() == 1 {
			le1 = float64(b.GetCumulativeCount())
		}
	}
	return float64(h.GetSampleCount()), le1
}

// TestContainerdStress is KEP-3386's stress test, bounded: containers are
// created, started, run to completion and removed by more and more
// workers (1, 2, 4 ... 16, 4 s each) until more than 1% of a step's
// events took over 1 s from containerd to the PLEG, or doubling the
// workers no longer raises the rate (containerd is the limit), or the
// last step ends.
// It logs the rate reached, and every container's start and exit is
// recorded exactly once: nothing lost or doubled under the load.
func TestContainerdStress(t *testing.T) {
	c := containerdproc.StartTest(t)
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	a := startAgentWith(t, nodeagent.Options{RuntimeEndpoint: c.Endpoint(), Server: srv.URL})
	a.waitEvented(t)
	k := newKubelet(t, c)
	pod := k.runPod("uid-stress", "stress")

	const step = 4 * time.Second
	var n atomic.Int64 // containers run to completion
	var failures atomic.Int64
	var broke string
	var rate, prevRate float64
	for workers := 1; workers <= 16; workers *= 2 {
		total0, le10 := bucketLE1(t, a.metrics+"/metrics", "kubelet_evented_pleg_connection_latency_seconds")
		n0 := n.Load()
		begun := time.Now()
		stop := begun.Add(step)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					err := runOnce(ctx, k, pod, fmt.Sprintf("w%d-%d-%d", workers, w, i))
					cancel()
					if err != nil {
						failures.Add(1)
						t.Errorf("worker %d: %v", w, err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(begun)
		total, le1 := bucketLE1(t, a.metrics+"/metrics", "kubelet_evented_pleg_connection_latency_seconds")
		events, over := total-total0, (total-total0)-(le1-le10)
		rate = float64(n.Load()-n0) / elapsed.Seconds()
		t.Logf("%2d workers: %.1f containers/s, %v events, %v over 1 s", workers, rate, events, over)
		if failures.Load() > 0 {
			t.FailNow()
		}
		if events > 0 && over/events > 0.01 {
			broke = fmt.Sprintf("event latency passed 1 s at %d workers, %.1f containers/s", workers, rate)
			break
		}
		if workers >= 4 && rate < prevRate*1.2 {
			// Twice the workers, no more containers: containerd (and runc)
			// are the limit here, not the PLEG.
			broke = fmt.Sprintf("containerd saturated at %.1f containers/s (%d workers) with event latency still under 1 s", rate, workers)
			break
		}
		prevRate = rate
	}
	if broke == "" {
		broke = fmt.Sprintf("event latency stayed under 1 s up to 16 workers, %.1f containers/s", rate)
	}
	total := int(n.Load())
	want := map[string]int{"Started": total, "Exited": total}
	waitRecorded(t, a, want)
	missed, discards := a.metric(t, "kubelet_pleg_missed_events_total"), a.metric(t, "kubelet_evented_pleg_stream_discards_total")
	// The recorder writes asynchronously: on a loaded machine its queue
	// of a few hundred creates can take longer than the 10 s a stopping
	// agent gives its last writes (which it then drops, counted). What is
	// checked here is that each one is written once, so the agent stops
	// once its writes are stored, or after a minute.
	for deadline := time.Now().Add(time.Minute); len(storedEvents(t, srv, "stress")) < 2*total && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	a.stop(t)
	// Every container has a name of its own, so each start and exit is an
	// Event of its own: as many as containers, each counted once.
	evs := storedEvents(t, srv, "stress")
	if got := countsByReason(evs); fmt.Sprint(got) != fmt.Sprint(want) || len(evs) != 2*total {
		t.Errorf("stored %v in %d events, want %v in %d", got, len(evs), want, 2*total)
	}
	t.Logf("%s; %d containers, each start and exit recorded once; missed events caught by relists: %v, stream discards: %v",
		broke, total, missed, discards)
}

// runOnce runs a container to completion and removes it.
func runOnce(ctx context.Context, k *kubelet, pod *containerdproc.Pod, name string) error {
	id, err := pod.StartContainer(ctx, k.rt, name, 0, "exit 0")
	if err != nil {
		return err
	}
	for {
		resp, err := k.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			return err
		}
		if resp.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, err = k.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return err
}
