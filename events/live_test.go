package events

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
)

// storedCount is the series count the sink stores for its only event.
func (e *env) storedCount() int32 {
	e.t.Helper()
	evs := e.sink.Events()
	if len(evs) != 1 {
		e.t.Fatalf("stored %d events, want 1", len(evs))
	}
	if evs[0].Series == nil {
		return 1
	}
	return evs[0].Series.Count
}

// patchCounts returns the series counts of the patches among w.
func patchCounts(t *testing.T, w []SinkCall) []int32 {
	t.Helper()
	var out []int32
	for _, c := range w {
		if c.Verb == "patch" {
			n, _ := seriesOf(t, c)
			out = append(out, n)
		}
	}
	return out
}

// The crashloop of issue 9 (600 occurrences, one every 100 ms) with live
// counts (the default): written at the series start, then at 10 s, 20 s
// and 40 s of age, so that at 60 s the stored count is within half of the
// truth; Shutdown writes the exact count. Six writes.
func TestLiveSeriesCounts(t *testing.T) {
	e := newEnv(t)
	emit := func() { e.r.Eventf(pod("ns", "crash"), nil, "Warning", "BackOff", "Restart", "back-off") }
	emit()
	e.waitCalls(1, 0)
	e.settle()
	for i := 1; i < 600; i++ {
		e.clock.Step(100 * time.Millisecond)
		e.settle() // what is due at this instant is written before this occurrence
		emit()
		if i == 1 {
			e.waitCalls(2, 0)
			e.settle()
		}
	}
	e.clock.Step(100 * time.Millisecond) // t = 60 s
	e.settle()
	w := writes(e.sink.Calls())
	if got, want := patchCounts(t, w), []int32{2, 100, 200, 400}; !equalCounts(got, want) {
		t.Fatalf("patches carried %v, want %v", got, want)
	}
	if n := e.storedCount(); n < 300 {
		t.Fatalf("stored count at 60 s %d, want within 50%% of 600", n)
	}
	e.b.Shutdown()
	w = writes(e.sink.Calls())
	if n := e.storedCount(); n != 600 || len(w) > 8 {
		t.Fatalf("after Shutdown: stored %d in %d writes, want 600 in at most 8", n, len(w))
	}
	t.Logf("crashloop, live counts: %d writes, patches %v", len(w), patchCounts(t, w))
}

func equalCounts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Live counting writes only a changed count: a series of two that then
// goes quiet gets no live writes, only its final one.
func TestLiveSeriesCountsOnlyWhenChanged(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.waitCalls(1, 0)
	e.settle()
	e.clock.Step(time.Second)
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.waitCalls(2, 0)
	for i := 0; i < 6*60; i++ {
		e.clock.Step(time.Second)
		e.settle()
	}
	w := e.waitCalls(3, time.Second) // the final write, 6 min after the last occurrence
	if n, st := seriesOf(t, w[2]); n != 2 || st != SeriesFinished {
		t.Fatalf("final write %s", w[2].Body)
	}
	e.quiet(3)
}

// The live schedule's spacing doubles until it reaches the heartbeat
// interval, then stays there: with a 1-minute heartbeat and an occurrence
// every second, writes at 10, 20, 40, 80, 140, 200 s of age.
func TestLiveSeriesCountsUpToHeartbeat(t *testing.T) {
	e := newEnv(t, WithHeartbeatInterval(time.Minute))
	emit := func() { e.r.Eventf(pod("ns", "p1"), nil, "Normal", "Probe", "Check", "probe") }
	emit()
	e.waitCalls(1, 0)
	e.settle()
	for i := 1; i <= 200; i++ {
		e.clock.Step(time.Second)
		e.settle()
		emit()
		if i == 1 {
			e.waitCalls(2, 0)
			e.settle()
		}
	}
	// The count at age a is a (occurrences at 0..a-1 s).
	if got, want := patchCounts(t, writes(e.sink.Calls())), []int32{2, 10, 20, 40, 80, 140, 200}; !equalCounts(got, want) {
		t.Fatalf("patches carried %v, want %v", got, want)
	}
}

// Off, the redesign's strict schedule: nothing between the series start
// and the heartbeat.
func TestLiveSeriesCountsOff(t *testing.T) {
	e := newEnv(t, WithLiveSeriesCounts(false))
	emit := func() { e.r.Eventf(pod("ns", "p1"), nil, "Normal", "Probe", "Check", "probe") }
	emit()
	e.waitCalls(1, 0)
	e.settle()
	for i := 1; i <= 120; i++ {
		e.clock.Step(time.Second)
		e.settle()
		emit()
		if i == 1 {
			e.waitCalls(2, 0)
			e.settle()
		}
	}
	e.quiet(2)
}

// A resumed series is counted live too: its count is written once its age
// has doubled since the resume, not only when it finishes.
func TestLiveSeriesCountsResumed(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	sink := NewFakeSink()
	sink.Put(storedSeries("p1", SeriesOngoing, 10, t0.Add(-20*time.Second), t0.Add(-time.Second)))
	b := NewBroadcaster(sink, WithClock(clk), WithHostname("vm"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	e := &env{t: t, clock: clk, sink: sink, b: b, r: b.NewRecorder(scheme.Scheme, "my-ctrl")}
	waitFor := func() {
		deadline := time.Now().Add(10 * time.Second)
		for len(sink.Calls()) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no resume list")
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor()
	e.settle()
	for i := 0; i < 5; i++ {
		e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "again")
	}
	e.clock.Step(19 * time.Second)
	e.settle()
	e.quiet(0)
	e.clock.Step(time.Second) // 40 s of age: twice its age at the resume
	w := e.waitCalls(1, 0)
	if n, st := seriesOf(t, w[0]); w[0].Name != "p1.old" || n != 15 || st != SeriesOngoing {
		t.Fatalf("live write of the resumed series %+v %s", w[0], w[0].Body)
	}
}
