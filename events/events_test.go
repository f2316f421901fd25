package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	sink  *FakeSink
	b     *Broadcaster
	r     EventRecorderLogger
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	sink := NewFakeSink()
	opts = append([]Option{WithClock(clk), WithHostname("vm"), WithLogger(klog.Background().V(4))}, opts...)
	b := NewBroadcaster(sink, opts...)
	e := &env{t: t, clock: clk, sink: sink, b: b}
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	e.r = b.NewRecorder(scheme.Scheme, "my-ctrl")
	return e
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"}}
}

// waitCalls waits (in real time: the worker is asynchronous) until the
// sink has received n write calls, nudging the fake clock by step each
// time it looks, and returns the writes.
func (e *env) waitCalls(n int, step time.Duration) []SinkCall {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := writes(e.sink.Calls())
		if len(w) >= n {
			return w
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("got %d writes, want %d: %+v", len(w), n, w)
		}
		if step > 0 {
			e.clock.Step(step)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until the worker has nothing left to do, so that the test
// can step the fake clock without racing it.
func (e *env) settle() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !e.b.idle() {
		if time.Now().After(deadline) {
			e.t.Fatal("the worker did not become idle within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// quiet asserts that the sink gets no more writes than it has.
func (e *env) quiet(n int) {
	e.t.Helper()
	time.Sleep(50 * time.Millisecond)
	if w := writes(e.sink.Calls()); len(w) != n {
		e.t.Fatalf("got %d writes, want %d: %+v", len(w), n, w)
	}
}

func writes(calls []SinkCall) []SinkCall {
	var out []SinkCall
	for _, c := range calls {
		if c.Verb != "list" {
			out = append(out, c)
		}
	}
	return out
}

func seriesOf(t *testing.T, c SinkCall) (count int32, state string) {
	t.Helper()
	var p seriesPatch
	if err := json.Unmarshal(c.Body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Metadata != nil {
		state = p.Metadata.Annotations[SeriesStateAnnotation]
	}
	return p.Series.Count, state
}

var nameRE = regexp.MustCompile(`^p1\.[0-9a-f]+$`)

// Scenario 20: one Eventf is one create with the redesign's fields.
func TestSingleEvent(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, corev1.EventTypeNormal, "Started", "Start", "started container %s", "c1")
	w := e.waitCalls(1, 0)
	c := w[0]
	ev := c.Event
	if c.Verb != "create" || c.Namespace != "ns" || !nameRE.MatchString(ev.Name) {
		t.Fatalf("call %+v", c)
	}
	if ev.ReportingController != "my-ctrl" || ev.ReportingInstance != "my-ctrl-vm" || ev.Action != "Start" ||
		ev.Note != "started container c1" || ev.Series != nil || ev.Regarding.Name != "p1" || ev.Regarding.Kind != "Pod" ||
		ev.DeprecatedCount != 0 || ev.DeprecatedSource.Component != "" || !ev.EventTime.Equal(&metav1.MicroTime{Time: t0}) {
		t.Fatalf("event %+v", ev)
	}
	e.quiet(1)
}

// Scenario 21: repeats make one series: create, then a patch starting the
// series, then nothing until the series has been idle for 6 minutes, then
// one final write with the full count.
func TestSeriesOfRepeats(t *testing.T) {
	e := newEnv(t, WithSeriesStateAnnotation(false), WithLiveSeriesCounts(false))
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "back-off %d", 0)
	e.waitCalls(1, 0)
	e.clock.Step(time.Second)
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "back-off %d", 1)
	w := e.waitCalls(2, 0)
	want := fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":"%s"}}`, t0.Add(time.Second).Format("2006-01-02T15:04:05.000000Z07:00"))
	if w[1].Verb != "patch" || string(w[1].Body) != want {
		t.Fatalf("series start: %s %s; want client-go's body %s", w[1].Verb, w[1].Body, want)
	}
	var last time.Time
	for i := 2; i < 100; i++ {
		e.clock.Step(100 * time.Millisecond)
		last = e.clock.Now()
		e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "back-off %d", i)
	}
	e.quiet(2)
	e.clock.Step(5*time.Minute + 59*time.Second)
	e.quiet(2)
	w = e.waitCalls(3, time.Second)
	var p seriesPatch
	_ = json.Unmarshal(w[2].Body, &p)
	if p.Series.Count != 100 || !p.Series.LastObservedTime.Time.Equal(last) {
		t.Fatalf("final write %s; want count 100 at %v", w[2].Body, last)
	}
	if got := e.sink.Events()[0]; got.Series.Count != 100 || got.Note != "back-off 0" {
		t.Fatalf("stored %+v: want count 100 and the first note", got)
	}
	e.b.mu.Lock()
	n := len(e.b.series)
	e.b.mu.Unlock()
	if n != 0 {
		t.Fatalf("a finished series is still tracked (%d)", n)
	}
	// Scenario 23: once finished, the same event starts a new object.
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "back-off again")
	w = e.waitCalls(4, 0)
	if w[3].Verb != "create" || w[3].Name == w[0].Name || w[3].Event.Series != nil {
		t.Fatalf("after the series finished: %+v", w[3])
	}
}

// The state annotation is on by default: ongoing while counting, finished
// with the final write.
func TestSeriesStateAnnotation(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.waitCalls(1, 0)
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	w := e.waitCalls(2, 0)
	if n, st := seriesOf(t, w[1]); n != 2 || st != SeriesOngoing {
		t.Fatalf("series start %s", w[1].Body)
	}
	e.clock.Step(6 * time.Minute)
	w = e.waitCalls(3, time.Second)
	if n, st := seriesOf(t, w[2]); n != 2 || st != SeriesFinished {
		t.Fatalf("final write %s", w[2].Body)
	}
	if got := e.sink.Events()[0].Annotations[SeriesStateAnnotation]; got != SeriesFinished {
		t.Fatalf("stored state %q", got)
	}
}

// Scenario 22: a slow series is written when it starts, every heartbeat
// interval after its last write, and finally 6 minutes after its last
// occurrence.
func TestHeartbeat(t *testing.T) {
	e := newEnv(t, WithSeriesStateAnnotation(false), WithLiveSeriesCounts(false))
	emit := func() { e.r.Eventf(pod("ns", "p1"), nil, "Normal", "Probe", "Check", "probe"); e.settle() }
	emit()
	e.waitCalls(1, 0)
	for i := 1; i <= 31; i++ {
		e.clock.Step(time.Minute)
		e.settle()
		emit()
		if i == 1 {
			e.waitCalls(2, 0)
		}
	}
	// Created at t0, series started at t0+1m; the heartbeat is due at
	// t0+31m and fires when the clock gets there, before that minute's
	// occurrence: 31 occurrences, the last at t0+30m.
	w := e.waitCalls(3, 0)
	var hb seriesPatch
	_ = json.Unmarshal(w[2].Body, &hb)
	if hb.Series.Count != 31 || !hb.Series.LastObservedTime.Time.Equal(t0.Add(30*time.Minute)) {
		t.Fatalf("heartbeat %s; want count 31 at t0+30m", w[2].Body)
	}
	// Then the series is idle: its final write, 6 minutes after the last
	// occurrence, carries all 32.
	e.clock.Step(6 * time.Minute)
	w = e.waitCalls(4, time.Second)
	if n, _ := seriesOf(t, w[3]); n != 32 {
		t.Fatalf("final count %d, want 32", n)
	}
	e.quiet(4)
}

// With the state annotation (the default), finishing writes the state.
func TestHeartbeatThenFinish(t *testing.T) {
	e := newEnv(t, WithHeartbeatInterval(3*time.Minute), WithLiveSeriesCounts(false))
	emit := func() { e.r.Eventf(pod("ns", "p1"), nil, "Normal", "Probe", "Check", "probe"); e.settle() }
	emit()
	e.waitCalls(1, 0)
	e.clock.Step(time.Minute)
	emit()
	e.waitCalls(2, 0) // series start at t0+1m
	for i := 0; i < 4; i++ {
		e.clock.Step(time.Minute)
		e.settle()
		emit()
	}
	w := e.waitCalls(3, 0) // heartbeat at t0+4m, before that minute's occurrence
	if n, st := seriesOf(t, w[2]); n != 4 || st != SeriesOngoing {
		t.Fatalf("heartbeat %s, want count 4, ongoing", w[2].Body)
	}
	e.clock.Step(6 * time.Minute)
	w = e.waitCalls(4, time.Second)
	if n, st := seriesOf(t, w[3]); n != 6 || st != SeriesFinished {
		t.Fatalf("final write %s, want count 6, finished", w[3].Body)
	}
}

// Scenario 24: a singleton is forgotten 6 minutes after it occurred, with
// no API call; a repeat within that time starts its series.
func TestSingletonForgotten(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "Pulled", "Pull", "pulled")
	e.waitCalls(1, 0)
	e.clock.Step(5 * time.Minute)
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "Pulled", "Pull", "pulled")
	w := e.waitCalls(2, 0)
	if w[1].Verb != "patch" || w[1].Name != w[0].Name {
		t.Fatalf("repeat within 6 min: %+v", w[1])
	}
	e.r.Eventf(pod("ns", "p2"), nil, "Normal", "Pulled", "Pull", "pulled")
	w = e.waitCalls(3, 0)
	e.clock.Step(6*time.Minute + time.Second)
	time.Sleep(20 * time.Millisecond)
	e.clock.Step(time.Second)
	time.Sleep(20 * time.Millisecond)
	e.r.Eventf(pod("ns", "p2"), nil, "Normal", "Pulled", "Pull", "pulled")
	w = e.waitCalls(5, 0) // the p1 series' final write and p2's new create
	var creates int
	for _, c := range w[3:] {
		if c.Verb == "create" && c.Namespace == "ns" && strings.HasPrefix(c.Name, "p2.") {
			creates++
			if c.Name == w[2].Name {
				t.Fatal("a forgotten singleton's repeat reused its name")
			}
		}
	}
	if creates != 1 {
		t.Fatalf("after forgetting: %+v", w[3:])
	}
}

// Scenario 25 and the resourceVersion improvement: what is in the key.
func TestIsomorphismKey(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "p1")
	e.r.Eventf(p, nil, "Normal", "R", "A", "n")
	e.r.Eventf(p, nil, "Normal", "R", "B", "n")                // other action
	e.r.Eventf(p, nil, "Warning", "R", "A", "n")               // other type
	e.r.Eventf(p, nil, "Normal", "S", "A", "n")                // other reason
	e.r.Eventf(p, pod("ns", "other"), "Normal", "R", "A", "n") // other related
	e.b.NewRecorder(scheme.Scheme, "ctrl-2").Eventf(p, nil, "Normal", "R", "A", "n")
	w := e.waitCalls(6, 0)
	for _, c := range w {
		if c.Verb != "create" {
			t.Fatalf("want six creates, got %+v", w)
		}
	}
	// The same object at a newer resourceVersion, with another note: the
	// same event (client-go would start a second object).
	p2 := p.DeepCopy()
	p2.ResourceVersion = "8"
	e.r.Eventf(p2, nil, "Normal", "R", "A", "other note")
	w = e.waitCalls(7, 0)
	if w[6].Verb != "patch" || w[6].Name != w[0].Name {
		t.Fatalf("a new resourceVersion broke the series: %+v", w[6])
	}
}

// Scenario 26: a patch that finds the event gone (TTL) creates it again
// under the same name, with the series.
func TestRecreateAfterExpiry(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "n")
	w := e.waitCalls(1, 0)
	e.sink.Delete("ns", w[0].Name)
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "n")
	w = e.waitCalls(3, 0)
	if w[1].Verb != "patch" || !apierrors.IsNotFound(w[1].Err) || w[2].Verb != "create" || w[2].Name != w[0].Name ||
		w[2].Event.Series == nil || w[2].Event.Series.Count != 2 || w[2].Event.ResourceVersion != "" {
		t.Fatalf("after expiry: %+v", w)
	}
}

// Scenario 27 (better): 429 and 5xx are retried with backoff honouring
// Retry-After, a bounded number of times; other refusals are dropped at
// once; every drop is counted.
func TestRetries(t *testing.T) {
	failures := 3
	e := newEnv(t, WithRetryPolicy(RetryPolicy{MaxAttempts: 4, Initial: time.Second, Max: 8 * time.Second, Jitter: -1}))
	e.sink.SetFail(func(c SinkCall) error {
		if c.Verb == "create" && c.Name != "" && strings.HasPrefix(c.Name, "p1.") && failures > 0 {
			failures--
			if failures == 2 {
				return apierrors.NewTooManyRequests("slow down", 5)
			}
			return apierrors.NewInternalError(errors.New("etcd is sad"))
		}
		return nil
	})
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "n")
	w := e.waitCalls(4, time.Second)
	if w[3].Err != nil || len(e.sink.Events()) != 1 {
		t.Fatalf("after 3 failures: %+v", w)
	}
	if n := testutil.ToFloat64(e.b.Metrics().Retries); n != 3 {
		t.Fatalf("retries %v, want 3", n)
	}

	// Exhausted: every attempt fails.
	e.sink.SetFail(func(c SinkCall) error {
		if c.Verb == "create" && strings.HasPrefix(c.Name, "p2.") {
			return errors.New("connection refused")
		}
		return nil
	})
	e.r.Eventf(pod("ns", "p2"), nil, "Normal", "R", "A", "n")
	e.waitCalls(8, 10*time.Second)
	waitMetric(t, func() float64 {
		return testutil.ToFloat64(e.b.Metrics().Dropped.WithLabelValues("retries_exhausted"))
	}, 1)

	// Rejected: one attempt.
	e.sink.SetFail(func(c SinkCall) error {
		if strings.HasPrefix(c.Name, "p3.") {
			return apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, c.Name, nil)
		}
		return nil
	})
	e.r.Eventf(pod("ns", "p3"), nil, "Normal", "R", "A", "n")
	e.waitCalls(9, 0)
	waitMetric(t, func() float64 { return testutil.ToFloat64(e.b.Metrics().Dropped.WithLabelValues("rejected")) }, 1)
	e.quiet(9)
}

func waitMetric(t *testing.T, get func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("metric %v, want %v", get(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Scenario 28 (better): a long note is truncated with a marker, a long
// reporting instance is shortened, instead of the server refusing.
func TestLimits(t *testing.T) {
	e := newEnv(t, WithHostname(strings.Repeat("h", 200)))
	r := e.b.NewRecorder(scheme.Scheme, "ctrl")
	r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", strings.Repeat("é", 3000))
	ev := e.waitCalls(1, 0)[0].Event
	if len(ev.Note) > NoteLimit || !strings.HasSuffix(ev.Note, truncationMarker) || !strings.HasPrefix(ev.Note, "éé") {
		t.Fatalf("note of %d bytes: ...%q", len(ev.Note), ev.Note[len(ev.Note)-20:])
	}
	if len(ev.ReportingInstance) != ReportingInstanceLimit || !strings.HasPrefix(ev.ReportingInstance, "ctrl-hhh") {
		t.Fatalf("reporting instance %q (%d)", ev.ReportingInstance, len(ev.ReportingInstance))
	}
}

// Scenario 29: a cluster-scoped object's events go to default.
func TestClusterScoped(t *testing.T) {
	e := newEnv(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "n1"}}
	e.r.Eventf(node, nil, "Normal", "NodeReady", "Check", "ready")
	c := e.waitCalls(1, 0)[0]
	if c.Namespace != "default" || c.Event.Regarding.Namespace != "" || c.Event.Regarding.Kind != "Node" {
		t.Fatalf("%+v", c)
	}
}

func TestInvalidType(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, "Error", "R", "A", "n")
	e.quiet(0)
	if n := testutil.ToFloat64(e.b.Metrics().Dropped.WithLabelValues("invalid")); n != 1 {
		t.Fatalf("invalid drops %v", n)
	}
}

// The crashloop workload of the issue: 600 occurrences in 60 s, then
// Shutdown: a handful of writes, and the stored count is exactly 600
// (with the redesign's strict schedule; TestLiveSeriesCounts has the
// default).
func TestCrashloopShutdownFlush(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	sink := NewFakeSink()
	b := NewBroadcaster(sink, WithClock(clk), WithHostname("vm"), WithLiveSeriesCounts(false))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(scheme.Scheme, "kubelet")
	for i := 0; i < 600; i++ {
		r.Eventf(pod("ns", "crash"), nil, "Warning", "BackOff", "Restart", "Back-off restarting failed container")
		clk.Step(100 * time.Millisecond)
	}
	b.Shutdown()
	evs := sink.Events()
	w := writes(sink.Calls())
	if len(evs) != 1 || evs[0].Series == nil || evs[0].Series.Count != 600 {
		t.Fatalf("stored %+v", evs)
	}
	if len(w) > 4 {
		t.Fatalf("%d writes, want at most 4", len(w))
	}
	t.Logf("crashloop: %d writes, stored count %d", len(w), evs[0].Series.Count)
	// After Shutdown: dropped and counted, no call, no panic.
	r.Eventf(pod("ns", "crash"), nil, "Warning", "BackOff", "Restart", "x")
	if n := testutil.ToFloat64(b.Metrics().Dropped.WithLabelValues("shutdown")); n != 1 {
		t.Fatalf("shutdown drops %v", n)
	}
}

// The five-reasons workload of the issue: every reason its own series,
// with exact counts.
func TestFiveReasons(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	sink := NewFakeSink()
	b := NewBroadcaster(sink, WithClock(clk), WithHostname("vm"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(scheme.Scheme, "kubelet")
	want := map[string]int32{}
	for s := 0; s < 180; s += 10 {
		reasons := []string{"Pulling", "Pulled", "Created", "Started", "Unhealthy"}
		if s >= 60 {
			reasons = append(reasons, "BackOff")
		}
		for _, reason := range reasons {
			r.Eventf(pod("ns", "p"), nil, "Normal", reason, "Act", reason+" happened")
			want[reason]++
		}
		clk.Step(10 * time.Second)
		time.Sleep(time.Millisecond)
	}
	b.Shutdown()
	got := map[string]int32{}
	for _, ev := range sink.Events() {
		n := int32(1)
		if ev.Series != nil {
			n = ev.Series.Count
		}
		got[ev.Reason] += n
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 6 {
		t.Fatalf("stored counts %v, want %v", got, want)
	}
}

// Restart: a new broadcaster lists the controller's events and continues
// their series rather than starting duplicates.
func TestResume(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	sink := NewFakeSink()
	sink.Put(&eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1.old", Annotations: map[string]string{SeriesStateAnnotation: SeriesOngoing}},
		EventTime:  metav1.NewMicroTime(t0.Add(-10 * time.Minute)), ReportingController: "my-ctrl", ReportingInstance: "my-ctrl-vm",
		Action: "Restart", Reason: "BackOff", Type: "Warning", Note: "n",
		Regarding: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "p1", UID: "uid-p1", ResourceVersion: "3"},
		Series:    &eventsv1.EventSeries{Count: 40, LastObservedTime: metav1.NewMicroTime(t0.Add(-time.Minute))},
	})
	sink.Put(&eventsv1.Event{ // finished: not resumed
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p2.old", Annotations: map[string]string{SeriesStateAnnotation: SeriesFinished}},
		EventTime:  metav1.NewMicroTime(t0.Add(-10 * time.Minute)), ReportingController: "my-ctrl", ReportingInstance: "my-ctrl-vm",
		Action: "Restart", Reason: "BackOff", Type: "Warning", Note: "n",
		Regarding: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "p2", UID: "uid-p2"},
		Series:    &eventsv1.EventSeries{Count: 9, LastObservedTime: metav1.NewMicroTime(t0.Add(-time.Minute))},
	})
	b := NewBroadcaster(sink, WithClock(clk), WithHostname("vm"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	r := b.NewRecorder(scheme.Scheme, "my-ctrl")
	r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "again")
	r.Eventf(pod("ns", "p2"), nil, "Warning", "BackOff", "Restart", "again")
	b.Shutdown()
	calls := sink.Calls()
	if len(calls) == 0 || calls[0].Verb != "list" || !strings.Contains(string(calls[0].Body), "reportingInstance=my-ctrl-vm") {
		t.Fatalf("first call %+v", calls)
	}
	byName := map[string]*eventsv1.Event{}
	for _, ev := range sink.Events() {
		byName[ev.Name] = ev
	}
	if ev := byName["p1.old"]; ev.Series.Count != 41 {
		t.Fatalf("resumed series count %d, want 41", ev.Series.Count)
	}
	if len(byName) != 3 || byName["p2.old"].Series.Count != 9 {
		t.Fatalf("the finished series must not be continued: %v", byName)
	}
}

// Resume works against a server that refuses the reportingInstance field
// selector (kube-apiserver): it falls back to the controller alone.
func TestResumeFallback(t *testing.T) {
	sink := NewFakeSink()
	sink.SetFail(func(c SinkCall) error {
		if c.Verb == "list" && strings.Contains(string(c.Body), "reportingInstance") {
			return apierrors.NewBadRequest("field label not supported: reportingInstance")
		}
		return nil
	})
	clk := clocktesting.NewFakeClock(t0)
	sink.Put(&eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1.old"},
		EventTime:  metav1.NewMicroTime(t0.Add(-time.Minute)), ReportingController: "my-ctrl", ReportingInstance: "my-ctrl-vm",
		Action: "A", Reason: "R", Type: "Normal", Note: "n",
		Regarding: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "p1", UID: "uid-p1"},
	})
	b := NewBroadcaster(sink, WithClock(clk), WithHostname("vm"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(scheme.Scheme, "my-ctrl")
	r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "again")
	b.Shutdown()
	evs := sink.Events()
	if len(evs) != 1 || evs[0].Series == nil || evs[0].Series.Count != 2 {
		t.Fatalf("the resumed singleton should have become a series of 2: %+v", evs)
	}
}

// Writes for one key never overlap or reorder: no patch before its create,
// even when repeats arrive while the create is in flight.
func TestNoPatchBeforeCreate(t *testing.T) {
	e := newEnv(t, WithResume(false))
	entered, release := make(chan struct{}), make(chan struct{})
	e.sink.SetFail(func(c SinkCall) error {
		if c.Verb == "create" {
			close(entered)
			<-release // a slow create
		}
		return nil
	})
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "n")
	<-entered
	for i := 0; i < 50; i++ {
		e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "n")
	}
	close(release)
	e.waitCalls(2, 0)
	e.settle()
	// The create went with the state of its snapshot; the 50 occurrences
	// that came while it was in flight follow in one patch, after it.
	w := writes(e.sink.Calls())
	if len(w) != 2 || w[0].Verb != "create" || w[0].Event.Series != nil || w[1].Verb != "patch" {
		t.Fatalf("writes %+v", w)
	}
	if n, _ := seriesOf(t, w[1]); n != 51 {
		t.Fatalf("patch count %d, want 51", n)
	}
	for _, c := range w {
		if c.Err != nil {
			t.Fatalf("a write failed: %+v", c)
		}
	}
}

// Bounded memory: new events beyond the bound are dropped and counted,
// while known ones still count.
func TestBounds(t *testing.T) {
	e := newEnv(t, WithMaxSeries(3))
	block := make(chan struct{})
	e.sink.SetFail(func(c SinkCall) error { <-block; return nil })
	for i := 0; i < 5; i++ {
		e.r.Eventf(pod("ns", fmt.Sprintf("p%d", i)), nil, "Normal", "R", "A", "n")
	}
	e.r.Eventf(pod("ns", "p0"), nil, "Normal", "R", "A", "n")
	close(block)
	if n := testutil.ToFloat64(e.b.Metrics().Dropped.WithLabelValues("queue_full")); n != 2 {
		t.Fatalf("queue_full drops %v, want 2", n)
	}
	if n := testutil.ToFloat64(e.b.Metrics().Deduplicated); n != 1 {
		t.Fatalf("deduplicated %v, want 1", n)
	}
}

func TestWatchersSeeEveryOccurrence(t *testing.T) {
	e := newEnv(t)
	got := make(chan string, 10)
	stop, err := e.b.StartEventWatcher(func(obj runtime.Object) { got <- obj.(*eventsv1.Event).Note })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "one")
	e.r.Eventf(pod("ns", "p1"), nil, "Normal", "R", "A", "two")
	for _, want := range []string{"one", "two"} {
		select {
		case n := <-got:
			if n != want {
				t.Fatalf("watcher got %q, want %q", n, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watcher got nothing")
		}
	}
}
