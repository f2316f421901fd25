package events

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
)

// Shutdown leaves no series ongoing: every one is written with the state
// unknown and its final count, even when that count was already written;
// a singleton gets no write.
func TestShutdownWritesUnknown(t *testing.T) {
	e := newEnv(t)
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.r.Eventf(pod("ns", "single"), nil, "Normal", "Pulled", "Pull", "x")
	e.waitCalls(2, 0)
	e.settle()
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.waitCalls(3, 0) // the series start: count 2, ongoing
	e.settle()
	e.b.Shutdown()
	w := writes(e.sink.Calls())
	if len(w) != 4 || w[3].Verb != "patch" || !strings.HasPrefix(w[3].Name, "p1.") {
		t.Fatalf("writes %+v", w)
	}
	if n, st := seriesOf(t, w[3]); n != 2 || st != SeriesUnknown {
		t.Fatalf("shutdown write %s, want count 2, unknown", w[3].Body)
	}
	for _, ev := range e.sink.Events() {
		if strings.HasPrefix(ev.Name, "p1.") && ev.Annotations[SeriesStateAnnotation] != SeriesUnknown {
			t.Fatalf("stored state %q", ev.Annotations[SeriesStateAnnotation])
		}
	}
}

// Without the annotation, Shutdown writes only unwritten counts.
func TestShutdownNoAnnotation(t *testing.T) {
	e := newEnv(t, WithSeriesStateAnnotation(false))
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.waitCalls(1, 0)
	e.settle()
	e.r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "x")
	e.waitCalls(2, 0)
	e.settle()
	e.b.Shutdown()
	e.quiet(2)
}

func storedSeries(name, state string, count int32, first, last time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + ".old", Annotations: map[string]string{SeriesStateAnnotation: state}},
		EventTime:  metav1.NewMicroTime(first), ReportingController: "my-ctrl", ReportingInstance: "my-ctrl-vm",
		Action: "Restart", Reason: "BackOff", Type: "Warning", Note: "n",
		Regarding: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Series:    &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)},
	}
}

// A restarted recorder resumes a series its predecessor left unknown and
// sets it back to ongoing at once; a series left unknown (or ongoing)
// whose last occurrence is older than FinishAfter is written finished.
func TestResumeUnknown(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	sink := NewFakeSink()
	sink.Put(storedSeries("p1", SeriesUnknown, 600, t0.Add(-30*time.Minute), t0.Add(-time.Minute)))
	sink.Put(storedSeries("p2", SeriesUnknown, 9, t0.Add(-time.Hour), t0.Add(-10*time.Minute)))
	sink.Put(storedSeries("p3", SeriesOngoing, 5, t0.Add(-time.Hour), t0.Add(-10*time.Minute)))
	b := NewBroadcaster(sink, WithClock(clk), WithHostname("vm"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, clock: clk, sink: sink, b: b}
	defer b.Shutdown()
	r := b.NewRecorder(scheme.Scheme, "my-ctrl")
	w := e.waitCalls(3, 0)
	e.settle()
	states := map[string]string{}
	for _, c := range w {
		n, st := seriesOf(t, c)
		states[c.Name] = st
		if want := map[string]int32{"p1.old": 600, "p2.old": 9, "p3.old": 5}[c.Name]; c.Verb != "patch" || n != want {
			t.Fatalf("resume write %+v %s", c, c.Body)
		}
	}
	if states["p1.old"] != SeriesOngoing || states["p2.old"] != SeriesFinished || states["p3.old"] != SeriesFinished {
		t.Fatalf("states after resume %v", states)
	}
	r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "again")
	b.Shutdown()
	for _, ev := range sink.Events() {
		if ev.Name == "p1.old" && (ev.Series.Count != 601 || ev.Annotations[SeriesStateAnnotation] != SeriesUnknown) {
			t.Fatalf("p1 after the second Shutdown: count %d, %q", ev.Series.Count, ev.Annotations[SeriesStateAnnotation])
		}
	}
	if len(sink.Events()) != 3 {
		t.Fatalf("stored %d events, want the 3 resumed", len(sink.Events()))
	}
}
