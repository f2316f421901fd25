package fakecri

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/syncbuf"
)

// TestBinary builds cmd/fakecri, runs it on a unix socket with a scenario
// and a script, talks CRI to it, and stops it with SIGTERM.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecri")
	build := exec.Command(goTool, "build", "-o", bin, "github.com/kubevents/kubevents/cmd/fakecri")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "web.fcri")
	if err := os.WriteFile(script, []byte("run-pod web uid=p1\ncreate web/app\nstart web/app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	cmd := exec.Command(bin, "--listen", "unix://"+sock, "--scenario", "steady", "--pods", "3", "--containers", "2",
		"--script", script, "--mode", "block", "--log-level", "debug")
	var logs syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	eventually(t, "the socket", func() bool { _, err := os.Stat(sock); return err == nil })

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := runtimeapi.NewRuntimeServiceClient(conn)
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The socket file appears at bind, a moment before listen: wait for ready.
	v, err := c.Version(cctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true))
	if err != nil || v.RuntimeName != "fakecri" {
		t.Fatalf("Version: %v %v", v, err)
	}
	eventually(t, "4 pods and 7 containers", func() bool {
		p, err1 := c.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
		cs, err2 := c.ListContainers(cctx, &runtimeapi.ListContainersRequest{})
		return err1 == nil && err2 == nil && len(p.Items) == 4 && len(cs.Containers) == 7
	})
	// Everything so far was published with no subscriber: replayed (block mode).
	s, err := c.GetContainerEvents(cctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[runtimeapi.ContainerEventType]int{}
	for range 4*2 + 7*2 {
		counts[recv(t, s).ContainerEventType]++
	}
	if counts[created] != 11 || counts[started] != 11 {
		t.Errorf("replayed events %v", counts)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := recvUntilErr(s); err == nil {
		t.Error("stream survived SIGTERM")
	}
	err = cmd.Wait()
	waited = true
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	out := logs.String()
	for _, want := range []string{"fakecri serving", "scenario starting", "RunPodSandbox", "script finished", "GetContainerEvents: subscriber connected", "shutting down"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}
