package etcdstore_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/budget/budgettest"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestBudget: over Options.MaxBytes, the events whose leases expire first
// are deleted early (DELETED to watchers), creates keep succeeding, and
// the expirations are counted by rule.
func TestBudget(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "MemoryIndex", true: "DiskIndex"}[disk], func(t *testing.T) { testBudget(t, disk) })
	}
}

// testBudget is TestBudget with the in-memory index or the on-disk one
// (whose per-key sizes, leases and rules live in its records).
func testBudget(t *testing.T, disk bool) {
	budgettest.Run(t, budgettest.Harness{Open: func(t *testing.T, dir string, maxBytes int64, clk *clocktesting.FakeClock,
		ruleOf func(*corev1.Event) string, reg prometheus.Registerer) budgettest.Store {
		e, endpoint := etcdtest.Start(t, dir)
		indexDir := ""
		if disk {
			indexDir = filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-etcd-index")
		}
		s, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, Clock: clk, MaxBytes: maxBytes, RuleOf: ruleOf,
			Registerer: reg, CompactionInterval: -1, IndexDir: indexDir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			e.Close()
			t.Fatal(err)
		}
		return &budgetStore{withEtcd: &withEtcd{Store: s, etcd: e}}
	}})
}

// budgetStore is a withEtcd with the budget's methods in reach.
type budgetStore struct{ *withEtcd }

// TestBudgetReplicas: two replicas with the same budget over one etcd
// both enforce it: every create through either succeeds, each victim is
// deleted (and counted) once between them, and the victims are those of
// the lease that expires first, earliest written first.
func TestBudgetReplicas(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "MemoryIndex", true: "DiskIndex"}[disk], func(t *testing.T) { testBudgetReplicas(t, disk) })
	}
}

// testBudgetReplicas is TestBudgetReplicas with the in-memory index or
// the on-disk one.
func testBudgetReplicas(t *testing.T, disk bool) {
	var maxBytes int64 = 1 << 40 // until one event is measured
	e := newEnv(t, func(o *etcdstore.Options) { o.MaxBytes = maxBytes })
	probe, err := e.s.Create(e.ctx, event("default", "e999"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stored bytes counted", func() bool { return e.s.StoredBytes() > 0 })
	one := e.s.StoredBytes()
	if _, err := e.s.Delete(e.ctx, "default", probe.Name, storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	e.s.Close()

	const n = 60
	maxBytes = 45 * one
	open := func() *etcdstore.Store {
		indexDir := ""
		if disk {
			indexDir = t.TempDir()
		}
		s, err := etcdstore.Open(etcdstore.Options{Client: e.cli, Clock: e.clock, MaxBytes: maxBytes, IndexDir: indexDir,
			Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	// Through a, 10-minute TTLs; through b, an hour: a's lease expires
	// first.
	for i := range n {
		s, ttl := a, 10*time.Minute
		if i%2 == 1 {
			s, ttl = b, time.Hour
		}
		if _, err := s.Create(e.ctx, event("default", fmt.Sprintf("e%03d", i)), storage.WriteOptions{TTL: ttl}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	var left []*corev1.Event
	waitFor(t, "both replicas within the budget", func() bool {
		if a.BudgetBusy() || b.BudgetBusy() || a.StoredBytes() > maxBytes || b.StoredBytes() > maxBytes {
			return false
		}
		res, err := a.List(e.ctx, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		left = res.Items
		return int64(len(left)) == n-a.BudgetExpirations()-b.BudgetExpirations()
	})
	expired := n - len(left)
	if expired == 0 || expired > n/2 {
		t.Fatalf("%d expired early; want between 1 and %d (a's)", expired, n/2)
	}
	gone := map[string]bool{}
	for i := range n {
		gone[fmt.Sprintf("e%03d", i)] = true
	}
	for _, ev := range left {
		delete(gone, ev.Name)
	}
	for i := range expired {
		if name := fmt.Sprintf("e%03d", 2*i); !gone[name] {
			t.Errorf("%s, among the first written through a, is still there; expired: %v", name, gone)
		}
	}
	t.Logf("expired early: %d by a, %d by b", a.BudgetExpirations(), b.BudgetExpirations())
}
