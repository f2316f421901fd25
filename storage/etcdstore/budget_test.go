package etcdstore_test

import (
	"log/slog"
	"testing"

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
	budgettest.Run(t, budgettest.Harness{Open: func(t *testing.T, dir string, maxBytes int64, clk *clocktesting.FakeClock,
		ruleOf func(*corev1.Event) string, reg prometheus.Registerer) budgettest.Store {
		e, endpoint := etcdtest.Start(t, dir)
		s, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, Clock: clk, MaxBytes: maxBytes, RuleOf: ruleOf,
			Registerer: reg, CompactionInterval: -1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			e.Close()
			t.Fatal(err)
		}
		return &budgetStore{withEtcd: &withEtcd{Store: s, etcd: e}}
	}})
}

// budgetStore is a withEtcd with the budget's methods in reach.
type budgetStore struct{ *withEtcd }
