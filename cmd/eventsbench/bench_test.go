package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// TestMain lets the orchestrator re-execute the test binary as its echo
// child, as it re-executes eventsbench itself.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(execute(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestRunTiny runs the whole orchestration at a tiny scale against a real
// eventsd: echo and eventsd with 2 clients for a second, a fill of 2,000
// events of which 10 are about the target pod, and the list finding them.
func TestRunTiny(t *testing.T) {
	bin := eventsdtest.Binary(t)
	out := filepath.Join(t.TempDir(), "results.json")
	cfg := runConfig{
		Eventsd: bin, Out: out, Command: "eventsbench run (test)",
		Clients: []int{2}, Duration: time.Second, Warmup: 200 * time.Millisecond, Namespaces: 3, Objects: 20,
		FillSteps: []int64{2000}, FillClients: 8, TargetCount: 10, ListRepeat: 5,
		DataParent: t.TempDir(), Timeout: 2 * time.Minute, Log: testLog{t},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := runBench(ctx, cfg)
	if rep != nil {
		var md bytes.Buffer
		printReport(&md, rep)
		t.Logf("report:\n%s", md.String())
		if werr := writeReport(out, rep); werr != nil {
			t.Fatal(werr)
		}
	}
	if err != nil {
		t.Fatal(err)
	}

	if len(rep.Create) != 1 {
		t.Fatalf("got %d create comparisons, want 1", len(rep.Create))
	}
	p := rep.Create[0]
	for name, r := range map[string]*createResult{"echo": p.Echo, "eventsd": p.Eventsd} {
		switch {
		case r == nil:
			t.Fatalf("%s: no result", name)
		case r.Requests == 0 || r.CreatesPerSec <= 0:
			t.Errorf("%s: no requests measured: %+v", name, r)
		case r.Errors != 0:
			t.Errorf("%s: %d errors: %s", name, r.Errors, r.FirstError)
		case r.Connections != 2:
			t.Errorf("%s: %d connections, want one per client", name, r.Connections)
		case r.ServerCPUMsPerReq == nil:
			t.Errorf("%s: no server CPU", name)
		case r.P50Ms <= 0 || r.P99Ms < r.P50Ms:
			t.Errorf("%s: bad latencies %+v", name, r.latencies)
		}
	}
	if p.RatioCreatesPerSec <= 0 {
		t.Errorf("ratio %v", p.RatioCreatesPerSec)
	}

	if len(rep.Storage) != 1 {
		t.Fatalf("got %d storage points, want 1", len(rep.Storage))
	}
	sp := rep.Storage[0]
	if sp.Fill == nil || sp.Fill.Created != 2000 || sp.Fill.Errors != 0 {
		t.Errorf("fill: %+v", sp.Fill)
	}
	for _, l := range []*listResult{sp.ListAfterFill, sp.ListSettled} {
		if l == nil || l.Items != 10 || l.Repeat != 5 {
			t.Errorf("list: %+v, want 10 items", l)
		}
	}
	if sp.RSSSettled <= 0 || sp.DiskSettled.Bytes <= 0 || sp.DiskBytesPerEvent <= 0 {
		t.Errorf("RSS %d, disk %+v", sp.RSSSettled, sp.DiskSettled)
	}
	if n := sp.Metrics["eventsd_stored_events"]; n != 2000 {
		t.Errorf("eventsd reports %v stored events, want 2000", n)
	}
	if len(rep.Goals) == 0 {
		t.Error("no goals checked")
	}

	var back runReport
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Create) != 1 || back.Create[0].Eventsd.Requests != p.Eventsd.Requests {
		t.Errorf("JSON report does not round-trip: %s", b)
	}
}

// TestRunEtcdTiny runs the etcd targets at a tiny scale against a real
// eventsd and a real etcd (this binary's etcd subcommand, as a child):
// echo and eventsd on etcd with 2 clients for a second, then 2,000 events
// filled into etcd (10 about the target pod), a baseline and a measured
// replica, and the read throughput of one and two replicas.
func TestRunEtcdTiny(t *testing.T) {
	bin := eventsdtest.Binary(t)
	cfg := runConfig{
		Eventsd: bin, Command: "eventsbench run (test)", Backends: []string{backendEtcd},
		Clients: []int{2}, Wires: []string{wireProtobuf}, Duration: time.Second, Warmup: 200 * time.Millisecond, Namespaces: 3, Objects: 20,
		FillClients: 8, TargetCount: 10, ListRepeat: 5, SettleMax: 2 * time.Second,
		EtcdEvents: 2000, ReadClients: 4, EtcdUnsafeNoFsync: true,
		DataParent: t.TempDir(), Timeout: 2 * time.Minute, Log: testLog{t},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := runBench(ctx, cfg)
	var md bytes.Buffer
	if rep != nil {
		printReport(&md, rep)
		t.Logf("report:\n%s", md.String())
	}
	if err != nil {
		t.Fatal(err)
	}

	if len(rep.Create) != 1 {
		t.Fatalf("got %d create comparisons, want 1", len(rep.Create))
	}
	p := rep.Create[0]
	if p.Eventsd != nil {
		t.Errorf("eventsd on pebble measured with --backends=etcd: %+v", p.Eventsd)
	}
	for name, r := range map[string]*createResult{"echo": p.Echo, "eventsd on etcd": p.EventsdEtcd} {
		switch {
		case r == nil:
			t.Fatalf("%s: no result", name)
		case r.Requests == 0 || r.Errors != 0:
			t.Errorf("%s: %d requests, %d errors: %s", name, r.Requests, r.Errors, r.FirstError)
		case r.ServerCPUMsPerReq == nil:
			t.Errorf("%s: no server CPU", name)
		}
	}
	if e := p.EventsdEtcd; e.BackendCPUMsPerReq == nil || *e.BackendCPUMsPerReq <= 0 || *e.BackendCPUMsPerReq > *e.ServerCPUMsPerReq {
		t.Errorf("eventsd on etcd: etcd's CPU %v ms/req, not part of the server's %v", fmtPtr(e.BackendCPUMsPerReq, 4), *e.ServerCPUMsPerReq)
	}
	if p.RatioEtcdCreatesPerSec <= 0 {
		t.Errorf("ratio %v", p.RatioEtcdCreatesPerSec)
	}

	es := rep.Etcd
	switch {
	case es == nil:
		t.Fatal("no etcd phase")
	case es.Fill == nil || es.Fill.Created != 2000 || es.Fill.Errors != 0 || es.Fill.ServerCPUMsPerEvent == nil:
		t.Errorf("fill: %+v", es.Fill)
	case es.BaselineRSS <= 0 || es.RSSSettled <= 0 || es.EtcdDisk.Bytes <= 0:
		t.Errorf("baseline RSS %d, RSS %d, etcd disk %+v", es.BaselineRSS, es.RSSSettled, es.EtcdDisk)
	case es.Metrics["eventsd_stored_events"] != 2000:
		t.Errorf("the replica reports %v stored events, want 2000", es.Metrics["eventsd_stored_events"])
	}
	for _, l := range []*listResult{es.ListFirst, es.ListSettled} {
		if l == nil || l.Items != 10 || l.Repeat != 5 {
			t.Errorf("list: %+v, want 10 items", l)
		}
	}
	if len(es.Reads) != 2 {
		t.Fatalf("%d read benchmarks, want 2", len(es.Reads))
	}
	for i, r := range es.Reads {
		if r.Replicas != i+1 || r.Clients != 4 || r.Lists == 0 || r.Errors != 0 || r.ServerCPUMsPerList == nil {
			t.Errorf("reads over %d replica(s): %+v", i+1, r)
		}
	}
	var goals []string
	for _, g := range rep.Goals {
		goals = append(goals, g.Goal)
	}
	if len(goals) != 2 {
		t.Errorf("goals %q, want the list and memory goals (no create goal without 64 clients)", goals)
	}
	for _, want := range []string{"| eventsd on etcd |", "read throughput", "empty etcd (baseline)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestRunKubeAPIServerTiny runs the create benchmark's kube-apiserver
// target at a tiny scale: a real kube-apiserver started through
// internal/kubeapiserver with its events in the benchmark etcd, beside
// eventsd on that etcd, both measured with their etcd's CPU.
func TestRunKubeAPIServerTiny(t *testing.T) {
	kubeapiserver.RequireBinaries(t)
	cfg := runConfig{
		Eventsd: eventsdtest.Binary(t), Command: "eventsbench run (test)", Backends: []string{backendEtcd}, StorageBackends: []string{},
		KubeAPIServer: kubeAPIServerBuilt, Clients: []int{2}, Wires: []string{wireProtobuf}, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Namespaces: 2, Objects: 10, EtcdUnsafeNoFsync: true, DataParent: t.TempDir(), Timeout: 3 * time.Minute, Log: testLog{t},
	}
	rep, err := runBench(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Create) != 1 {
		t.Fatalf("got %d create comparisons, want 1", len(rep.Create))
	}
	p := rep.Create[0]
	for name, r := range map[string]*createResult{"eventsd on etcd": p.EventsdEtcd, "kube-apiserver on etcd": p.KubeAPIServer} {
		switch {
		case r == nil:
			t.Fatalf("%s: no result", name)
		case r.Requests == 0 || r.Errors != 0:
			t.Errorf("%s: %d requests, %d errors: %s", name, r.Requests, r.Errors, r.FirstError)
		case r.BackendCPUMsPerReq == nil || *r.BackendCPUMsPerReq <= 0:
			t.Errorf("%s: the benchmark etcd spent no CPU on its creates: its events are not there", name)
		}
	}
	if v, _ := rep.Settings["kube_apiserver"].(string); !strings.Contains(v, "v1.") {
		t.Errorf("kube-apiserver setting %q names no version", v)
	}
	if p.RatioEtcdKubeAPIServerCreatesPerSec <= 0 {
		t.Errorf("ratio %v", p.RatioEtcdKubeAPIServerCreatesPerSec)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func TestEchoHandler(t *testing.T) {
	srv := httptest.NewServer(echoHandler())
	defer srv.Close()
	body := `{"kind":"Event","apiVersion":"v1","metadata":{"name":"a.1","namespace":"ns"}}`
	resp, err := http.Post(srv.URL+"/api/v1/namespaces/ns/events", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	_, _ = got.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "application/json" || got.String() != body {
		t.Errorf("POST events: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), got.String())
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/ns/events"},
		{http.MethodPost, "/api/v1/namespaces//events"},
		{http.MethodPost, "/api/v1/namespaces/ns/events/x"},
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ns/events"},
		{http.MethodPost, "/api/v1/events"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}
}

func TestFillPlan(t *testing.T) {
	for _, c := range []struct{ total, target, perPod int64 }{
		{2000, 10, 50}, {50_000, 50, 50}, {950_000, 0, 50}, {7, 7, 50}, {101, 1, 50}, {1, 0, 1},
	} {
		p := newFillPlan(c.total, c.target, c.perPod)
		var targets int64
		perPod := map[int64]int64{}
		for i := range c.total {
			isTarget, pod := p.at(i)
			if isTarget {
				targets++
				continue
			}
			if pod < 0 || pod >= p.pods {
				t.Fatalf("%+v: event %d about pod %d of %d", c, i, pod, p.pods)
			}
			perPod[pod]++
		}
		if targets != c.target {
			t.Errorf("%+v: %d target events", c, targets)
		}
		for pod, n := range perPod {
			if n > c.perPod {
				t.Errorf("%+v: pod %d has %d events", c, pod, n)
			}
		}
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	l := summarize(s)
	if l.P50Ms != 50 || l.P90Ms != 90 || l.P99Ms != 99 || l.MaxMs != 100 {
		t.Errorf("%+v", l)
	}
}

// TestRecordersTiny runs the recorder workloads at a tiny scale against a
// real eventsd: this project's recorders must store every emission.
func TestRecordersTiny(t *testing.T) {
	var out strings.Builder
	cfg := recordersConfig{Eventsd: eventsdtest.Binary(t), Period: 10 * time.Millisecond, Crashloop: 500 * time.Millisecond,
		ReasonsPeriod: 50 * time.Millisecond, Settle: 500 * time.Millisecond, Out: filepath.Join(t.TempDir(), "r.json")}
	if err := runRecorders(t.Context(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	b, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	var results []recorderResult
	if err := json.Unmarshal(b, &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 10 { // five recorders (ours also with the strict schedule), two workloads
		t.Fatalf("%d results, want 10", len(results))
	}
	for _, r := range results {
		if strings.HasPrefix(r.Recorder, "kubevents") && !r.Exact {
			t.Errorf("%s, %s: stored %v of %v", r.Recorder, r.Workload, r.Stored, r.Emitted)
		}
		if r.Recorder == "client-go tools/record" && r.Workload == "five-reasons" && r.Stored["Killing"] != 0 {
			t.Errorf("client-go's legacy recorder is expected to starve the sixth reason: %v", r.Stored)
		}
	}
}

// TestServingLines checks the patterns that find the URLs of servers run
// as real binaries in their log lines, as etcd 3.6.8 prints them.
func TestServingLines(t *testing.T) {
	for _, c := range []struct {
		re         *regexp.Regexp
		line, want string
	}{
		{etcdBinaryURLRE, `{"level":"info","ts":"2026-11-24T17:05:18.123456Z","caller":"embed/serve.go:220","msg":"serving client traffic insecurely; this is strongly discouraged!","traffic":"grpc+http","address":"127.0.0.1:33931"}`, "127.0.0.1:33931"},
		{etcdURLRE, "etcd serving at http://127.0.0.1:2379", "http://127.0.0.1:2379"},
	} {
		if m := c.re.FindStringSubmatch(c.line); m == nil || m[1] != c.want {
			t.Errorf("%s on %q: %q, want %q", c.re, c.line, m, c.want)
		}
	}
}

// TestTermed: a process killed by SIGTERM counts as stopped when asked;
// other exits do not.
func TestTermed(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); !termed(err) {
		t.Errorf("SIGTERM: termed(%v) = false", err)
	}
	if err := exec.Command("false").Run(); termed(err) {
		t.Errorf("exit 1: termed(%v) = true", err)
	}
	if termed(nil) {
		t.Error("termed(nil)")
	}
}

// TestMirrorTiny runs "eventsbench mirror" at a tiny scale against a real
// kube-apiserver and eventsd: 500 events filled, both initial syncs
// storing all of them, reads through both servers finding the target
// pod's 10 events, 100 writes/s of which every one reaches eventsd's
// watch, CPU profiles of both servers; and nothing it started is left
// running.
func TestMirrorTiny(t *testing.T) {
	kubeapiserver.RequireBinaries(t)
	bin := eventsdtest.Binary(t)
	parent := t.TempDir()
	cfg := mirrorBenchConfig{
		Eventsd: bin, KubeAPIServer: kubeAPIServerBuilt, Command: "eventsbench mirror (test)",
		Events: 500, FillClients: 8, Namespaces: 3, TargetCount: 10,
		Syncs: []string{syncWatchList, syncList}, SyncTimeout: 2 * time.Minute, FillTimeout: time.Minute,
		ReadClients: 4, ReadDuration: time.Second, ReadWarmup: 200 * time.Millisecond,
		Rates: []int{100}, Writers: 8, SyncProfile: time.Second, SteadyDuration: 2 * time.Second, SteadyWarmup: 500 * time.Millisecond, Drain: 20 * time.Second,
		ProfileDir: t.TempDir(), DataParent: parent, Timeout: 4 * time.Minute, Log: testLog{t},
	}
	rep, err := runMirrorBench(t.Context(), cfg)
	var md bytes.Buffer
	if rep != nil {
		printMirrorReport(&md, rep)
		t.Logf("report:\n%s", md.String())
	}
	if err != nil {
		t.Fatal(err)
	}

	if f := rep.Fill; f == nil || f.Created != 500 || f.Errors != 0 || f.ServerCPUMsPerEvent == nil {
		t.Errorf("fill: %+v", f)
	}
	if len(rep.Syncs) != 2 || rep.Syncs[0].Mode != syncWatchList || rep.Syncs[1].Mode != syncList {
		t.Fatalf("syncs %+v, want watchlist then list", rep.Syncs)
	}
	for _, s := range rep.Syncs {
		if s.Events != 500 || s.Seconds <= 0 || s.ReadyS > s.Seconds || s.KubeAPIServerCPUS <= 0 || s.EventsdCPUS <= 0 || s.KubeAPIServerRSSPeak < s.KubeAPIServerRSSBefore {
			t.Errorf("sync %+v", s)
		}
	}
	r := rep.Reads
	if r == nil || r.KubeAPIServer == nil || r.Eventsd == nil {
		t.Fatalf("reads %+v", r)
	}
	for name, l := range map[string]*listLoadResult{"kube-apiserver": r.KubeAPIServer, "eventsd": r.Eventsd} {
		if l.Lists == 0 || l.Errors != 0 || l.Items != 10 || l.Clients != 4 || l.ServerCPUMsPerList == nil {
			t.Errorf("reads through %s: %+v", name, l)
		}
	}
	if len(rep.Steady) != 1 {
		t.Fatalf("%d steady states, want 1", len(rep.Steady))
	}
	s := rep.Steady[0]
	switch {
	case s.TargetRate != 100:
		t.Errorf("steady state at %d/s, want 100", s.TargetRate)
	case s.Writes == 0 || s.Creates == 0 || s.Updates == 0 || s.AchievedPerSec <= 0:
		t.Errorf("steady writes: %+v", s)
	case s.Seen != s.Writes || s.Missing != 0 || s.SeenKubeAPIServer != s.Writes:
		t.Errorf("steady: %d of %d writes seen on eventsd's watch, %d on kube-apiserver's", s.Seen, s.Writes, s.SeenKubeAPIServer)
	case s.Lag.P50Ms > s.Lag.P99Ms || s.Lag.P99Ms > s.Lag.MaxMs || s.EventsdCores <= 0 || s.KubeAPIServerCores <= 0 || s.MirrorBacklogSamples == 0:
		t.Errorf("steady lag or CPU: %+v", s)
	}
	for name, p := range rep.Profiles {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("profile of %s: %v", name, err)
		}
	}
	if len(rep.Profiles) != 6 {
		t.Errorf("profiles %v, want eventsd's and kube-apiserver's over each sync and the steady state", rep.Profiles)
	}
	for _, want := range []string{"### Initial sync of 500 events", "| watchlist |", "| list |", "kube-apiserver (+ its events etcd)", "### Steady state", "| 100 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Everything it started had its data under parent.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), parent) {
			t.Errorf("still running after the benchmark: %s", strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// TestFoldTiny runs eventsbench fold small: without folding every create
// is stored; with it, one event per series holds every occurrence, in
// fewer bytes.
func TestFoldTiny(t *testing.T) {
	cfg := foldBenchConfig{Eventsd: eventsdtest.Binary(t), Command: "eventsbench fold (test)", Repeats: 30, Objects: 20, PerObject: 3, Clients: 4,
		DataParent: t.TempDir(), Timeout: 2 * time.Minute, Log: testLog{t}}
	rep, err := runFoldBench(t.Context(), cfg)
	var out bytes.Buffer
	if rep != nil {
		printFoldReport(&out, rep)
		t.Logf("report:\n%s", out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 {
		t.Fatalf("%d results, want 4", len(rep.Results))
	}
	want := map[string][2]int{"crashloop": {30, 1}, "storm": {60, 20}} // stored without, with
	for _, r := range rep.Results {
		w := want[r.Workload]
		stored := w[0]
		if r.Folding {
			stored = w[1]
		}
		if r.Creates != w[0] || r.Stored != stored || r.Occurrences != int64(w[0]) || r.ObjectBytes <= 0 || r.CPUMsPerCreate <= 0 {
			t.Errorf("%+v: want %d creates, %d stored", r, w[0], stored)
		}
	}
	if rep.Results[1].ObjectBytes*10 > rep.Results[0].ObjectBytes {
		t.Errorf("folded crashloop %d bytes, unfolded %d: want a tenth at most", rep.Results[1].ObjectBytes, rep.Results[0].ObjectBytes)
	}
}
