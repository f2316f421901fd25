package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubevents/kubevents/internal/buildinfo/buildinfotest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// TestDevcluster: the command README's "Beside a cluster" runs starts a
// kube-apiserver whose kubeconfig (written where asked) kubectl uses, with
// events in the events etcd at the address given, prints where everything
// is, and stops everything on Ctrl-C (its context's end).
func TestDevcluster(t *testing.T) {
	kubeapiserver.RequireBinaries(t)
	dir := t.TempDir()
	kc := filepath.Join(dir, "cluster.kubeconfig")
	eventsEtcd := eventsdtest.FreeAddr(t)
	var out syncbuf.Buffer
	cmd := newCommand(&out)
	cmd.SetArgs([]string{"--dir", filepath.Join(dir, "data"), "--port", "0", "--events-etcd", eventsEtcd, "--kubeconfig", kc, "--event-ttl", "2h"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	deadline := time.Now().Add(kubeapiserver.DefaultStartTimeout)
	for !strings.Contains(out.String(), "Ctrl-C stops everything") {
		select {
		case err := <-done:
			t.Fatalf("devcluster ended before it was ready: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("devcluster not ready:\n%s", out.String())
		}
	}
	t.Logf("devcluster printed:\n%s", out.String())
	if !strings.Contains(out.String(), "EVENTS_ETCD=http://"+eventsEtcd) {
		t.Errorf("the events etcd is not the one asked for (%s)", eventsEtcd)
	}
	pid := regexp.MustCompile(`\(pid (\d+)\)`).FindStringSubmatch(out.String())
	if pid == nil {
		t.Fatalf("no kube-apiserver pid printed")
	}

	kctx, kcancel := context.WithTimeout(context.Background(), time.Minute)
	defer kcancel()
	r := eventsdtest.RunKubectl(kctx, t, kc, strings.NewReader(`apiVersion: v1
kind: Event
metadata: {name: web-1.devcluster, namespace: default}
involvedObject: {apiVersion: v1, kind: Pod, name: web-1, namespace: default}
reason: BackOff
message: Back-off restarting failed container web
type: Warning
`), "create", "-f", "-")
	if r.Err != nil || !strings.Contains(r.Stdout, "event/web-1.devcluster created") {
		t.Fatalf("kubectl create through devcluster's kube-apiserver: %v %s %s", r.Err, r.Stdout, r.Stderr)
	}
	// kube-apiserver wrote it to the events etcd, as eventsd would read it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + eventsEtcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if g, err := cli.Get(kctx, "/registry/events/default/web-1.devcluster"); err != nil || len(g.Kvs) != 1 {
		t.Errorf("the event in the events etcd: %v %v", g, err)
	}
	r = eventsdtest.RunKubectl(kctx, t, kc, nil, "get", "--raw", "/version")
	if r.Err != nil || !strings.Contains(r.Stdout, `"gitVersion": "v1.`) {
		t.Errorf("/version: %v %s %s", r.Err, r.Stdout, r.Stderr)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("devcluster after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("devcluster did not end within a minute of Ctrl-C")
	}
	if _, err := os.Stat("/proc/" + pid[1]); err == nil {
		t.Errorf("kube-apiserver (pid %s) still runs after devcluster ended", pid[1])
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "etcd-events")); err != nil {
		t.Errorf("--dir's data is not kept: %v", err)
	}
}

// TestVersionFlag: devcluster --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	buildinfotest.CheckVersionFlag(t, newCommand(io.Discard), "devcluster")
}

// TestPortInUse: with kube-apiserver's port or the events etcd's address
// held, devcluster fails at once (before any build or start) with one
// line naming the port and the flag that changes it.
func TestPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", strconv.Itoa(port), "--events-etcd", eventsdtest.FreeAddr(t)},
			fmt.Sprintf("kube-apiserver's port %d on 127.0.0.1 is in use (another devcluster, kube-apiserver or etcd?): stop what listens there, or choose another with --port (0: any free port)", port)},
		{[]string{"--port", "0", "--events-etcd", held.Addr().String()},
			"the events etcd's address " + held.Addr().String() + " is in use (another devcluster, kube-apiserver or etcd?): stop what listens there, or choose another with --events-etcd (e.g. 127.0.0.1:2381)"},
	} {
		var out syncbuf.Buffer
		cmd := newCommand(&out)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		dir := filepath.Join(t.TempDir(), "data")
		cmd.SetArgs(append([]string{"--dir", dir}, c.args...))
		start := time.Now()
		err := cmd.Execute()
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v; want %s", c.args, err, c.want)
		}
		if out.String() != "" {
			t.Errorf("%v: devcluster started something:\n%s", c.args, out.String())
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: --dir was created", c.args)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: the refusal took %v", c.args, d)
		}
	}
}
