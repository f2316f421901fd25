package eventmetrics

import (
	"maps"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/metricstest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// liveValues returns the live series gauge by reason/kind, and the
// untracked writes.
func liveValues(t *testing.T, l *LiveSeries) (map[string]float64, float64) {
	t.Helper()
	return metricstest.Samples(t, l, LiveSeriesName, LabelReason, LabelKind), metricstest.Samples(t, l, LiveSeriesUntrackedName)[""]
}

// seriesEvent is an event named name with a series last observed at
// observed.
func seriesEvent(name, reason, kind string, observed time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.EventTypeWarning, Reason: reason,
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "ns", Name: name},
		Series:         &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(observed)}}
}

// TestLiveSeriesBounds: reasons outside the configuration's count as
// _other, label sets past the maximum as _overflow, series past
// MaxTrackedSeries (lowered here) are counted as untracked once the
// finished ones are dropped, and a series that loses its series field
// stops counting.
func TestLiveSeriesBounds(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, err := NewLiveSeries(&Configuration{Reasons: []string{"BackOff"}, MaxLabelSets: 2}, clk)
	if err != nil {
		t.Fatal(err)
	}
	l.maxTracked = 4
	now := clk.Now()
	l.Observe(nil, seriesEvent("a", "BackOff", "Pod", now))
	l.Observe(nil, seriesEvent("b", "Unhealthy", "Pod", now))                   // _other
	l.Observe(nil, seriesEvent("c", "BackOff", "Node", now))                    // a third label set: _overflow
	l.Observe(nil, seriesEvent("d", "BackOff", "Pod", now.Add(-5*time.Minute))) // live one more minute
	l.Observe(nil, seriesEvent("e", "BackOff", "Pod", now))                     // past the tracking's maximum
	got, untracked := liveValues(t, l)
	if want := map[string]float64{"BackOff/Pod": 2, "_other/Pod": 1, "_overflow/_overflow": 1}; !maps.Equal(got, want) || untracked != 1 {
		t.Fatalf("%v, %v untracked; want %v, 1", got, untracked, want)
	}
	clk.SetTime(now.Add(time.Minute)) // d finished: room for e
	l.Observe(nil, seriesEvent("e", "BackOff", "Pod", clk.Now()))
	noSeries := seriesEvent("a", "BackOff", "Pod", now)
	noSeries.Series, noSeries.Count = nil, 7
	l.Observe(seriesEvent("a", "BackOff", "Pod", now), noSeries)
	got, untracked = liveValues(t, l)
	if want := map[string]float64{"BackOff/Pod": 1, "_other/Pod": 1, "_overflow/_overflow": 1}; !maps.Equal(got, want) || untracked != 1 {
		t.Fatalf("%v, %v untracked; want %v, 1", got, untracked, want)
	}
}

// BenchmarkLiveSeriesObserve is what a write of an event with a series
// pays, among 10,000 live series.
func BenchmarkLiveSeriesObserve(b *testing.B) {
	l, err := NewLiveSeries(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]*corev1.Event, 10000)
	for i := range evs {
		evs[i] = seriesEvent(string(rune('a'+i%26))+string(rune(i)), "BackOff", "Pod", time.Now())
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.Observe(nil, evs[i%len(evs)])
			i++
		}
	})
}
