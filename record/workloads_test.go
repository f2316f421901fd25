package record

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	clientgorecord "k8s.io/client-go/tools/record"

	"github.com/kubevents/kubevents/internal/recordermetrics"
)

// The five-reasons workload: five reasons on one pod every 10 s for
// 3 minutes, and a sixth from t=60 s. Every reason's event is stored with
// its exact count; client-go, with its reason-less spam key, stores 25 of
// the 90 first-five emissions and never the sixth.
func TestWorkloadFiveReasons(t *testing.T) {
	reasons := []string{"Pulling", "Pulled", "Created", "Started", "Probe"}
	const sixth = "Unhealthy"
	emitAll := func(tick int, emit func(reason string)) int {
		n := 0
		for _, r := range reasons {
			emit(r)
			n++
		}
		if tick*10 >= 60 {
			emit(sixth)
			n++
		}
		return n
	}
	p := pod("ns", "web-1", "u")

	t.Run("ours", func(t *testing.T) {
		e := newEnv(t)
		for tick := 0; tick < 18; tick++ { // t = 0, 10, ..., 170 s
			emitAll(tick, func(r string) { e.rec.Eventf(p, corev1.EventTypeNormal, r, "%s web", r) })
			e.step(10 * time.Second)
		}
		for _, r := range append(reasons, sixth) {
			got := e.sink.storedBy(r)
			want := int32(18)
			if r == sixth {
				want = 12
			}
			if len(got) != 1 || got[0].Count != want {
				t.Errorf("%s: %d objects, counts %v; want one with count %d", r, len(got), counts(got), want)
			}
		}
		if d := counterValue(t, e.b.metrics.Dropped); d != 0 {
			t.Errorf("%v dropped", d)
		}
	})

	t.Run("client-go", func(t *testing.T) {
		clk := newEnv(t).clk // a fake clock for client-go's correlator
		sink := newFakeSink(clk)
		var processed atomic.Int64
		b := clientgorecord.NewBroadcaster(clientgorecord.WithCorrelatorOptions(clientgorecord.CorrelatorOptions{
			Clock: clk,
			// client-go's default spam key, counting how many events
			// the correlator has processed.
			SpamKeyFunc: func(e *corev1.Event) string { processed.Add(1); return SpamKeyByObject(e) },
		}))
		defer b.Shutdown()
		b.StartRecordingToSink(sink)
		rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node1"})
		total := 0
		for tick := 0; tick < 18; tick++ {
			total += emitAll(tick, func(r string) { rec.Eventf(p, corev1.EventTypeNormal, r, "%s web", r) })
			waitFor(t, "client-go to process the tick", func() bool { return processed.Load() == int64(total) })
			clk.Step(10 * time.Second)
		}
		waitFor(t, "client-go's writes", func() bool { return sum(sink.stored()) == 25 })
		if got := sink.storedBy(sixth); len(got) != 0 {
			t.Errorf("client-go stored the sixth reason: %v", counts(got))
		}
		t.Logf("client-go stored %d of 90 first-five emissions, %d of 12 of the sixth", sum(sink.stored()), sum(sink.storedBy(sixth)))
	})
}

// The crashloop workload: Warning BackOff 10 times a second for 60 s, then
// Shutdown. The stored count is exactly 600: the occurrences the spam
// filter held back after the burst are flushed at Shutdown.
func TestWorkloadCrashloop(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "web-1", "u")
	for i := 0; i < 600; i++ {
		e.rec.Event(p, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container web")
		e.clk.Step(100 * time.Millisecond)
		if i%50 == 49 {
			e.sync()
		}
	}
	e.sync()
	stored := e.sink.stored()
	if len(stored) != 1 || stored[0].Count != 25 {
		t.Fatalf("before Shutdown: %v", counts(stored))
	}
	e.b.Shutdown()
	stored = e.sink.stored()
	if len(stored) != 1 || stored[0].Count != 600 {
		t.Fatalf("after Shutdown: counts %v, want [600]", counts(stored))
	}
	if !stored[0].LastTimestamp.Time.Equal(t0.Add(59 * time.Second)) { // the 600th emission's, in seconds
		t.Errorf("lastTimestamp %v, want the 600th emission's", stored[0].LastTimestamp)
	}
	writes := e.sink.numCalls()
	t.Logf("600 emissions stored as count %d with %d writes (1 create, %d patches); client-go stores 25 with 25 writes",
		stored[0].Count, writes, writes-1)
	if writes != 26 {
		t.Errorf("%d writes, want 26 (25 in the burst, 1 flush)", writes)
	}
	if d := counterValue(t, e.b.metrics.Deduplicated); d != 599 {
		t.Errorf("deduplicated %v, want 599", d)
	}
}

// A custom spam key without the reason can hold back a new reason's first
// occurrence; it is created by the deferred flush, not lost.
func TestHeldBackFirstOccurrenceIsCreatedLater(t *testing.T) {
	e := newEnv(t, WithCorrelatorOptions(CorrelatorOptions{BurstSize: 1, SpamKeyFunc: SpamKeyByObject}))
	p := pod("ns", "p1", "u")
	e.rec.Event(p, corev1.EventTypeNormal, "First", "m")
	e.rec.Event(p, corev1.EventTypeNormal, "Second", "m")
	e.sync()
	if n := e.sink.numCalls(); n != 1 {
		t.Fatalf("%d calls", n)
	}
	for i := 0; i < 1000 && len(e.sink.storedBy("Second")) == 0; i++ {
		e.step(time.Second)
	}
	got := e.sink.storedBy("Second")
	if len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("Second: %v", counts(got))
	}
	if at := e.clk.Now().Sub(t0); at < 300*time.Second || at > 700*time.Second {
		t.Errorf("flushed at +%v", at)
	}
}

// Held-back occurrences whose event leaves the deduplication cache before
// the flush are counted as dropped (rate_limited) and logged.
func TestHeldBackLostToEvictionIsCounted(t *testing.T) {
	e := newEnv(t, WithCorrelatorOptions(CorrelatorOptions{BurstSize: 1, LRUCacheSize: 1}))
	p := pod("ns", "p1", "u")
	e.rec.Event(p, corev1.EventTypeNormal, "A", "m")
	e.rec.Event(p, corev1.EventTypeNormal, "A", "m") // held back
	e.rec.Event(p, corev1.EventTypeNormal, "B", "m") // evicts A
	e.sync()
	if d := e.dropped(recordermetrics.DropRateLimited); d != 1 {
		t.Errorf("rate_limited %v, want 1", d)
	}
	if len(e.logs.find("Held-back occurrences lost")) != 1 {
		t.Errorf("logs %v", e.logs.all())
	}
	// The evicted entry's deferred flush is gone with it.
	e.step(time.Hour)
	if got := verbs(e.sink.getCalls()); len(got) != 2 {
		t.Errorf("calls %v, want the two creates only", got)
	}
}

// A blocked sink: the queue bounds what is held (1 in flight + queue
// size); the rest is dropped, counted and logged, rate-limited, with the
// number of drops. client-go drops the same number silently.
func TestBoundedQueueWithBlockedSink(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	e.sink.gate = gate
	e.rec.Event(pod("ns", "p-first", "u"), corev1.EventTypeNormal, "Started", "m")
	q := e.b.watchers[0].queue
	waitFor(t, "the worker to take the first event (and block in the sink)", func() bool { return len(q) == 0 })
	for i := 0; i < 2999; i++ {
		e.rec.Event(pod("ns", fmt.Sprintf("p-%d", i), "u"), corev1.EventTypeNormal, "Started", "m")
	}
	if d := e.dropped(recordermetrics.DropQueueFull); d != 1999 {
		t.Errorf("queue_full %v, want 1999", d)
	}
	l := e.logs.find("too many queued events")
	if len(l) != 1 {
		t.Errorf("%d log lines for the drops, want 1 (rate-limited): %v", len(l), l)
	}
	e.clk.Step(dropLogInterval)
	e.rec.Event(pod("ns", "p-last", "u"), corev1.EventTypeNormal, "Started", "m")
	if l := e.logs.find("too many queued events"); len(l) != 2 || !hasKV(l[1].kv, "suppressedSinceLastLog", 1998) {
		t.Errorf("second line %v", l)
	}
	close(gate)
	waitFor(t, "the queue to drain", func() bool { return e.sink.numCalls() == 1001 })
	e.sync()
	if n := e.sink.numCalls(); n != 1001 {
		t.Errorf("%d calls, want 1001", n)
	}
}

// The shutdown deadline: a sink that hangs does not hang Shutdown past
// WithShutdownTimeout on the broadcaster's clock; what was not written is
// counted as dropped (shutdown), and the worker returns once the sink call
// does.
func TestShutdownDeadline(t *testing.T) {
	e := newEnv(t, WithShutdownTimeout(5*time.Second))
	gate := make(chan struct{})
	e.sink.gate = gate
	for i := 0; i < 3; i++ {
		e.rec.Event(pod("ns", fmt.Sprintf("p%d", i), "u"), corev1.EventTypeNormal, "Started", "m")
	}
	done := make(chan struct{})
	go func() { e.b.Shutdown(); close(done) }()
	e.waitTimers(1) // the deadline
	select {
	case <-done:
		t.Fatal("Shutdown returned with the sink hung")
	case <-time.After(20 * time.Millisecond):
	}
	e.clk.Step(5 * time.Second)
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Shutdown did not return at the deadline")
	}
	close(gate) // the hung call returns; the worker drops the rest
	waitFor(t, "the worker to finish", func() bool {
		e.b.mu.Lock()
		defer e.b.mu.Unlock()
		return e.b.running == 0
	})
	if d := e.dropped(recordermetrics.DropShutdown); d != 2 {
		t.Errorf("shutdown drops %v, want 2 (the queued events after the hung one)", d)
	}
}

// Stopping one sink's watcher leaves the others running; the stopped one
// finishes what it holds.
func TestWatcherStop(t *testing.T) {
	e := newEnv(t)
	second := newFakeSink(e.clk)
	w := e.b.StartRecordingToSink(second)
	e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
	w.Stop()
	w.Stop() // idempotent
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("ResultChan carried a value")
		}
	case <-time.After(waitLimit):
		t.Fatal("ResultChan not closed after Stop")
	}
	e.rec.Event(pod("ns", "p2", "u"), corev1.EventTypeNormal, "Started", "m")
	e.sync()
	if a, b := e.sink.numCalls(), second.numCalls(); a != 2 || b != 1 {
		t.Errorf("calls: first sink %d (want 2), stopped sink %d (want 1)", a, b)
	}
	// Start after Shutdown returns a stopped watch.
	e.b.Shutdown()
	if _, ok := <-e.b.StartRecordingToSink(second).ResultChan(); ok {
		t.Error("watch after Shutdown is open")
	}
}

// WithMetrics registers on the caller's registry only; two broadcasters on
// one registry share the series.
func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	e1 := newEnv(t, WithMetrics(reg))
	e2 := newEnv(t, WithMetrics(reg))
	e1.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
	e2.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
	e1.sync()
	e2.sync()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			got[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if got["kubevents_recorder_emitted_total"] != 2 || got["kubevents_recorder_writes_total"] != 2 || got["kubevents_recorder_active_series"] != 2 {
		t.Errorf("gathered %v", got)
	}
	e1.b.Shutdown()
	e2.b.Shutdown()
	if v := counterValue(t, e1.b.metrics.ActiveSeries); v != 0 {
		t.Errorf("active series after Shutdown %v", v)
	}
}

// countPatch must produce the bytes client-go's strategic-merge diff
// produces, for any message.
func TestCountPatchMatchesStrategicPatch(t *testing.T) {
	msgs := []string{"m", "", "100% done", `quote " backslash \ slash /`, "<b>&amp;</b>", "tab\tnewline\n\x01ctl",
		"ünïcödé ✓ 日本", "bad utf8 \xff\xfe", "line sep \u2028 \u2029", strings.Repeat("x", 5000), "\x7f del"}
	times := []time.Time{t0, t0.Add(1500 * time.Millisecond), time.Unix(0, 0), time.Unix(0, 500), time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)}
	for _, msg := range msgs {
		for _, ts := range times {
			for _, n := range []int32{2, 77, 1 << 30} {
				ev := testEvent("r", msg, podRef("p", "ns"))
				ev.Count, ev.LastTimestamp, ev.FirstTimestamp = n, metav1.NewTime(ts), metav1.NewTime(t0)
				old := ev
				old.Count, old.LastTimestamp, old.Message = 0, metav1.NewTime(time.Unix(0, 0)), ""
				newJSON, _ := json.Marshal(&ev)
				oldJSON, _ := json.Marshal(&old)
				want, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, &ev)
				if err != nil {
					t.Fatal(err)
				}
				if got := countPatch(&ev); string(got) != string(want) {
					t.Errorf("message %q time %v count %d:\n got %s\nwant %s", msg, ts, n, got, want)
				}
			}
		}
	}
}

func counts(evs []corev1.Event) []int32 {
	var out []int32
	for _, e := range evs {
		out = append(out, e.Count)
	}
	return out
}

func sum(evs []corev1.Event) int {
	n := 0
	for _, e := range evs {
		n += int(e.Count)
	}
	return n
}

func hasKV(kv []any, key string, val int) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == key && fmt.Sprint(kv[i+1]) == fmt.Sprint(val) {
			return true
		}
	}
	return false
}

// Events emitted in the same clock tick about objects of the same name get
// distinct names (client-go gives them the same name, and the server
// refuses all but the first: issue #134993); their timestamps are the
// tick's.
func TestSameInstantNamesAreDistinct(t *testing.T) {
	e := newEnv(t)
	for _, r := range []string{"A", "B", "C"} {
		e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, r, "m")
	}
	e.sync()
	calls := e.sink.getCalls()
	if len(calls) != 3 || len(e.sink.stored()) != 3 {
		t.Fatalf("calls %v, stored %d", verbs(calls), len(e.sink.stored()))
	}
	for i, c := range calls {
		if want := hexName("p1", t0.Add(time.Duration(i))); c.event.Name != want || !c.event.FirstTimestamp.Time.Equal(t0) {
			t.Errorf("event %d: %s at %v, want %s at %v", i, c.event.Name, c.event.FirstTimestamp, want, t0)
		}
	}
}

// One reason exhausting its spam bucket does not keep a new reason about
// the same object from being written at once (client-go's default key
// holds it back, and drops it).
func TestNewReasonNotStarved(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "p1", "u")
	for i := 0; i < 40; i++ {
		e.rec.Event(p, corev1.EventTypeWarning, "BackOff", "back-off")
	}
	e.sync()
	e.rec.Event(p, corev1.EventTypeWarning, "Failed", "failed")
	e.sync()
	got := e.sink.storedBy("Failed")
	if len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("the new reason: %v", counts(got))
	}
	if c := e.sink.getCalls(); c[len(c)-1].event.Reason != "Failed" || c[len(c)-1].verb != "create" {
		t.Errorf("last call %s %s", c[len(c)-1].verb, c[len(c)-1].event.Reason)
	}
}
