package containerdproc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerdRunsAContainerAndCleansUp: a pod's container, run through
// CRI as the kubelet does, runs the local image and exits with the code
// its command gave; containerd restarted (Halt, Resume) still knows it;
// Stop leaves no process, mount, cgroup or file behind.
func TestContainerdRunsAContainerAndCleansUp(t *testing.T) {
	c := StartTest(t)
	rt, closeRT, err := c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer closeRT()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	pod, err := c.RunPod(ctx, rt, "uid-probe", "default", "probe")
	if err != nil {
		t.Fatal(err)
	}
	id, err := pod.StartContainer(ctx, rt, "app", 0, "echo hi; exit 7")
	if err != nil {
		t.Fatal(err)
	}
	st := waitExited(t, ctx, rt, id)
	if st.ExitCode != 7 || st.Labels[LabelPodUID] != "uid-probe" || st.Metadata.Name != "app" {
		t.Fatalf("container status: exit %d, labels %v, metadata %v; want exit 7 of app in uid-probe", st.ExitCode, st.Labels, st.Metadata)
	}
	if out, err := c.Crictl("ps", "-a", "-q"); err != nil || !strings.Contains(out, id) {
		t.Errorf("crictl ps -a does not list %s: %v\n%s", id, err, out)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if st := waitExited(t, ctx, rt, id); st.ExitCode != 7 {
		t.Errorf("after a restart, exit code %d, want 7", st.ExitCode)
	}
	// A container running when Stop comes.
	if _, err := pod.StartContainer(ctx, rt, "sleeper", 0, "sleep 600"); err != nil {
		t.Fatal(err)
	}

	dir, cg := c.dir, c.cgroup
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dir, err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dir) {
		t.Errorf("still mounted under %s:\n%s", dir, mounts)
	}
	for _, root := range cgroupRoots() {
		if _, err := os.Stat(filepath.Join(root, cg)); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still in %s", cg, root)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			t.Errorf("a process still names %s: %s", dir, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

func waitExited(t *testing.T, ctx context.Context, rt runtimeapi.RuntimeServiceClient, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	for {
		resp, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("container status of %s: %v", id, err)
		}
		if resp.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return resp.Status
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not exit: %v", id, resp.Status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestCheckStatic: the image's busybox must be statically linked (the
// image has no loader or libraries); CanRun tells a dynamic one apart.
func TestCheckStatic(t *testing.T) {
	ls := lookPath("ls", "/bin/ls")
	if ls == "" {
		t.Skip("no ls to try a dynamic executable with")
	}
	if err := checkStatic(ls); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("checkStatic(%s) = %v, want dynamically linked", ls, err)
	}
	if err := checkStatic(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file passed as a static executable")
	}
	if bb := (Options{}).withDefaults().Busybox; bb != "" {
		t.Logf("busybox %s: %v", bb, checkStatic(bb))
	}
}
