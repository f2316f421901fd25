package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/fakecri"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/nodeagent"
)

// scrape returns the counters and gauges of a Prometheus endpoint by name
// and labels, and each histogram's sample count as NAME_count.
func scrape(t *testing.T, url string) map[string]float64 {
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
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			key := name
			for _, l := range m.Label {
				key += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// TestNodeagentCrashloop: fakecri runs its crashloop scenario on a unix
// socket, nodeagent follows it and records to a real eventsd; the stored
// events are one series per reason, counting every start, exit and
// back-off the runtime went through.
func TestNodeagentCrashloop(t *testing.T) {
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	rt := fakecri.New(fakecri.Options{})
	defer rt.Close()
	endpoint, stopCRI, err := rt.Listen("unix://" + filepath.Join(t.TempDir(), "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer stopCRI()

	agent := startAgent(t, endpoint, srv.URL)
	metrics := agent.metrics
	eventuallyE2E(t, func() bool { return scrape(t, metrics+"/metrics")["kubelet_evented_pleg_in_use"] == 1 }, "the agent following the stream")
	resp, err := http.Get(metrics + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}

	// The crashloop, 50 times faster than the kubelet's: runs of 100 ms,
	// back-offs of 200 ms, 400 ms, 800 ms ...
	scCtx, stopScenario := context.WithCancel(context.Background())
	scDone := make(chan error, 1)
	go func() {
		scDone <- rt.RunScenario(scCtx, fakecri.ScenarioCrashloop, fakecri.ScenarioOptions{TimeScale: 50})
	}()
	eventuallyE2E(t, func() bool {
		return scrape(t, metrics+"/metrics")["nodeagent_events_recorded_total{reason=BackOff}"] >= 3
	}, "three back-offs")
	stopScenario()
	if err := <-scDone; err != nil {
		t.Fatal(err)
	}

	// What the agent must have recorded, from the runtime's final state.
	var last *runtimeapi.ContainerStatus
	for _, p := range rt.Pods() {
		if p.Sandbox.GetMetadata().GetName() == "crash" {
			last = p.Containers[len(p.Containers)-1]
		}
	}
	starts := int(last.Metadata.Attempt) + 1
	exits := starts
	if last.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		exits--
	}
	want := map[string]int{"Started": starts, "Exited": exits, "BackOff": exits - 1}
	eventuallyE2E(t, func() bool {
		m := scrape(t, metrics+"/metrics")
		for reason, n := range want {
			if m["nodeagent_events_recorded_total{reason="+reason+"}"] != float64(n) {
				return false
			}
		}
		return true
	}, fmt.Sprintf("the agent to record %v", want))

	// Stopping writes the series' counts.
	agent.stop(t)
	list, err := srv.Clientset().EventsV1().Events("default").List(context.Background(),
		metav1.ListOptions{FieldSelector: "regarding.name=crash"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, ev := range list.Items {
		if _, dup := got[ev.Reason]; dup {
			t.Errorf("a second %s event: the repeats did not form one series", ev.Reason)
		}
		got[ev.Reason] = count(&ev)
		if ev.Regarding.Kind != "Pod" || ev.Regarding.UID != "uid-crash" || ev.Regarding.FieldPath != "spec.containers{app}" ||
			ev.ReportingController != nodeagent.ReportingController || !strings.HasPrefix(ev.ReportingInstance, nodeagent.ReportingController+"-node-1") {
			t.Errorf("event %s: regarding %+v, reported by %s/%s", ev.Reason, ev.Regarding, ev.ReportingController, ev.ReportingInstance)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored counts %v, want %v (%d crashes)", got, want, exits)
	}
	t.Logf("%d starts, %d exits, %d back-offs stored as %d events", want["Started"], want["Exited"], want["BackOff"], len(list.Items))
}

// agent is a nodeagent.Run in the test's process.
type agent struct {
	metrics string // base URL of /metrics and /healthz
	logs    *syncbuf.Buffer
	cancel  context.CancelFunc
	done    chan error
}

// startAgent runs nodeagent with the evented PLEG against a CRI endpoint,
// recording to server, and returns once it serves its metrics. The test's
// cleanup stops it if the test did not.
func startAgent(t *testing.T, endpoint, server string) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{logs: &syncbuf.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		a.done <- nodeagent.Run(ctx, nodeagent.Options{
			RuntimeEndpoint: endpoint, Server: server, NodeName: "node-1", MetricsAddr: "127.0.0.1:0",
			PLEG: "evented", LogLevel: "info", ShutdownTimeout: 10 * time.Second,
			Ready: func(addr string) { ready <- addr },
		}, a.logs)
	}()
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
	})
	return a
}

// stop stops the agent, which writes its pending event counts first, and
// fails the test if it did not stop cleanly.
func (a *agent) stop(t *testing.T) {
	t.Helper()
	a.cancel()
	a.cancel = nil
	if err := <-a.done; err != nil {
		t.Fatalf("nodeagent: %v\n%s", err, a.logs.String())
	}
}

// count is how many occurrences an event stands for.
func count(ev *eventsv1.Event) int {
	if ev.Series != nil {
		return int(ev.Series.Count)
	}
	if ev.Annotations[events.SeriesStateAnnotation] != "" {
		return -1
	}
	return 1
}

func eventuallyE2E(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodeagentLogsFailingWrites: with an API server that refuses every
// write (503), nodeagent says so in its log while it runs, as soon as the
// first event fails to be written, not when it stops.
func TestNodeagentLogsFailingWrites(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the events store is down","reason":"ServiceUnavailable","code":503}`)
	}))
	defer api.Close()
	rt := fakecri.New(fakecri.Options{})
	defer rt.Close()
	endpoint, stopCRI, err := rt.Listen("unix://" + filepath.Join(t.TempDir(), "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer stopCRI()
	a := startAgent(t, endpoint, api.URL)
	eventuallyE2E(t, func() bool { return scrape(t, a.metrics+"/metrics")["kubelet_evented_pleg_in_use"] == 1 }, "the agent following the stream")

	sb := rt.RunPodSandbox("uid-web", "default", "web", 0)
	if err := rt.StartContainer(rt.CreateContainer(sb, "app", 0)); err != nil {
		t.Fatal(err)
	}
	eventuallyE2E(t, func() bool {
		return strings.Contains(a.logs.String(), "Writing an event to the API server failed") &&
			strings.Contains(a.logs.String(), "the events store is down")
	}, "a log line about the failing write while the agent runs")
	if strings.Contains(a.logs.String(), "Event dropped") {
		t.Errorf("the write was already dropped: the line came late\n%s", a.logs.String())
	}
	t.Logf("%s", a.logs.String())
}

// TestNodeagentAsUsersStartIt: nodeagent started as a user would after
// fakecri, with the socket's bare path (what fakecri --listen takes) and
// neither --server nor --kubeconfig (the kubeconfig from $KUBECONFIG, as
// kubectl finds it), records the container's start to that server.
func TestNodeagentAsUsersStartIt(t *testing.T) {
	srv := eventsdtest.Start(t, eventsdtest.Options{})
	t.Setenv("KUBECONFIG", srv.Kubeconfig())
	rt := fakecri.New(fakecri.Options{})
	defer rt.Close()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	if _, stopCRI, err := rt.Listen(sock); err != nil {
		t.Fatal(err)
	} else {
		defer stopCRI()
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncbuf.Buffer{}
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		done <- nodeagent.Run(ctx, nodeagent.Options{RuntimeEndpoint: sock, NodeName: "node-1", MetricsAddr: "127.0.0.1:0",
			PLEG: "evented", LogLevel: "info", ShutdownTimeout: 10 * time.Second, Ready: func(addr string) { ready <- addr }}, logs)
	}()
	var metrics string
	select {
	case addr := <-ready:
		metrics = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("nodeagent: %v\n%s", err, logs.String())
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nodeagent: %v", err)
		}
	}()
	eventuallyE2E(t, func() bool { return scrape(t, metrics+"/metrics")["kubelet_evented_pleg_in_use"] == 1 }, "the agent following the stream")
	sb := rt.RunPodSandbox("uid-web", "default", "web", 0)
	if err := rt.StartContainer(rt.CreateContainer(sb, "app", 0)); err != nil {
		t.Fatal(err)
	}
	eventuallyE2E(t, func() bool {
		l, err := srv.Clientset().EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Started"})
		return err == nil && len(l.Items) == 1 && l.Items[0].Regarding.Name == "web"
	}, "the Started event on the kubeconfig's server")
	if !strings.Contains(logs.String(), "runtime=unix://"+sock) {
		t.Errorf("log does not name the socket as unix://%s:\n%s", sock, logs.String())
	}
}
