package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/buildinfo/buildinfotest"
	"github.com/kubevents/kubevents/internal/containerdproc"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// TestCrashloop: devcontainerd --crashloop runs pod default/crash on a
// real containerd, restarting its container with new attempts and
// keeping one dead container at most; Ctrl-C (the context) stops it and
// removes its directory.
func TestCrashloop(t *testing.T) {
	if err := containerdproc.CanRun(containerdproc.Options{}); err != nil {
		t.Skipf("real containerd not tested: %v", err)
	}
	if !containerdproc.Cached() {
		t.Skipf("real containerd not tested: not built yet (%s)", containerdproc.BuildCommand)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{crashloop: true, run: 50 * time.Millisecond, maxBackoff: 200 * time.Millisecond}, &out)
	}()
	ready := regexp.MustCompile(`ready on (\S+)`)
	var sock string
	deadline := time.Now().Add(time.Minute)
	for sock == "" {
		if m := ready.FindStringSubmatch(out.String()); m != nil {
			sock = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("devcontainerd ended: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("devcontainerd not ready within a minute:\n%s", out.String())
		}
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	for {
		resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var maxAttempt uint32
		for _, c := range resp.Containers {
			if c.Labels[containerdproc.LabelPodName] != "crash" || c.Metadata.Name != "app" {
				t.Fatalf("unexpected container %v", c)
			}
			maxAttempt = max(maxAttempt, c.Metadata.Attempt)
		}
		if len(resp.Containers) > 2 {
			t.Fatalf("%d containers: dead attempts are not removed", len(resp.Containers))
		}
		if maxAttempt >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no third attempt within a minute:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("devcontainerd: %v\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Ctrl-C: %v", filepath.Dir(sock), err)
	}
	t.Logf("%s", out.String())
}

// TestVersionFlag: devcontainerd --version prints its name and this
// build's version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	buildinfotest.CheckVersionFlag(t, newCommand(io.Discard), "devcontainerd")
}
