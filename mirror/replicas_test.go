package mirror_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
)

// TestReplicasOverEtcd: two eventsd replicas over one etcd each run a
// mirror of the same source; one leads and mirrors, the other stands by,
// ready, serving what the leader writes. When the leader stops, the
// other takes over from the saved cursor (a watch from it, not another
// read of the source's state), and the changes made meanwhile are
// written once.
func TestReplicasOverEtcd(t *testing.T) {
	etcd, endpoint := etcdtest.Start(t, t.TempDir())
	defer etcd.Close()
	src := mirror.NewFakeSource()
	for i := range 3 {
		src.Create(srcEvent("ns", fmt.Sprintf("e%d", i), 1))
	}
	type replica struct {
		store *etcdstore.Store
		m     *mirror.Mirror
		reg   *prometheus.Registry
		stop  context.CancelFunc
		done  chan struct{}
	}
	start := func() *replica {
		st, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, ElectionTTL: 3 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		reg := prometheus.NewRegistry()
		m, err := mirror.New(mirror.Options{Source: src, Store: st, Registerer: reg, Logger: slog.New(slog.DiscardHandler),
			CursorInterval: 50 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{store: st, m: m, reg: reg, stop: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			if err := m.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	a, b := start(), start()
	synced := func(r *replica) bool { return metricstest.Sum(t, r.reg, "eventsd_mirror_synced") == 1 }
	waitFor(t, "one replica mirrors", func() bool { return synced(a) || synced(b) })
	leader, standby := a, b
	if synced(b) {
		leader, standby = b, a
	}
	count := func(r *replica) int {
		res, err := r.store.List(context.Background(), storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Items)
	}
	waitFor(t, "the standby serves what the leader mirrored", func() bool { return count(standby) == 3 })
	if synced(standby) || standby.m.Check(nil) != nil {
		t.Fatal("the standby mirrors too, or is not ready")
	}
	waitFor(t, "the leader's cursor saved", func() bool {
		c, ok, _ := standby.store.Cursor(context.Background(), "mirror")
		return ok && c == src.Revision()
	})
	leader.stop()
	<-leader.done
	src.Create(srcEvent("ns", "e3", 1))
	waitFor(t, "the standby took over", func() bool { return synced(standby) && count(standby) == 4 })
	if n := src.Calls("watchlist"); n != 1 {
		t.Fatalf("%d WatchLists: the new leader read the source's state again instead of resuming", n)
	}
	// etcd's revision also counts cursor saves and elections: count the
	// new leader's writes instead (counted once the store answered the
	// write, which the list above may see first).
	applied := func() float64 { return metricstest.Sum(t, standby.reg, "eventsd_mirror_changes_applied_total") }
	waitFor(t, "the new leader counts its write", func() bool { return applied() >= 1 })
	if n := applied(); n != 1 {
		t.Fatalf("the new leader wrote %v changes, want the one made during the takeover", n)
	}
}

// waitFor polls cond for up to 20 s of wall time (leases and elections
// run on etcd's clock).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", what)
		}
	}
}
