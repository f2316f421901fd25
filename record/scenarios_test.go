package record

// One test per acceptance scenario of the legacy recorder
// (/work/shared/reference/recorder.md §5, scenarios 1-19), on a fake clock.
// U: client-go's behaviour, matched exactly. B: client-go's weakness, and
// the better behaviour this package implements.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubevents/kubevents/internal/recordermetrics"
)

// hexName is client-go's event name for ref name at t.
func hexName(ref string, t time.Time) string { return ref + "." + strconv.FormatInt(t.UnixNano(), 16) }

// Scenario 1 (U): one event → one POST with client-go's fields.
func TestScenario01SingleEvent(t *testing.T) {
	e := newEnv(t)
	e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
	e.sync()
	calls := e.sink.getCalls()
	if got := verbs(calls); !slices.Equal(got, []string{"create"}) {
		t.Fatalf("calls %v, want one create", got)
	}
	ev := calls[0].event
	if ev.Namespace != "ns" || ev.Name != hexName("p1", t0) {
		t.Errorf("event %s/%s, want ns/%s", ev.Namespace, ev.Name, hexName("p1", t0))
	}
	if ev.Count != 1 || !ev.FirstTimestamp.Equal(&ev.LastTimestamp) || !ev.FirstTimestamp.Time.Equal(t0) {
		t.Errorf("count %d first %v last %v", ev.Count, ev.FirstTimestamp, ev.LastTimestamp)
	}
	if ev.Source != (corev1.EventSource{Component: "kubelet", Host: "node1"}) {
		t.Errorf("source %+v", ev.Source)
	}
	want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "p1", UID: "u"}
	if ev.InvolvedObject != want {
		t.Errorf("involvedObject %+v, want %+v", ev.InvolvedObject, want)
	}
	var body map[string]any
	if err := json.Unmarshal(calls[0].body, &body); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{
		"reportingComponent": "kubelet", "reportingInstance": "node1", "eventTime": nil,
		"firstTimestamp": stamp(t0), "lastTimestamp": stamp(t0), "count": 1.0, "type": "Normal", "reason": "Started", "message": "m",
	} {
		if got, ok := body[k]; !ok || got != v {
			t.Errorf("body %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for _, k := range []string{"series", "action", "related"} {
		if _, ok := body[k]; ok {
			t.Errorf("body has %s", k)
		}
	}
	if got := counterValue(t, e.b.metrics.Emitted); got != 1 {
		t.Errorf("emitted %v", got)
	}
	if got := e.writes("create", "success"); got != 1 {
		t.Errorf("create writes %v", got)
	}
}

// Scenarios 2 and 3 (U, with the B flush at the end): 30 repeats within a
// second → POST + 24 PATCHes with exact bodies, 5 held back silently; +299 s
// nothing; +301 s PATCH count 32; again at once nothing. B: the held-back
// count 33 is flushed later without a new occurrence.
func TestScenario02And03RepeatsAndSpamFilter(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "p1", "u")
	for i := 0; i < 30; i++ {
		e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
		e.step(30 * time.Millisecond)
	}
	calls := e.sink.getCalls()
	if len(calls) != 25 {
		t.Fatalf("%d calls (%v), want 25", len(calls), verbs(calls))
	}
	if calls[0].verb != "create" {
		t.Fatalf("first call %s", calls[0].verb)
	}
	name := calls[0].event.Name
	for k := 2; k <= 25; k++ {
		c := calls[k-1]
		if c.verb != "patch" || c.event.Name != name {
			t.Fatalf("call %d: %s %s", k, c.verb, c.event.Name)
		}
		if want := countBody(k, t0, "m"); string(c.body) != want {
			t.Errorf("patch %d body %s, want %s", k, c.body, want)
		}
	}
	if l := e.logs.all(); len(l) != 0 {
		t.Errorf("held-back occurrences logged: %v", l)
	}
	if got := counterValue(t, e.b.metrics.Deduplicated); got != 29 {
		t.Errorf("deduplicated %v, want 29 (24 patches + 5 held back)", got)
	}

	// Scenario 3.
	e.clk.SetTime(t0.Add(299 * time.Second))
	e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	e.sync()
	if n := e.sink.numCalls(); n != 25 {
		t.Fatalf("+299 s: %d calls, want none new", n)
	}
	e.clk.SetTime(t0.Add(301 * time.Second))
	e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	e.sync()
	calls = e.sink.getCalls()
	if len(calls) != 26 {
		t.Fatalf("+301 s: %d calls, want 26", len(calls))
	}
	if want := countBody(32, t0.Add(301*time.Second), "m"); string(calls[25].body) != want {
		t.Errorf("+301 s patch %s, want %s", calls[25].body, want)
	}
	e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	e.sync()
	if n := e.sink.numCalls(); n != 26 {
		t.Fatalf("immediate repeat: %d calls, want none new", n)
	}

	// B: no further occurrence; the held-back 33rd is flushed once the
	// bucket has refilled (about 600 s after +301 s), and only then.
	for i := 0; i < 1200 && e.sink.numCalls() == 26; i++ {
		e.step(time.Second)
	}
	calls = e.sink.getCalls()
	if len(calls) != 27 {
		t.Fatalf("no flush of the held-back occurrence: %v", verbs(calls))
	}
	if want := countBody(33, t0.Add(301*time.Second), "m"); string(calls[26].body) != want {
		t.Errorf("flush patch %s, want %s", calls[26].body, want)
	}
	if at := calls[26].at.Sub(t0); at < 600*time.Second || at > 1000*time.Second {
		t.Errorf("flush at +%v, want between +600 s and +1000 s", at)
	}
	e.step(time.Hour)
	if n := e.sink.numCalls(); n != 27 {
		t.Errorf("%d calls after the flush, want 27", n)
	}
	if got := e.sink.stored()[0].Count; got != 33 {
		t.Errorf("stored count %d, want 33 (every emission)", got)
	}
}

// Scenario 4 (U): 10 distinct messages → 9 POSTs, then a combined event;
// an 11th → PATCH of the combined event.
func TestScenario04Aggregation(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "p1", "u")
	for i := 1; i <= 10; i++ {
		e.rec.AnnotatedEventf(p, map[string]string{"a": "b"}, corev1.EventTypeWarning, "Failed", "msg-%d", i)
		e.step(time.Second)
	}
	calls := e.sink.getCalls()
	if got := verbs(calls); !slices.Equal(got, slices.Repeat([]string{"create"}, 10)) {
		t.Fatalf("calls %v, want 10 creates", got)
	}
	agg := calls[9].event
	if agg.Message != "(combined from similar events): msg-10" || agg.Count != 1 {
		t.Errorf("10th: message %q count %d", agg.Message, agg.Count)
	}
	if agg.ReportingController != "" || agg.ReportingInstance != "" || agg.Annotations != nil {
		t.Errorf("10th has reporting %q/%q annotations %v; client-go sets none", agg.ReportingController, agg.ReportingInstance, agg.Annotations)
	}
	if calls[8].event.Annotations["a"] != "b" || calls[8].event.ReportingController != "kubelet" {
		t.Errorf("9th lost annotations or reportingController: %+v", calls[8].event)
	}
	at10 := t0.Add(9 * time.Second)
	if agg.Name != hexName("p1", at10) || !agg.FirstTimestamp.Time.Equal(at10) || agg.Source.Component != "kubelet" {
		t.Errorf("10th: name %s first %v source %+v", agg.Name, agg.FirstTimestamp, agg.Source)
	}
	e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", 11)
	e.sync()
	calls = e.sink.getCalls()
	if len(calls) != 11 || calls[10].verb != "patch" || calls[10].event.Name != agg.Name {
		t.Fatalf("11th: %v", verbs(calls))
	}
	if want := countBody(2, t0.Add(10*time.Second), "(combined from similar events): msg-11"); string(calls[10].body) != want {
		t.Errorf("11th body %s, want %s", calls[10].body, want)
	}
	if got := counterValue(t, e.b.metrics.Aggregated); got != 2 {
		t.Errorf("aggregated %v, want 2", got)
	}
}

// Scenario 4, deterministic part (B): 12 distinct messages, then msg-1
// again. client-go forgets a random message, so msg-1 PATCHes either the
// combined event or its own; here the oldest is forgotten, so it is always
// the combined event, count 4.
func TestScenario04AggregationDeterministic(t *testing.T) {
	for trial := 0; trial < 10; trial++ {
		e := newEnv(t)
		p := pod("ns", "p1", "u")
		for i := 1; i <= 12; i++ {
			e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", i)
			e.step(time.Second)
		}
		e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", 1)
		e.sync()
		calls := e.sink.getCalls()
		last := calls[len(calls)-1]
		if last.verb != "patch" || last.event.Name != calls[9].event.Name ||
			string(last.body) != countBody(4, t0.Add(12*time.Second), "(combined from similar events): msg-1") {
			t.Fatalf("trial %d: last call %s %s %s", trial, last.verb, last.event.Name, last.body)
		}
		e.b.Shutdown()
	}
}

// Scenario 5 (U): 9 distinct messages, then the 10th after 601 s → an
// individual POST; after 599 s → the combined event.
func TestScenario05AggregationReset(t *testing.T) {
	for _, tc := range []struct {
		idle      time.Duration
		aggregate bool
	}{{601 * time.Second, false}, {599 * time.Second, true}} {
		t.Run(tc.idle.String(), func(t *testing.T) {
			e := newEnv(t)
			p := pod("ns", "p1", "u")
			for i := 1; i <= 9; i++ {
				e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", i)
				e.step(time.Millisecond) // distinct names
			}
			e.step(tc.idle - 9*time.Millisecond + 8*time.Millisecond) // idle measured from the 9th
			e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", 10)
			e.sync()
			calls := e.sink.getCalls()
			if len(calls) != 10 || calls[9].verb != "create" {
				t.Fatalf("calls %v", verbs(calls))
			}
			got := calls[9].event.Message
			want := "msg-10"
			if tc.aggregate {
				want = "(combined from similar events): msg-10"
			}
			if got != want {
				t.Errorf("10th message %q, want %q", got, want)
			}
		})
	}
}

// Scenario 6 (B): a distinct message every 500 s. client-go aggregates at
// the 10th (its window resets only after 600 s idle, about 75 min here);
// the rolling window counts only messages of the last 600 s, so every
// message stays individual.
func TestScenario06RollingWindow(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "p1", "u")
	for i := 1; i <= 12; i++ {
		e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", i)
		e.step(500 * time.Second)
	}
	for i, c := range e.sink.getCalls() {
		if c.verb != "create" || c.event.Message != fmt.Sprintf("msg-%d", i+1) {
			t.Errorf("call %d: %s %q", i, c.verb, c.event.Message)
		}
	}
	if n := e.sink.numCalls(); n != 12 {
		t.Errorf("%d calls, want 12", n)
	}
	// Ten distinct messages within 600 s still aggregate.
	for i := 13; i <= 22; i++ {
		e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", i)
		e.step(time.Second)
	}
	calls := e.sink.getCalls()
	if m := calls[len(calls)-1].event.Message; m != "(combined from similar events): msg-22" {
		t.Errorf("10 within the window: last message %q", m)
	}
}

// Scenario 7 (U): events differing only in fieldPath are separate objects
// but share the spam bucket and the aggregate group.
func TestScenario07FieldPath(t *testing.T) {
	ref := func(c string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "p1", UID: "u",
			FieldPath: "spec.containers{" + c + "}"}
	}
	t.Run("separate objects", func(t *testing.T) {
		e := newEnv(t)
		e.rec.Event(ref("a"), corev1.EventTypeNormal, "Pulled", "pulled")
		e.step(time.Millisecond)
		e.rec.Event(ref("b"), corev1.EventTypeNormal, "Pulled", "pulled")
		e.sync()
		calls := e.sink.getCalls()
		if !slices.Equal(verbs(calls), []string{"create", "create"}) || calls[0].event.Name == calls[1].event.Name {
			t.Fatalf("calls %v", verbs(calls))
		}
	})
	t.Run("shared spam bucket", func(t *testing.T) {
		e := newEnv(t, WithCorrelatorOptions(CorrelatorOptions{BurstSize: 1}))
		e.rec.Event(ref("a"), corev1.EventTypeNormal, "Pulled", "pulled")
		e.step(time.Millisecond)
		e.rec.Event(ref("b"), corev1.EventTypeNormal, "Pulled", "pulled")
		e.sync()
		if n := e.sink.numCalls(); n != 1 {
			t.Fatalf("%d calls, want 1 (b held back by a's bucket)", n)
		}
	})
	t.Run("shared aggregate group", func(t *testing.T) {
		e := newEnv(t, WithCorrelatorOptions(CorrelatorOptions{MaxEvents: 2}))
		e.rec.Event(ref("a"), corev1.EventTypeNormal, "Pulled", "one")
		e.step(time.Millisecond)
		e.rec.Event(ref("b"), corev1.EventTypeNormal, "Pulled", "two")
		e.sync()
		calls := e.sink.getCalls()
		if len(calls) != 2 || calls[1].event.Message != "(combined from similar events): two" {
			t.Fatalf("calls %v, second message %q", verbs(calls), calls[len(calls)-1].event.Message)
		}
	})
}

// Scenario 8 (U): the server expired the event; the repeat PATCHes, gets
// 404 and POSTs with the same name, count 2, no resourceVersion and the
// original first timestamp.
func TestScenario08ExpiredEvent(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "p1", "u")
	e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	e.step(5 * time.Second)
	name := e.sink.getCalls()[0].event.Name
	e.sink.remove("ns", name)
	e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	e.sync()
	calls := e.sink.getCalls()
	if got := verbs(calls); !slices.Equal(got, []string{"create", "patch!", "create"}) {
		t.Fatalf("calls %v", got)
	}
	if string(calls[1].body) != countBody(2, t0.Add(5*time.Second), "m") || calls[1].event.ResourceVersion != "1" {
		t.Errorf("patch %s rv %q", calls[1].body, calls[1].event.ResourceVersion)
	}
	re := calls[2].event
	if re.Name != name || re.ResourceVersion != "" || re.Count != 2 || !re.FirstTimestamp.Time.Equal(t0) ||
		!re.LastTimestamp.Time.Equal(t0.Add(5*time.Second)) {
		t.Errorf("re-create %s rv %q count %d first %v last %v", re.Name, re.ResourceVersion, re.Count, re.FirstTimestamp, re.LastTimestamp)
	}
	// The next repeat patches the re-created object.
	e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	e.sync()
	if calls := e.sink.getCalls(); calls[3].verb != "patch" || calls[3].err != nil || e.sink.stored()[0].Count != 3 {
		t.Errorf("after re-create: %v count %d", verbs(calls), e.sink.stored()[0].Count)
	}
}

// Scenario 9 (U, with this package's retry policy): a transport error on
// every call → a bounded number of attempts, then dropped with "retry
// limit exceeded"; the sink's other events wait behind it. With client-go's
// spacing configured (12 attempts, 10 s apart), the attempts are client-go's
// (whose first wait is random in [0, 10 s)).
func TestScenario09TransportErrors(t *testing.T) {
	t.Run("client-go spacing", func(t *testing.T) {
		e := newEnv(t, WithRetryPolicy(RetryPolicy{MaxAttempts: 12, Initial: 10 * time.Second, Max: 10 * time.Second, Jitter: -1}))
		e.sink.setFail(func(_ string, ev *corev1.Event) error {
			if ev.Reason == "Failing" {
				return errTransport()
			}
			return nil
		})
		e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeWarning, "Failing", "m")
		e.rec.Event(pod("ns", "p2", "u2"), corev1.EventTypeNormal, "Behind", "m")
		for i := 1; i < 12; i++ {
			e.waitCalls(i)
			if n := e.sink.numCalls(); n != i {
				t.Fatalf("attempt %d: %d calls", i, n)
			}
			if d := e.stepToNextTimer(); d != 10*time.Second {
				t.Errorf("wait after attempt %d: %v, want 10s", i, d)
			}
		}
		e.waitCalls(13)
		e.sync()
		calls := e.sink.getCalls()
		for i := 0; i < 12; i++ {
			if calls[i].verb != "create" || calls[i].err == nil || calls[i].event.Reason != "Failing" {
				t.Fatalf("call %d: %s %v %s", i, calls[i].verb, calls[i].err, calls[i].event.Reason)
			}
		}
		if calls[12].event.Reason != "Behind" || calls[12].err != nil || !calls[12].at.Equal(calls[11].at) {
			t.Errorf("the event behind: %s at %v (last attempt at %v)", calls[12].event.Reason, calls[12].at, calls[11].at)
		}
		if len(e.logs.find("Unable to write event (retry limit exceeded!)")) != 1 {
			t.Errorf("logs %v", e.logs.all())
		}
		if e.dropped(recordermetrics.DropRetriesExhausted) != 1 || counterValue(t, e.b.metrics.Retries) != 11 ||
			e.writes("create", "error") != 12 {
			t.Errorf("metrics: exhausted %v retries %v create errors %v", e.dropped(recordermetrics.DropRetriesExhausted),
				counterValue(t, e.b.metrics.Retries), e.writes("create", "error"))
		}
	})
	t.Run("default policy", func(t *testing.T) {
		e := newEnv(t)
		e.sink.setFail(func(string, *corev1.Event) error { return errTransport() })
		e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeWarning, "Failing", "m")
		base := []time.Duration{1, 2, 4, 8, 16, 30, 30}
		for i, b := range base {
			e.waitCalls(i + 1)
			d := e.stepToNextTimer()
			lo, hi := time.Duration(float64(b*time.Second)*0.75), time.Duration(float64(b*time.Second)*1.25)+time.Millisecond
			if d < lo || d > hi {
				t.Errorf("wait %d: %v, want %v ±25%%", i+1, d, b*time.Second)
			}
		}
		e.waitCalls(DefaultMaxAttempts)
		waitFor(t, "the drop", func() bool { return e.dropped(recordermetrics.DropRetriesExhausted) == 1 })
		if n := e.sink.numCalls(); n != DefaultMaxAttempts {
			t.Errorf("%d attempts, want %d", n, DefaultMaxAttempts)
		}
	})
}

// Scenario 10 (B): client-go drops a 429 or 5xx after one attempt; here
// they are retried with backoff, honouring Retry-After, bounded.
func TestScenario10RetryThrottlingAndServerErrors(t *testing.T) {
	noJitter := WithRetryPolicy(RetryPolicy{MaxAttempts: 4, Initial: time.Second, Max: 30 * time.Second, Jitter: -1})
	t.Run("429 Retry-After", func(t *testing.T) {
		e := newEnv(t, noJitter)
		n := 0
		e.sink.setFail(func(string, *corev1.Event) error {
			if n++; n == 1 {
				return errTooMany(7)
			}
			return nil
		})
		e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
		e.waitCalls(1)
		if d := e.stepToNextTimer(); d != 7*time.Second {
			t.Errorf("waited %v, want the 7 s Retry-After", d)
		}
		e.waitCalls(2)
		e.sync()
		if got := verbs(e.sink.getCalls()); !slices.Equal(got, []string{"create!", "create"}) || len(e.sink.stored()) != 1 {
			t.Errorf("calls %v", got)
		}
	})
	t.Run("5xx backoff", func(t *testing.T) {
		e := newEnv(t, noJitter)
		n := 0
		e.sink.setFail(func(string, *corev1.Event) error {
			if n++; n <= 2 {
				return errInternal()
			}
			return nil
		})
		e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
		for i, want := range []time.Duration{time.Second, 2 * time.Second} {
			e.waitCalls(i + 1)
			if d := e.stepToNextTimer(); d != want {
				t.Errorf("wait %d: %v, want %v", i+1, d, want)
			}
		}
		e.waitCalls(3)
		e.sync()
		if len(e.sink.stored()) != 1 || counterValue(t, e.b.metrics.Retries) != 2 {
			t.Errorf("stored %d retries %v", len(e.sink.stored()), counterValue(t, e.b.metrics.Retries))
		}
	})
	t.Run("bounded", func(t *testing.T) {
		e := newEnv(t, noJitter)
		e.sink.setFail(func(string, *corev1.Event) error { return errInternal() })
		e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
		for i := 1; i < 4; i++ {
			e.waitCalls(i)
			e.stepToNextTimer()
		}
		e.waitCalls(4)
		waitFor(t, "the drop", func() bool { return e.dropped(recordermetrics.DropRetriesExhausted) == 1 })
		if n := e.sink.numCalls(); n != 4 {
			t.Errorf("%d attempts, want 4", n)
		}
	})
}

// Scenario 11 (U): AlreadyExists → one attempt, dropped, logged at V(5);
// 422 → one attempt, dropped, logged as an error.
func TestScenario11Refusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   func() error
		level int
	}{{"409", errConflict, 5}, {"422", errInvalid, -1}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.sink.setFail(func(string, *corev1.Event) error { return tc.err() })
			e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
			e.sync()
			e.step(time.Hour)
			if n := e.sink.numCalls(); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			l := e.logs.find("Server rejected event (will not retry!)")
			if len(l) != 1 || l[0].level != tc.level {
				t.Errorf("logs %v, want one at level %d", e.logs.all(), tc.level)
			}
			if e.dropped(recordermetrics.DropRejected) != 1 {
				t.Errorf("rejected %v", e.dropped(recordermetrics.DropRejected))
			}
		})
	}
}

// Scenario 12 (U): Shutdown with a failing sink ends the retry at once:
// one attempt in all, "broadcaster is shut down"; Event afterwards logs,
// does not panic and makes no call. Cancelling WithContext's context does
// the same. No goroutine outlives Shutdown.
func TestScenario12ShutdownWithFailingSink(t *testing.T) {
	for _, viaContext := range []bool{false, true} {
		t.Run(fmt.Sprintf("context=%v", viaContext), func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e := newEnv(t, WithContext(ctx))
			e.sink.setFail(func(string, *corev1.Event) error { return errTransport() })
			e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
			e.waitCalls(1)
			e.waitTimers(1) // in the retry wait
			if viaContext {
				cancel()
				select {
				case <-e.b.Done():
				case <-time.After(waitLimit):
					t.Fatal("cancelling the context did not shut down")
				}
			} else {
				e.b.Shutdown()
			}
			if n := e.sink.numCalls(); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			if len(e.logs.find("Unable to write event (broadcaster is shut down)")) != 1 {
				t.Errorf("logs %v", e.logs.all())
			}
			e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
			if n := e.sink.numCalls(); n != 1 {
				t.Errorf("a call after Shutdown")
			}
			l := e.logs.find("Unable to record event (will not retry!)")
			if len(l) != 1 || l[0].err == nil || l[0].err.Error() != "broadcaster already stopped" {
				t.Errorf("logs %v", e.logs.all())
			}
			if e.dropped(recordermetrics.DropShutdown) != 2 {
				t.Errorf("shutdown drops %v, want 2", e.dropped(recordermetrics.DropShutdown))
			}
		})
	}
}

// Scenario 13 (U): a cluster-scoped object's events go to "default".
func TestScenario13ClusterScoped(t *testing.T) {
	e := newEnv(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "nu"}}
	e.rec.Event(node, corev1.EventTypeNormal, "NodeReady", "ready")
	e.sync()
	ev := e.sink.getCalls()[0].event
	if ev.Namespace != "default" || ev.InvolvedObject.Namespace != "" || ev.InvolvedObject.Kind != "Node" {
		t.Errorf("namespace %q involvedObject %+v", ev.Namespace, ev.InvolvedObject)
	}
}

// Scenario 14 (U): type "Error" → no call, "Unsupported event type".
func TestScenario14InvalidType(t *testing.T) {
	e := newEnv(t)
	e.rec.Event(pod("ns", "p1", "u"), "Error", "Boom", "m")
	e.rec.Event(nil, corev1.EventTypeNormal, "NoObject", "m")
	e.sync()
	if n := e.sink.numCalls(); n != 0 {
		t.Errorf("%d calls", n)
	}
	if l := e.logs.find("Unsupported event type"); len(l) != 1 || l[0].level != -1 {
		t.Errorf("logs %v", e.logs.all())
	}
	if len(e.logs.find("Could not construct reference")) != 1 {
		t.Errorf("logs %v", e.logs.all())
	}
	if e.dropped(recordermetrics.DropInvalid) != 2 {
		t.Errorf("invalid drops %v", e.dropped(recordermetrics.DropInvalid))
	}
}

// Scenario 15 (U/B): a reference name that makes an invalid event name →
// a UUID (U); the aggregated event about the same object too (B; client-go
// names it Bad_Name.<hex>).
func TestScenario15InvalidNames(t *testing.T) {
	e := newEnv(t)
	p := pod("ns", "Bad_Name", "u")
	for i := 1; i <= 10; i++ {
		e.rec.Eventf(p, corev1.EventTypeWarning, "Failed", "msg-%d", i)
		e.step(time.Second)
	}
	calls := e.sink.getCalls()
	if len(calls) != 10 {
		t.Fatalf("%d calls", len(calls))
	}
	for i, c := range calls {
		if !isUUID(c.event.Name) {
			t.Errorf("event %d name %q is not a UUID", i+1, c.event.Name)
		}
	}
	if calls[9].event.Message != "(combined from similar events): msg-10" {
		t.Errorf("10th message %q", calls[9].event.Message)
	}
}

// Scenario 16 (U): Event does not format; Eventf always does.
func TestScenario16Formatting(t *testing.T) {
	e := newEnv(t)
	e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Progress", "100% done")
	e.rec.Eventf(pod("ns", "p2", "u2"), corev1.EventTypeNormal, "Progress", "100% done", []any{}...) // no args, as a caller would
	e.sync()
	calls := e.sink.getCalls()
	if calls[0].event.Message != "100% done" || calls[1].event.Message != "100%!d(MISSING)one" {
		t.Errorf("messages %q, %q", calls[0].event.Message, calls[1].event.Message)
	}
}

// Scenario 17 (U): with LRUCacheSize 2, A,A,B,C,A → POST A, PATCH A (2),
// POST B, POST C, POST A' (a new object).
func TestScenario17LRUEviction(t *testing.T) {
	e := newEnv(t, WithCorrelatorOptions(CorrelatorOptions{LRUCacheSize: 2}))
	p := pod("ns", "p1", "u")
	for _, r := range []string{"A", "A", "B", "C", "A"} {
		e.rec.Event(p, corev1.EventTypeNormal, r, "m")
		e.step(time.Second)
	}
	calls := e.sink.getCalls()
	if got := verbs(calls); !slices.Equal(got, []string{"create", "patch", "create", "create", "create"}) {
		t.Fatalf("calls %v", got)
	}
	if calls[1].event.Count != 2 || calls[4].event.Reason != "A" || calls[4].event.Name == calls[0].event.Name || calls[4].event.Count != 1 {
		t.Errorf("A: %+v / A': %s count %d", calls[1].event, calls[4].event.Name, calls[4].event.Count)
	}
	if got := counterValue(t, e.b.metrics.ActiveSeries); got != 2 {
		t.Errorf("active series %v, want 2", got)
	}
}

// Scenario 18 (B): after a restart client-go creates a new object with
// count 1; WithResume continues counting on the stored one.
func TestScenario18Resume(t *testing.T) {
	clk0 := newEnv(t)
	p := pod("ns", "p1", "u")
	clk0.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	clk0.step(time.Second)
	clk0.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
	clk0.sync()
	// A second component on the same host, and the same component on
	// another host, must not be taken for ours.
	other := clk0.b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node2"})
	other.Event(p, corev1.EventTypeNormal, "Started", "m")
	clk0.sync()
	clk0.b.Shutdown()
	stored := clk0.sink.stored()
	if len(stored) != 2 {
		t.Fatalf("stored %d", len(stored))
	}

	restart := func(resume bool) (*env, []sinkCall) {
		e := &env{t: t, clk: clk0.clk, sink: clk0.sink, logs: &logCapture{}}
		e.b = NewBroadcaster(WithClock(e.clk), WithLogger(e.logs.logger()), WithResume(resume))
		t.Cleanup(e.b.Shutdown)
		e.b.StartRecordingToSink(e.sink)
		e.rec = e.b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node1"})
		before := e.sink.numCalls()
		e.step(time.Minute)
		e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
		e.sync()
		return e, e.sink.getCalls()[before:]
	}

	e, calls := restart(true)
	if len(calls) != 1 || calls[0].verb != "patch" || calls[0].event.Name != hexName("p1", t0) ||
		string(calls[0].body) != countBody(3, e.clk.Now(), "m") {
		t.Fatalf("resumed: %v %+v", verbs(calls), calls)
	}
	lists := e.sink.lists
	if len(lists) != 1 || lists[0].FieldSelector != "source=kubelet" {
		t.Errorf("lists %+v", lists)
	}
	e.b.Shutdown()

	_, calls = restart(false)
	if len(calls) != 1 || calls[0].verb != "create" || calls[0].event.Count != 1 {
		t.Errorf("without resume (client-go's behaviour): %v", verbs(calls))
	}
}

// Scenario 19 (U): two sinks each get their own sequence and counts.
func TestScenario19TwoSinks(t *testing.T) {
	e := newEnv(t)
	second := newFakeSink(e.clk)
	e.b.StartRecordingToSink(second)
	p := pod("ns", "p1", "u")
	for i := 0; i < 3; i++ {
		e.rec.Event(p, corev1.EventTypeNormal, "Started", "m")
		e.step(time.Second)
	}
	for i, s := range []*fakeSink{e.sink, second} {
		calls := s.getCalls()
		if got := verbs(calls); !slices.Equal(got, []string{"create", "patch", "patch"}) {
			t.Errorf("sink %d: %v", i, got)
			continue
		}
		if string(calls[2].body) != countBody(3, t0.Add(2*time.Second), "m") {
			t.Errorf("sink %d: %s", i, calls[2].body)
		}
	}
}
