package pleg

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/fakecri"
)

// The scenarios of pleg.md §7 B-D, against fakecri over gRPC.

func histCount(h prometheus.Histogram) uint64 {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// live returns an evented PLEG following fakecri's stream.
func live(t *testing.T, opts fakecri.Options, cfg EventedConfig) (*env, *EventedPLEG) {
	e := newEnv(t, opts)
	p := e.evented(cfg)
	e.waitLive(p)
	return e, p
}

// at moves the fake clock to rt(sec).
func (e *env) at(sec float64) { e.clk.SetTime(rt(sec)) }

// Scenario 8: startup with a healthy stream.
func TestEventedStartup(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	if s, f := e.count(e.m.ConnectionSuccess), e.count(e.m.ConnectionErrors); s != 1 || f != 0 {
		t.Errorf("connection success %v, errors %v; want 1, 0", s, f)
	}
	if per, thr := p.Generic().Period(), p.Generic().Threshold(); per != 300*time.Second || thr != 10*time.Minute {
		t.Errorf("generic relists every %v, threshold %v; want 5m0s, 10m0s", per, thr)
	}
	if !p.InUse() || e.count(e.m.EventedInUse) != 1 {
		t.Error("evented not in use")
	}
	if ok, err := p.Healthy(); !ok {
		t.Errorf("unhealthy: %v", err)
	}
}

// Scenario 9: a pod starts; CREATED events send nothing and cache a
// transient snapshot, stamped with the event's nanoseconds.
func TestEventedPodStart(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	c := p.Cache()
	check := func(wantStates string, transient bool) {
		t.Helper()
		en := c.peek("p1")
		if en == nil {
			t.Fatal("p1 not cached")
		}
		if got := states(en.status); got != wantStates {
			t.Errorf("cache holds %q, want %q", got, wantStates)
		}
		if !en.modified.Equal(e.clk.Now()) || en.modified.UnixNano() != e.clk.Now().UnixNano() {
			t.Errorf("modified %v, want the event's created_at %v", en.modified, e.clk.Now())
		}
		if en.transient != transient {
			t.Errorf("transient = %v, want %v", en.transient, transient)
		}
	}
	e.clk.SetTime(rt(1).Add(123 * time.Nanosecond))
	podP(e) // CREATED and STARTED of s1
	e.waitNotified(p, 2)
	expectEvents(t, p.Watch(), "ContainerStarted(s1)")
	check("s1=SANDBOX_READY", false)

	e.clk.SetTime(rt(2).Add(456 * time.Nanosecond))
	container(e, "s1", "c1")
	e.waitNotified(p, 3)
	expectEvents(t, p.Watch())
	check("c1=CONTAINER_CREATED s1=SANDBOX_READY", true)

	e.clk.SetTime(rt(3).Add(789 * time.Nanosecond))
	must(t, e.rt.StartContainer("c1"))
	e.waitNotified(p, 4)
	expectEvents(t, p.Watch(), "ContainerStarted(c1)")
	check("c1=CONTAINER_RUNNING s1=SANDBOX_READY", false)
	if n := histCount(e.m.EventLatency); n != 4 {
		t.Errorf("evented_pleg_connection_latency_seconds_count = %d, want 4", n)
	}
}

// startedPod starts pod P with running c1 on a live PLEG and consumes its
// events; it returns the notifications so far.
func startedPod(t *testing.T, e *env, p *EventedPLEG) int {
	t.Helper()
	e.at(1)
	podP(e)
	container(e, "s1", "c1")
	must(t, e.rt.StartContainer("c1"))
	e.waitNotified(p, 4)
	drain(p.Watch())
	return 4
}

// Scenario 10: stop and delete: Died once, then Removed, and the cache
// drops the container (a documented improvement on upstream's second Died
// and unchanged cache).
func TestEventedStopAndDelete(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	n := startedPod(t, e, p)
	e.at(2)
	must(t, e.rt.StopContainer("c1", 137))
	e.waitNotified(p, n+1)
	expectEvents(t, p.Watch(), "ContainerDied(c1)")
	e.at(3)
	must(t, e.rt.RemoveContainer("c1"))
	e.waitNotified(p, n+2)
	expectEvents(t, p.Watch(), "ContainerRemoved(c1)")
	st, _ := p.Cache().Get("p1")
	if got := states(st); got != "s1=SANDBOX_READY" {
		t.Fatalf("cache holds %q", got)
	}
}

// Scenario 11: the sandbox is deleted: the pod leaves the cache, and the
// next relist, which finds it gone, does not report it again.
func TestEventedSandboxDeleted(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	startedPod(t, e, p)
	e.nextRelist(p.Generic(), 300*time.Second) // the relist knows the pod
	expectEvents(t, p.Watch())
	before := e.count(e.m.Notifications)
	e.clk.Step(time.Second)
	must(t, e.rt.RemovePodSandbox("s1"))
	// fakecri stops what runs (c1, s1), removes c1, then s1.
	e.waitNotified(p, int(before)+4)
	expectEvents(t, p.Watch(), "ContainerDied(c1)", "ContainerRemoved(c1)", "ContainerDied(s1)", "ContainerRemoved(s1)")
	if p.Cache().has("p1") {
		t.Fatal("p1 still cached")
	}
	e.nextRelist(p.Generic(), 300*time.Second)
	expectEvents(t, p.Watch())
	if got := e.count(e.m.MissedEvents); got != 0 {
		t.Errorf("missed events %v after a relist of what the stream reported", got)
	}
	// A late event about the pod cannot bring it back.
	if got := p.Cache().Set("p1", podStatus("p1", nil), nil, rt(1.5), false); got != Rejected {
		t.Fatalf("late event after the tombstone: %v", got)
	}
}

// Scenario 12: an event without a sandbox status changes nothing.
func TestEventedNilSandboxStatus(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	n := startedPod(t, e, p)
	was := p.Cache().peek("p1")
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.NilSandboxStatus = true })
	e.at(2)
	must(t, e.rt.StopContainer("c1", 1))
	e.waitNotified(p, n+1)
	expectEvents(t, p.Watch())
	if now := p.Cache().peek("p1"); now.status != was.status || !now.modified.Equal(was.modified) {
		t.Fatal("cache changed")
	}
	if got := e.count(e.m.InvalidEvents); got != 1 {
		t.Fatalf("invalid events %v", got)
	}
	if e.count(e.m.ConnectionErrors) != 0 || !p.InUse() {
		t.Fatal("the stream went down")
	}
}

// Scenario 13: an event about a pod no relist has seen.
func TestEventedUnknownPod(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	e.at(1)
	id := e.rt.RunPodSandbox("p9", "default", "new", 0)
	e.waitNotified(p, 2)
	expectEvents(t, p.Watch(), "ContainerStarted("+id+")")
	if !p.Cache().has("p9") {
		t.Fatal("p9 not cached")
	}
}

// Scenario 14: a stopping sandbox keeps the pod's IPs; a ready one with a
// new IP replaces them.
func TestEventedIPPreservation(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	n := startedPod(t, e, p)
	ips := func() []string { st, _ := p.Cache().Get("p1"); return st.IPs }
	must(t, e.rt.SetSandboxIP("s1", "10.0.0.5"))
	e.at(2)
	container(e, "s1", "c2")
	n++
	e.waitNotified(p, n)
	if got := ips(); len(got) != 1 || got[0] != "10.0.0.5" {
		t.Fatalf("IPs %v", got)
	}
	e.at(3)
	must(t, e.rt.StopPodSandbox("s1")) // c1 STOPPED, s1 STOPPED (NOTREADY, no IP)
	n += 2
	e.waitNotified(p, n)
	if got := ips(); len(got) != 1 || got[0] != "10.0.0.5" {
		t.Fatalf("IPs after the sandbox stopped: %v", got)
	}
	must(t, e.rt.SetSandboxState("s1", runtimeapi.PodSandboxState_SANDBOX_READY))
	must(t, e.rt.SetSandboxIP("s1", "10.0.0.6"))
	e.at(4)
	container(e, "s1", "c3")
	n++
	e.waitNotified(p, n)
	if got := ips(); len(got) != 1 || got[0] != "10.0.0.6" {
		t.Fatalf("IPs after a ready sandbox with a new IP: %v", got)
	}
}

// Scenario 15: an older event delivered after a newer one is refused.
func TestEventedOutOfOrder(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	e.at(1)
	podP(e)
	container(e, "s1", "c1")
	e.waitNotified(p, 3)
	drain(p.Watch())
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.Reorder = true })
	e.at(10)
	must(t, e.rt.StartContainer("c1")) // held
	e.at(20)
	must(t, e.rt.StopContainer("c1", 0)) // leaves first, then STARTED@10
	e.waitNotified(p, 5)
	expectEvents(t, p.Watch(), "ContainerDied(c1)")
	en := p.Cache().peek("p1")
	if got := states(en.status); got != "c1=CONTAINER_EXITED s1=SANDBOX_READY" || !en.modified.Equal(rt(20)) {
		t.Fatalf("cache holds %q at %v", got, en.modified)
	}
}

// Scenario 16: a duplicated event is idempotent.
func TestEventedDuplicate(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	e.at(1)
	podP(e)
	container(e, "s1", "c1")
	e.waitNotified(p, 3)
	drain(p.Watch())
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.Duplicate = true })
	e.at(10)
	must(t, e.rt.StartContainer("c1"))
	e.waitNotified(p, 5)
	expectEvents(t, p.Watch(), "ContainerStarted(c1)")
	en := p.Cache().peek("p1")
	if got := states(en.status); got != "c1=CONTAINER_RUNNING s1=SANDBOX_READY" || !en.modified.Equal(rt(10)) {
		t.Fatalf("cache holds %q at %v", got, en.modified)
	}
}

// Scenario 17: a relist that read the runtime before an event was applied
// is refused, sends nothing and diffs again next time.
func TestEventedRelistRace(t *testing.T) {
	e, p := live(t, fakecri.Options{StatusWithContainers: true}, EventedConfig{})
	n := startedPod(t, e, p)
	var once sync.Once
	e.rt.SetRPCHook(func(method string, after bool) {
		if method != "PodSandboxStatus" || !after {
			return
		}
		once.Do(func() {
			// The response (timestamp rt(15), c1 running) is computed; c1
			// stops and its event is applied before the relist gets it.
			e.at(16)
			must(t, e.rt.StopContainer("c1", 1))
			e.waitNotified(p, n+1)
		})
	})
	e.at(15)
	p.Generic().Relist()
	e.rt.SetRPCHook(nil)
	expectEvents(t, p.Watch(), "ContainerDied(c1)") // from the event only
	en := p.Cache().peek("p1")
	if got := states(en.status); got != "c1=CONTAINER_EXITED s1=SANDBOX_READY" || !en.modified.Equal(rt(16)) {
		t.Fatalf("cache holds %q at %v", got, en.modified)
	}
	p.Generic().relistMu.Lock()
	r := p.Generic().records["p1"]
	advanced := r != nil && r.old != nil
	p.Generic().relistMu.Unlock()
	if advanced {
		t.Fatal("the refused relist advanced the pod's record")
	}
	e.at(17)
	p.Generic().Relist()
	expectEvents(t, p.Watch()) // re-diffed; nothing the consumer has not heard
	p.Generic().relistMu.Lock()
	advanced = p.Generic().records["p1"].old != nil
	p.Generic().relistMu.Unlock()
	if !advanced {
		t.Fatal("the next relist did not advance the record")
	}
}

// Scenario 18: realistic nanoseconds, seconds from old runtimes, and a
// far-future stamp that must not block later updates.
func TestEventedTimestamps(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	n := startedPod(t, e, p)
	if m := p.Cache().peek("p1").modified; m.Sub(e.clk.Now()).Abs() > time.Second {
		t.Fatalf("modified %v, not within 1s of %v", m, e.clk.Now())
	}
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.FutureTimestamps = time.Hour })
	e.at(2)
	container(e, "s1", "c2")
	n++
	e.waitNotified(p, n)
	if m := p.Cache().peek("p1").modified; !m.Equal(rt(2)) {
		t.Fatalf("a stamp an hour ahead stored as %v, want clamped to %v", m, rt(2))
	}
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.FutureTimestamps = 0; f.SecondsTimestamps = true })
	e.at(3.5)
	must(t, e.rt.StartContainer("c2"))
	n++
	e.waitNotified(p, n)
	expectEvents(t, p.Watch(), "ContainerStarted(c2)")
	if m := p.Cache().peek("p1").modified; !m.Equal(rt(3)) {
		t.Fatalf("a stamp in seconds stored as %v, want %v", m, rt(3))
	}
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.SecondsTimestamps = false })
	e.at(4)
	must(t, e.rt.StopContainer("c2", 0))
	n++
	e.waitNotified(p, n)
	expectEvents(t, p.Watch(), "ContainerDied(c2)")
}

// Scenario 20: GetNewerThan releases on a newer event, or on the stream
// watermark, which moves only while the stream is live.
func TestEventedGetNewerThan(t *testing.T) {
	t.Run("events", func(t *testing.T) {
		e, p := live(t, fakecri.Options{}, EventedConfig{WatermarkPeriod: time.Hour})
		n := startedPod(t, e, p) // at rt(1)
		out, cancel := getAsync(p.Cache(), "p1", rt(5))
		defer cancel()
		waitWaiting(t, p.Cache(), 1)
		e.at(4)
		must(t, e.rt.StopContainer("c1", 0)) // older than minTime
		e.waitNotified(p, n+1)
		waitWaiting(t, p.Cache(), 1)
		e.at(6)
		container(e, "s1", "c2") // newer but transient: relisted at once
		st := <-out
		if got := states(st); got != "c1=CONTAINER_EXITED c2=CONTAINER_CREATED s1=SANDBOX_READY" {
			t.Fatalf("released with %q", got)
		}
	})
	t.Run("watermark", func(t *testing.T) {
		e, p := live(t, fakecri.Options{}, EventedConfig{})
		n := startedPod(t, e, p) // at rt(1)
		relists := p.Generic().done.Load()
		out, cancel := getAsync(p.Cache(), "p1", rt(1.5))
		defer cancel()
		select {
		case st := <-out:
			r, s := p.Cache().Watermarks()
			t.Fatalf("released at once with %s (entry %v, watermarks %v %v)", states(st), p.Cache().peek("p1").modified, r, s)
		case <-time.After(100 * time.Millisecond):
		}
		waitWaiting(t, p.Cache(), 1)
		e.at(1.4) // before minTime: no release by itself
		must(t, e.rt.StopContainer("c1", 3))
		e.waitNotified(p, n+1)
		waitWaiting(t, p.Cache(), 1)
		e.clk.SetTime(rt(2)) // the watermark moves to rt(1.8)
		st := <-out
		if got := states(st); got != "c1=CONTAINER_EXITED s1=SANDBOX_READY" {
			t.Fatalf("released with %q", got)
		}
		if _, wm := p.Cache().Watermarks(); !wm.Equal(rt(1.8)) {
			t.Fatalf("stream watermark %v", wm)
		}
		if p.Generic().done.Load() != relists {
			t.Fatal("released by a relist, not the watermark")
		}

		// Down, the stream watermark stays put.
		e.rt.Refuse(time.Hour)
		eventually(t, func() bool { return !p.InUse() }, "the stream to go down")
		_, wm := p.Cache().Watermarks()
		for i := 0; i < 5; i++ {
			e.clk.Step(time.Second)
		}
		if _, now := p.Cache().Watermarks(); !now.Equal(wm) {
			t.Fatalf("stream watermark moved to %v while the stream was down", now)
		}
	})
}

// Scenario 21: the stream breaks; what it lost is recovered by the relist
// right away and counted as missed; it reconnects at once.
func TestEventedStreamBroken(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	n := startedPod(t, e, p)
	container(e, "s1", "c2")
	must(t, e.rt.StartContainer("c2"))
	n += 2
	e.waitNotified(p, n)
	drain(p.Watch())

	e.rt.ResetCalls()
	e.rt.DropNext(1)
	must(t, e.rt.StopContainer("c2", 1)) // the gap's event, lost
	e.at(3)
	e.rt.BreakStreams()
	eventually(t, func() bool { return e.count(e.m.ConnectionSuccess) == 2 && p.InUse() && p.caughtUp() },
		"a reconnect and a relist")
	expectEvents(t, p.Watch(), "ContainerDied(c2)")
	if got := e.count(e.m.ConnectionErrors); got != 1 {
		t.Errorf("connection errors %v, want 1", got)
	}
	if got := e.count(e.m.MissedEvents); got != 1 {
		t.Errorf("missed events %v, want 1", got)
	}
	calls := e.rt.Calls()
	if calls["ListPodSandbox"] < 1 || calls["ListContainers"] < 1 || calls["GetContainerEvents"] != 1 {
		t.Errorf("calls %v", calls)
	}
}

// Scenario 22: a transition the runtime never reported is found by the
// periodic relist and counted; one it reported is not.
func TestEventedMissedEvent(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{})
	n := startedPod(t, e, p)
	container(e, "s1", "c2")
	must(t, e.rt.StartContainer("c2"))
	n += 2
	e.waitNotified(p, n)
	drain(p.Watch())

	e.at(2)
	must(t, e.rt.SetContainerState("c1", runtimeapi.ContainerState_CONTAINER_EXITED, 1)) // no event
	must(t, e.rt.StopContainer("c2", 0))
	e.waitNotified(p, n+1)
	expectEvents(t, p.Watch(), "ContainerDied(c2)")

	e.nextRelist(p.Generic(), 300*time.Second)
	expectEvents(t, p.Watch(), "ContainerDied(c1)")
	if got := e.count(e.m.MissedEvents); got != 1 {
		t.Fatalf("missed events %v, want 1", got)
	}
	st, _ := p.Cache().Get("p1")
	if got := states(st); got != "c1=CONTAINER_EXITED c2=CONTAINER_EXITED s1=SANDBOX_READY" {
		t.Fatalf("cache holds %q", got)
	}
}

// Scenario 23: a runtime without GetContainerEvents (containerd 1.6):
// relisting every second after one attempt, no success counted, and a
// probe now and then that finds the stream once the runtime has it.
func TestEventedUnimplemented(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.Unimplemented = true })
	p := e.evented(EventedConfig{})
	eventually(t, p.FellBack, "the fallback")
	if s, f := e.count(e.m.ConnectionSuccess), e.count(e.m.ConnectionErrors); s != 0 || f != 1 {
		t.Errorf("connection success %v, errors %v; want 0, 1", s, f)
	}
	if per, thr := p.Generic().Period(), p.Generic().Threshold(); per != time.Second || thr != 3*time.Minute {
		t.Errorf("generic relists every %v, threshold %v", per, thr)
	}
	if p.InUse() {
		t.Error("in use")
	}
	// The stream's end requested a relist, which may still be pending or
	// running: let it finish before the containers start, so that the
	// relist below is the one that finds them.
	e.nextRelist(p.Generic(), time.Second)
	podP(e)
	must(t, e.rt.StartContainer(container(e, "s1", "c1")))
	e.rt.ResetCalls()
	e.nextRelist(p.Generic(), time.Second)
	expectEvents(t, p.Watch(), "ContainerStarted(s1)", "ContainerStarted(c1)")
	if e.rt.Calls()["ContainerStatus"] == 0 {
		t.Error("statuses not from ContainerStatus")
	}
	if got := e.count(e.m.MissedEvents); got != 0 {
		t.Errorf("missed events %v without a stream", got)
	}

	e.clk.Step(DefaultProbePeriod)
	eventually(t, func() bool { return e.count(e.m.ConnectionErrors) == 2 }, "a probe")
	if !p.FellBack() {
		t.Fatal("a failed probe left the fallback")
	}
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.Unimplemented = false })
	e.clk.Step(DefaultProbePeriod)
	e.waitLive(p)
	if p.FellBack() || p.Generic().Period() != 300*time.Second {
		t.Fatal("a runtime that gained events is not followed")
	}
}

// Scenario 24: events disabled (CRI-O): streams end at once; the PLEG
// falls back after three, with the backoff between them.
func TestEventedEventsDisabled(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	e.rt.UpdateFaults(func(f *fakecri.Faults) { f.EventsDisabled = true })
	p := e.evented(EventedConfig{})
	// The first retry is at once, the second after a second.
	eventually(t, func() bool { return e.count(e.m.ConnectionErrors) >= 2 }, "two attempts")
	if got := e.count(e.m.ConnectionErrors); got != 2 || p.FellBack() {
		t.Fatalf("%v attempts without the clock moving, fallen back %v", got, p.FellBack())
	}
	e.clk.Step(time.Second)
	eventually(t, func() bool { return e.count(e.m.ConnectionErrors) == 3 }, "the third attempt")
	eventually(t, p.FellBack, "the fallback")
	if s := e.count(e.m.ConnectionSuccess); s != 0 {
		t.Errorf("connection success %v", s)
	}
	if per := p.Generic().Period(); per != time.Second {
		t.Errorf("generic relists every %v", per)
	}
}

// Reconnection backoff: at once, 1, 2 ... 64 s, then every 60 s; reset
// after a stream that stayed up.
func TestEventedBackoff(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	delays := make(chan time.Duration, 100)
	cfg := EventedConfig{Clock: e.clk, Metrics: e.m, Logger: e.log}
	p := NewEvented(e.cri, cfg)
	p.retryHook = func(d time.Duration) { delays <- d }
	p.Start()
	t.Cleanup(p.Stop)
	e.waitLive(p)

	e.rt.Refuse(10 * time.Minute)
	want := []time.Duration{0, 1, 2, 4, 8, 16, 32, 64, 60, 60}
	for i, w := range want {
		d := <-delays
		if d != w*time.Second {
			t.Fatalf("retry %d after %v, want %v", i, d, w*time.Second)
		}
		e.clk.Step(d)
	}
	if p.FellBack() {
		t.Fatal("a refusing runtime made the PLEG give up")
	}
	if per := p.Generic().Period(); per != time.Second {
		t.Fatalf("relisting every %v while down", per)
	}
	// The runtime comes back: the next retry connects.
	if d := <-delays; d != 60*time.Second {
		t.Fatalf("retry after %v", d)
	}
	e.clk.Step(10 * time.Minute)
	e.waitLive(p)
	e.clk.Step(DefaultStableAfter)
	e.rt.BreakStreams()
	if d := <-delays; d != 0 {
		t.Fatalf("after a stable stream, retry after %v, want at once", d)
	}
	e.waitLive(p)
}

// A PLEG that cannot keep up never blocks the runtime's stream: it
// discards, counts, and relists.
func TestEventedSlowProcessing(t *testing.T) {
	e, p := live(t, fakecri.Options{MonotonicTimestamps: true}, EventedConfig{QueueSize: 2})
	e.at(1)
	podP(e)
	e.waitNotified(p, 2)
	p.cache.mu.Lock() // the processor stalls on the cache
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			if err := e.rt.StartContainer(e.rt.CreateContainer("s1", fmt.Sprintf("x%d", i), 0)); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cache.mu.Unlock()
		t.Fatal("the runtime blocked on a slow PLEG")
	}
	// Every event the runtime sent was either queued or discarded.
	eventually(t, func() bool {
		return e.count(e.m.StreamDiscards) > 0 && e.count(e.m.Notifications) == 42
	}, "42 events received")
	e.clk.Step(time.Second) // the relist reads the runtime after them
	p.cache.mu.Unlock()
	eventually(t, func() bool { return p.caughtUp() && p.pending.Load() == 0 }, "the relist after the discards")
	st, _ := p.Cache().Get("p1")
	if len(st.ContainerStatuses) != 20 {
		t.Fatalf("cache holds %d containers, want 20", len(st.ContainerStatuses))
	}
	for _, c := range st.ContainerStatuses {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("cache holds %s", states(st))
		}
	}
}

// A full PLEG channel makes the evented PLEG unhealthy and counts drops.
func TestEventedChannelFull(t *testing.T) {
	e, p := live(t, fakecri.Options{}, EventedConfig{ChannelCapacity: 2})
	e.at(1)
	podP(e)
	for i := 0; i < 3; i++ {
		must(t, e.rt.StartContainer(e.rt.CreateContainer("s1", fmt.Sprintf("x%d", i), 0)))
	}
	e.waitNotified(p, 8)
	ok, err := p.Healthy()
	if ok || err == nil || err.Error() != "EventedPLEG: pleg event channel capacity is full with 2 events" {
		t.Fatalf("Healthy = %v, %v", ok, err)
	}
	if got := e.count(e.m.Discards); got != 2 {
		t.Fatalf("discards %v, want 2", got)
	}
}

// Scenario 25: Start is idempotent; Stop leaves no goroutine behind and
// no event is applied after it; the PLEG can start again.
func TestEventedStopStart(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	// The client connects lazily: connect first, so that the gRPC
	// transport's goroutines are part of the baseline.
	if _, err := e.cri.ListPodSandbox(context.Background()); err != nil {
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()
	cfg := EventedConfig{Clock: e.clk, Metrics: e.m, Logger: e.log}
	p := NewEvented(e.cri, cfg)
	p.Start()
	p.Start()
	e.waitLive(p)
	if n := e.rt.Calls()["GetContainerEvents"]; n != 1 {
		t.Fatalf("%d streams opened", n)
	}
	e.at(1)
	podP(e)
	e.waitNotified(p, 2)
	p.Stop()
	p.Stop()
	goleak.VerifyNone(t, ignore)

	was := p.Cache().peek("p1")
	e.at(2)
	container(e, "s1", "c1")
	if e.rt.Stats().Subscribers != 0 {
		t.Fatal("a stream is still open")
	}
	if now := p.Cache().peek("p1"); now.status != was.status {
		t.Fatal("the cache changed after Stop")
	}
	if e.count(e.m.EventedInUse) != 0 {
		t.Fatal("evented_pleg_in_use still 1")
	}

	p.Start()
	defer p.Stop()
	e.waitLive(p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.Cache().GetNewerThan(ctx, "p1", rt(1.5))
	if err != nil || states(st) != "c1=CONTAINER_CREATED s1=SANDBOX_READY" {
		t.Fatalf("after a restart: %s, %v", states(st), err)
	}
}

// containerd and CRI-O send headers only with the first event: a quiet
// stream counts as established once it has stayed open ConfirmAfter.
func TestEventedQuietStream(t *testing.T) {
	clkEnv := newEnv(t, fakecri.Options{})
	// A second runtime, like a real one: no headers until an event.
	r := fakecri.New(fakecri.Options{Clock: clkEnv.clk})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := r.Dial(ctx)
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	e := &env{t: t, clk: clkEnv.clk, rt: r, cri: NewCRIRuntime(conn), m: NewMetrics(), log: clkEnv.log}

	p := e.evented(EventedConfig{})
	eventually(t, func() bool { return r.Stats().Subscribers == 1 }, "the stream")
	if p.InUse() || e.count(e.m.ConnectionSuccess) != 0 {
		t.Fatal("a stream nobody answered counted as established at once")
	}
	// The client may arm its confirmation timer after the server sees the
	// stream: step until it fires.
	eventually(t, func() bool { e.clk.Step(DefaultConfirmAfter); return p.InUse() }, "the quiet stream confirmed")
	e.waitLive(p)
	if got := e.count(e.m.ConnectionSuccess); got != 1 {
		t.Fatalf("connection success %v", got)
	}
}

// A stale event replayed after a reconnect (containerd 2.x keeps 5
// minutes of them) about a pod that is gone does not leave a ghost: the
// next relist sweeps it and tells the consumer it went.
func TestEventedStaleReplay(t *testing.T) {
	e := newEnv(t, fakecri.Options{})
	cfg := EventedConfig{Clock: e.clk, Metrics: e.m, Logger: e.log}
	p := NewEvented(e.cri, cfg)
	// Before anyone subscribes: p7 comes and goes, and the events of its
	// going are lost; those of its coming are kept for the next subscriber.
	e.at(1)
	s7 := e.rt.RunPodSandbox("p7", "default", "gone", 0)
	e.rt.DropNext(2)
	must(t, e.rt.RemovePodSandbox(s7)) // STOPPED, DELETED: lost
	e.at(2)
	p.Start()
	t.Cleanup(p.Stop)
	e.waitLive(p)
	e.waitNotified(p, 2) // the stale CREATED and STARTED
	// Whether they were applied before the relist that followed the
	// connection (which swept them) or after (the next one does), the
	// consumer hears p7 come and go, or (when that relist swept p7 between
	// its CREATED and its STARTED, which the tombstone then refused)
	// nothing at all; never that it came without that it went. And the
	// cache forgets it.
	e.at(3)
	p.Generic().Relist()
	got := drain(p.Watch())
	cameAndWent := []string{"ContainerDied(" + s7 + ")", "ContainerRemoved(" + s7 + ")", "ContainerStarted(" + s7 + ")"}
	if len(got) != 0 && !slices.Equal(got, cameAndWent) {
		t.Fatalf("events %v, want none or %v", got, cameAndWent)
	}
	if p.Cache().has("p7") {
		t.Fatal("a ghost pod stayed in the cache")
	}
}
