package etcdproc

import (
	"context"
	"errors"
	"github.com/kubevents/kubevents/internal/buildcache"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// TestClusterKillLeader: three real etcd processes elect a leader;
// SIGKILL of the leader's process ends it, the other two elect a new
// leader and take writes; the killed member restarts over its data and
// ports and has every write.
func TestClusterKillLeader(t *testing.T) {
	// After Start's cleanup has killed the members and their waiters
	// have ended.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c := Start(t, 3)
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if root := buildcache.Root(); !strings.HasPrefix(bin, root+string(filepath.Separator)) {
		t.Errorf("etcd binary %s is not cached under %s", bin, root)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PID(leader)
	c.Kill(leader)
	if c.Running(leader) {
		t.Fatal("the killed leader still runs")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d of the killed leader: %v, want ESRCH", pid, err)
	}
	start := time.Now()
	next := -1
	for next < 0 || next == leader {
		if time.Since(start) > StartTimeout {
			t.Fatalf("no new leader %v after the kill: %v", StartTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
		next, err = c.Leader(ctx)
	}
	t.Logf("leader %d killed, %d elected after %v", leader, next, time.Since(start).Round(time.Millisecond))
	if _, err := cli.Put(ctx, "after", "2"); err != nil {
		t.Fatalf("put with two of three members: %v", err)
	}

	c.Restart(leader)
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoint(leader)}, DialTimeout: StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for _, k := range []string{"before", "after"} {
		r, err := one.Get(ctx, k)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get %s from the restarted member: %v %v", k, r, err)
		}
	}
}
