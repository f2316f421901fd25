package recordermetrics

import (
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestDropper: drops are counted by cause, every time; their lines are
// rate-limited per key and carry the drops and the lines they stand for.
func TestDropper(t *testing.T) {
	m := New("v1")
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	d := NewDropper(m, clk, 10*time.Second, "extra")
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})

	d.Drop(logger, DropShutdown, DropShutdown, 2, nil, "gone", "k", "v")
	d.Drop(logger, DropShutdown, DropShutdown, 1, nil, "gone")
	d.Drop(logger, "extra", DropShutdown, 1, nil, "other key")
	d.Drop(logger, DropShutdown, DropShutdown, 0, nil, "nothing")
	clk.Step(10 * time.Second)
	d.Drop(logger, DropShutdown, DropShutdown, 1, errors.New("boom"), "gone again")
	d.Count(DropInvalid, 3)

	if n := testutil.ToFloat64(m.Dropped.WithLabelValues(DropShutdown)); n != 5 {
		t.Errorf("shutdown drops %v, want 5", n)
	}
	if n := testutil.ToFloat64(m.Dropped.WithLabelValues(DropInvalid)); n != 3 {
		t.Errorf("invalid drops %v, want 3", n)
	}
	want := []string{
		`"msg"="gone" "error"=null "k"="v" "cause"="shutdown" "dropped"=2`,
		`"msg"="other key" "error"=null "cause"="shutdown" "dropped"=1`,
		`"msg"="gone again" "error"="boom" "cause"="shutdown" "dropped"=1 "suppressedSinceLastLog"=1`,
	}
	if len(lines) != len(want) {
		t.Fatalf("lines:\n%q\nwant\n%q", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %s, want %s", i, lines[i], want[i])
		}
	}
}

// TestRegisterShared: a second set of metrics on one registry adopts the
// first's collectors instead of failing; Register refuses them.
func TestRegisterShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := New("v1"), New("v1")
	if err := a.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(reg); err == nil {
		t.Error("Register of the same metrics twice succeeded")
	}
	if err := b.RegisterShared(reg); err != nil {
		t.Fatal(err)
	}
	b.Emitted.Inc()
	b.Dropped.WithLabelValues(DropQueueFull).Inc()
	b.ActiveSeries.Set(4)
	if testutil.ToFloat64(a.Emitted) != 1 || testutil.ToFloat64(a.Dropped.WithLabelValues(DropQueueFull)) != 1 ||
		testutil.ToFloat64(a.ActiveSeries) != 4 {
		t.Error("the second metrics do not share the first's collectors")
	}
}
