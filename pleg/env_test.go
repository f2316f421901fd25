package pleg

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/fakecri"
)

// env is a fake CRI runtime served over gRPC (bufconn), the PLEG's CRI
// client of it, and a fake clock both share: the runtime stamps events
// with it, the PLEG schedules relists on it.
type env struct {
	t   *testing.T
	clk *clocktesting.FakeClock
	rt  *fakecri.Runtime
	cri Runtime
	m   *Metrics
	log *logr.Logger
}

func newEnv(t *testing.T, opts fakecri.Options) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(base)
	opts.Clock = clk
	opts.EagerStreamHeaders = true
	r := fakecri.New(opts)
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := r.Dial(ctx)
	if err != nil {
		t.Fatalf("dialing fakecri: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 2})
	return &env{t: t, clk: clk, rt: r, cri: NewCRIRuntime(conn), m: NewMetrics(), log: &log}
}

func (e *env) generic(capacity int) *GenericPLEG {
	return NewGeneric(e.cri, GenericConfig{Clock: e.clk, Metrics: e.m, Logger: e.log, ChannelCapacity: capacity})
}

// evented starts an evented PLEG and waits until its stream is up and the
// relist that follows has completed.
func (e *env) evented(cfg EventedConfig) *EventedPLEG {
	e.t.Helper()
	cfg.Clock, cfg.Metrics, cfg.Logger = e.clk, e.m, e.log
	p := NewEvented(e.cri, cfg)
	p.Start()
	e.t.Cleanup(p.Stop)
	return p
}

func (e *env) waitLive(p *EventedPLEG) {
	e.t.Helper()
	eventually(e.t, func() bool { return p.InUse() && p.caughtUp() }, "a live stream and the relist after it")
}

// caughtUp reports whether the relist after the stream came up (or after
// the last discard) has completed.
func (e *EventedPLEG) caughtUp() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.generic.done.Load() >= e.needRelist
}

// waitNotified waits until the PLEG has received n runtime events in all
// and applied every one.
func (e *env) waitNotified(p *EventedPLEG, n int) {
	e.t.Helper()
	eventually(e.t, func() bool { return e.count(e.m.Notifications) >= float64(n) && p.pending.Load() == 0 },
		"%d notifications (have %v)", n, e.count(e.m.Notifications))
	if got := e.count(e.m.Notifications); got != float64(n) {
		e.t.Fatalf("%v notifications, want %d", got, n)
	}
}

// nextRelist steps the clock by d and waits for a relist that started
// after the step to complete.
func (e *env) nextRelist(g *GenericPLEG, d time.Duration) {
	e.t.Helper()
	n := g.started.Load()
	e.clk.Step(d)
	e.waitRelists(g, n+1)
}

// waitRelists waits for the n-th relist to complete.
func (e *env) waitRelists(g *GenericPLEG, n int64) {
	e.t.Helper()
	eventually(e.t, func() bool { return g.done.Load() >= n }, "relist #%d", n)
}

func (e *env) count(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// drain returns the events waiting on ch, as "Type(data)" sorted.
func drain(ch <-chan *PodLifecycleEvent) []string {
	var out []string
	for {
		select {
		case ev := <-ch:
			out = append(out, fmt.Sprintf("%s(%v)", ev.Type, ev.Data))
		default:
			sort.Strings(out)
			return out
		}
	}
}

func expectEvents(t *testing.T, ch <-chan *PodLifecycleEvent, want ...string) {
	t.Helper()
	got := drain(ch)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// states renders a status's sandboxes and containers as "id=STATE".
func states(st *PodStatus) string {
	if st == nil {
		return "<nil>"
	}
	var out []string
	for _, s := range st.SandboxStatuses {
		out = append(out, s.Id+"="+s.State.String())
	}
	for _, c := range st.ContainerStatuses {
		out = append(out, c.Id+"="+c.State.String())
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
