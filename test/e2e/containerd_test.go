package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// containerdConfig runs containerd's CRI plugin in private directories,
// without cgroups or CNI (the test starts no pods), beside any containerd
// the machine already runs.
const containerdConfig = `version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  disable_cgroup = true
`

// startContainerd starts the containerd on PATH with its CRI plugin on a
// private socket and returns the socket's path. The test is skipped, saying
// why, where containerd is not installed or cannot run (it needs root).
func startContainerd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("containerd is not installed, so the fallback against a real runtime is not tested here " +
			"(`apt-get install containerd` gives Debian's 1.6, which .ci/run installs)")
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root; run as root to test the fallback against it")
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "containerd.sock")
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("containerd's log:\n%s", logs.String())
		}
	})

	// Ready once its CRI plugin answers Version.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := client.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			t.Logf("containerd %s (CRI %s) on %s", v.RuntimeVersion, v.RuntimeApiVersion, sock)
			return sock
		}
		select {
		case err := <-exited:
			t.Fatalf("containerd exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd's CRI plugin did not answer within 30s: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestContainerdFallback runs nodeagent with the evented PLEG against
// Debian's containerd 1.6, whose CRI plugin predates GetContainerEvents:
// the agent must see Unimplemented, say so, and keep following the runtime
// by relisting every second, healthy, instead of failing or retrying the
// stream for ever.
func TestContainerdFallback(t *testing.T) {
	sock := startContainerd(t)

	// The premise: this containerd has no event stream.
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := runtimeapi.NewRuntimeServiceClient(conn).GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Skipf("this containerd answers GetContainerEvents with %v, not Unimplemented: it has the stream, so there is no fallback to test", err)
	}

	srv := eventsdtest.Start(t, eventsdtest.Options{})
	agent := startAgent(t, "unix://"+sock, srv.URL)
	metrics, logs := agent.metrics, agent.logs

	// Relisting every second: three relists after the fallback was logged.
	eventuallyE2E(t, func() bool { return strings.Contains(logs.String(), "Falling back to relisting") }, "the fallback")
	relists := func() float64 { return scrape(t, metrics+"/metrics")["kubelet_pleg_relist_duration_seconds_count"] }
	before := relists()
	eventuallyE2E(t, func() bool { return relists() >= before+3 }, "three relists of containerd")
	m := scrape(t, metrics+"/metrics")
	if m["kubelet_evented_pleg_in_use"] != 0 {
		t.Errorf("kubelet_evented_pleg_in_use = %v after Unimplemented, want 0", m["kubelet_evented_pleg_in_use"])
	}
	if m["kubelet_evented_pleg_connection_success_count"] != 0 {
		t.Errorf("kubelet_evented_pleg_connection_success_count = %v, want 0", m["kubelet_evented_pleg_connection_success_count"])
	}
	if m["kubelet_running_pods"] != 0 {
		t.Errorf("kubelet_running_pods = %v on a containerd without pods", m["kubelet_running_pods"])
	}
	if code := httpStatus(t, metrics+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d while relisting a live runtime", code)
	}

	agent.stop(t)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("an Unimplemented stream is not an error, but the agent logged one:\n%s", logs.String())
	}
	t.Logf("fell back after Unimplemented; %v relists", m["kubelet_pleg_relist_duration_seconds_count"])
}

// httpStatus is the status code of a GET of url.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
