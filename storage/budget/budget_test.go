package budget

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestBudget: no budget is nil; the low-water mark, the count by rule,
// the gauges, and a log of rounds at most once per logInterval carrying
// the rounds it left out.
func TestBudget(t *testing.T) {
	if b, err := New(Options{}); b != nil || err != nil {
		t.Fatalf("no budget: %v, %v; want nil, nil", b, err)
	}
	var logs bytes.Buffer
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	reg := prometheus.NewRegistry()
	b, err := New(Options{MaxBytes: 1000, Registerer: reg, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		RuleOf: func(ev *corev1.Event) string { return ev.Reason }})
	if err != nil {
		t.Fatal(err)
	}
	if b.LowWater() != 900 || b.Over(1000) || !b.Over(1001) || b.Excess(1001) != 101 || b.Excess(800) != 0 {
		t.Fatalf("low water %d, over(1000) %v, over(1001) %v, excess(1001) %d, excess(800) %d",
			b.LowWater(), b.Over(1000), b.Over(1001), b.Excess(1001), b.Excess(800))
	}
	b.Expired(&corev1.Event{Reason: "r1"})
	b.Expired(&corev1.Event{Reason: "r1"})
	b.ExpiredRule("r2")
	if got := metricstest.Sum(t, reg, ExpirationsMetric, "rule", "r1"); got != 2 {
		t.Errorf("r1: %v, want 2", got)
	}
	if b.Expirations() != 3 {
		t.Errorf("Expirations %d, want 3", b.Expirations())
	}
	b.Logged(3, 1100, 890)
	b.Logged(0, 890, 890) // no expiration: not logged
	b.Logged(1, 1001, 899)
	b.Logged(1, 1001, 899)
	if got := metricstest.Sum(t, reg, BytesMetric); got != 899 {
		t.Errorf("%s %v, want 899", BytesMetric, got)
	}
	clk.Step(logInterval)
	b.Logged(1, 1001, 898)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "expired=3") || !strings.Contains(lines[1], "roundsSuppressed=2") {
		t.Fatalf("logged:\n%s\nwant two lines, the second with roundsSuppressed=2", logs.String())
	}
	if got := metricstest.Sum(t, reg, LimitMetric); got != 1000 {
		t.Errorf("%s %v, want 1000", LimitMetric, got)
	}
}
