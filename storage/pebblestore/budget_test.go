package pebblestore_test

import (
	"log/slog"
	"testing"

	"github.com/kubevents/kubevents/storage/budget/budgettest"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestBudget: over Options.MaxBytes, the events closest to their expiry
// are deleted early (DELETED to watchers), creates keep succeeding, and
// the expirations are counted by rule.
func TestBudget(t *testing.T) {
	budgettest.Run(t, budgettest.Harness{Open: func(t *testing.T, dir string, maxBytes int64, clk *clocktesting.FakeClock,
		ruleOf func(*corev1.Event) string, reg prometheus.Registerer) budgettest.Store {
		s, err := pebblestore.Open(pebblestore.Options{Dir: dir, Clock: clk, MaxBytes: maxBytes, RuleOf: ruleOf,
			Registerer: reg, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}})
}
