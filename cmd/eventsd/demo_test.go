package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/demo"
)

// TestDemoRefusals: --demo is refused, saying why, where its anonymous
// writes could not land: with a mirror (read-only API) or with
// authentication or authorization.
func TestDemoRefusals(t *testing.T) {
	tokens := t.TempDir() + "/tokens.csv"
	if err := os.WriteFile(tokens, []byte("t0k3n,alice,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--source-kubeconfig", "/nonexistent"}, "a mirror's API is read-only"},
		{[]string{"--token-auth-file", tokens}, "without authentication and authorization flags"},
		{[]string{"--authorization-mode", "AlwaysDeny"}, "without authentication and authorization flags"},
	} {
		dir := t.TempDir() + "/data"
		cmd := newCommand()
		cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "error", "--demo"}, c.args...))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--demo %v: %v, want an error saying %q", c.args, err, c.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("--demo %v: refused, yet created %s", c.args, dir)
		}
	}
}

// TestDemo: eventsd --demo serves its story through its API, as any
// client reads it, and keeps it in a temporary directory of its own
// (removed at exit) when --data-dir is not given, so that ./eventsd-data
// is left alone.
func TestDemo(t *testing.T) {
	t.Chdir(t.TempDir())
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	addr, stop := startEventsd(t, "--demo")
	ctx := context.Background()

	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	// Each of the story's writes is made durable in turn: on a loaded
	// machine (go test runs packages side by side) that takes a while.
	const storyTimeout = 2 * time.Minute
	deadline := time.Now().Add(storyTimeout)
	var backOff bool
	for !backOff {
		if time.Now().After(deadline) {
			t.Fatalf("the demo's story (its BackOff event, then its last, the scheduler's) was not served within %v", storyTimeout)
		}
		time.Sleep(50 * time.Millisecond)
		// The scheduler's events, through events.k8s.io/v1, are the
		// story's last.
		l, err := cs.CoreV1().Events(demo.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=BackOff,involvedObject.name=" + demo.CrashingPod})
		sched, serr := cs.EventsV1().Events(demo.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled,regarding.name=" + demo.CrashingPod})
		backOff = err == nil && serr == nil && len(l.Items) == 1 && l.Items[0].Count >= 41 && len(sched.Items) == 1
	}
	failed, err := cs.EventsV1().Events(demo.BatchNamespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil || len(failed.Items) != 1 || failed.Items[0].Series == nil {
		t.Fatalf("FailedScheduling in %s: %v, %v", demo.BatchNamespace, failed, err)
	}
	if resp, err := http.Get("http://" + addr + "/ui/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the web page: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := os.Stat("eventsd-data"); err == nil {
		t.Error("--demo without --data-dir wrote ./eventsd-data")
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "eventsd-demo-") {
		t.Errorf("TMPDIR holds %v, want the demo's store", entries)
	}

	stop()
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("the demo's store is left in TMPDIR after exit: %v", entries)
	}
}
