package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/syncbuf"
)

func TestMain(m *testing.M) {
	// signal.NotifyContext starts os/signal's watcher, which never stops.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServe runs the command in-process until its context ends.
func TestServe(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	cmd := newCommand()
	var logs syncbuf.Buffer
	cmd.SetOut(&logs)
	cmd.SetErr(&logs)
	cmd.SetArgs([]string{"--listen", "unix://" + sock, "--scenario", "crashloop", "--time-scale", "1000", "--mode", "drop", "--unimplemented"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()
	eventually(t, "the socket", func() bool { _, err := os.Stat(sock); return err == nil })

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := runtimeapi.NewRuntimeServiceClient(conn)
	// crashloop at 1000x: attempts come every few ms of real time.
	eventually(t, "a restart", func() bool {
		resp, err := c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil {
			return false
		}
		for _, ct := range resp.Containers {
			if ct.Metadata.Attempt >= 1 {
				return true
			}
		}
		return false
	})
	s, err := c.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("--unimplemented: Recv = %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("command: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "fakecri serving") || !strings.Contains(logs.String(), "mode=drop") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.fcri")
	if err := os.WriteFile(bad, []byte("run-pod web\nfly web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "fast"}, "--mode"},
		{[]string{"--scenario", "party"}, "unknown scenario"},
		{[]string{"--time-scale", "0"}, "--time-scale"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--script", filepath.Join(dir, "missing")}, "--script"},
		{[]string{"--script", bad}, "line 2"},
		{[]string{"--listen", "http://x"}, "want unix:///path"},
		{[]string{"extra"}, "unknown command"},
	} {
		cmd := newCommand()
		var out syncbuf.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--listen", "unix://" + filepath.Join(dir, "s.sock")}, tc.args...))
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestSecondInstanceRefused: a second fakecri on the socket of a running
// one exits with an error instead of taking the socket over.
func TestSecondInstanceRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	first := newCommand()
	var logs syncbuf.Buffer
	first.SetOut(&logs)
	first.SetErr(&logs)
	first.SetArgs([]string{"--listen", sock})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- first.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("first fakecri: %v", err)
		}
	}()
	eventually(t, "the first fakecri serving", func() bool { return strings.Contains(logs.String(), "fakecri serving") })

	second := newCommand()
	var out syncbuf.Buffer
	second.SetOut(&out)
	second.SetErr(&out)
	second.SetArgs([]string{"--listen", "unix://" + sock})
	err := second.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another process is serving on "+sock) {
		t.Fatalf("second fakecri: %v, want it refused", err)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Errorf("the first fakecri's socket is gone: %v", err)
	}
}
