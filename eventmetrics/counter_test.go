package eventmetrics

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func event(ns, reason string, count int32) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e"},
		Type:       corev1.EventTypeWarning, Reason: reason, Count: count,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
		Source:         corev1.EventSource{Component: "kubelet"},
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nlabels: [reason, node]\n", `labels[1]: Unsupported value: "node"`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nlabels: [reason, reason]\n", `labels[1]: Duplicate value: "reason"`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nmaxLabelSets: -1\n", "maxLabelSets: Invalid value: -1"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nmaxLabelSets: 1000001\n", "must be between 1 and 100000"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nreasons: [\"\"]\n", "reasons[0]: Invalid value"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nnamespaces: [_other]\n", "marker value"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nmaxLabelSet: 10\n", `unknown field "maxLabelSet"`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nlabels: [reason]\nnameFor: {types: [Warning]}\n", "nameFor: Forbidden: needs name among the labels"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nnameFor: {}\n", "nameFor: Required value"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nnameFor: {types: [Warning, Warning]}\n", `nameFor.types[1]: Duplicate value: "Warning"`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nnameFor: {reasons: [\"\"]}\n", "nameFor.reasons[0]: Invalid value"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nmaxLabelSets: 10\nmaxNamedLabelSets: 11\n", "maxNamedLabelSets: Invalid value: 11: must be between 1 and maxLabelSets (10)"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nlabels: [reason]\nmaxNamedLabelSets: 5\n", "maxNamedLabelSets: Forbidden"},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nidleExpiry: 1d\n", `idleExpiry: Invalid value: "1d": use hours, e.g. 24h`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nidleExpiry: 1m\n", `idleExpiry: Invalid value: "1m": must be at least 5m0s (or 0s: never)`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nidleExpiry: -1h\n", `idleExpiry: Invalid value: "-1h"`},
		{"apiVersion: eventsd.kubevents.io/v1alpha1\nkind: FoldConfiguration\n", "want apiVersion eventsd.kubevents.io/v1alpha1, kind EventMetricsConfiguration"},
	} {
		_, err := Decode([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
	c, err := Decode([]byte("apiVersion: eventsd.kubevents.io/v1alpha1\nkind: EventMetricsConfiguration\nlabels: [reason]\nmaxLabelSets: 5\n"))
	if err != nil || c.MaxLabelSets != 5 || len(c.Labels) != 1 {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
}

// TestObserve: creates add their count, updates the increase, decreases
// nothing; labels as configured.
func TestObserve(t *testing.T) {
	m, err := New(&Configuration{Reasons: []string{"BackOff"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(nil, event("a", "BackOff", 3))                      // 3
	m.Observe(event("a", "BackOff", 3), event("a", "BackOff", 7)) // +4
	m.Observe(event("a", "BackOff", 7), event("a", "BackOff", 2)) // lower: nothing
	m.Observe(nil, event("a", "Pulled", 0))                       // a count of 0 is one occurrence, under _other
	withSeries := event("b", "BackOff", 0)
	withSeries.Series = &corev1.EventSeries{Count: 5}
	m.Observe(event("b", "BackOff", 1), withSeries) // +4
	m.Observe(nil, event("~east~a", "BackOff", 2))  // a fleet's cluster east, namespace a
	want := `
# HELP eventsd_event_occurrences_total ` + help(m) + `
# TYPE eventsd_event_occurrences_total counter
eventsd_event_occurrences_total{cluster="",kind="Pod",name="p",namespace="a",reason="BackOff",reporting_controller="kubelet",type="Warning"} 7
eventsd_event_occurrences_total{cluster="",kind="Pod",name="p",namespace="a",reason="_other",reporting_controller="kubelet",type="Warning"} 1
eventsd_event_occurrences_total{cluster="",kind="Pod",name="p",namespace="b",reason="BackOff",reporting_controller="kubelet",type="Warning"} 4
eventsd_event_occurrences_total{cluster="east",kind="Pod",name="p",namespace="a",reason="BackOff",reporting_controller="kubelet",type="Warning"} 2
eventsd_event_occurrences_total{cluster="_overflow",kind="_overflow",name="_overflow",namespace="_overflow",reason="_overflow",reporting_controller="_overflow",type="_overflow"} 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), OccurrencesName); err != nil {
		t.Error(err)
	}
}

func help(m *Counter) string {
	s := m.occurrences.String()
	i := strings.Index(s, `help: "`) + len(`help: "`)
	return s[i : i+strings.Index(s[i:], `"`)]
}

// TestOverflowExact: past the maximum, occurrences of new label sets go
// to the overflow series, so the sum over every series is the number of
// occurrences written, also under concurrent writers.
func TestOverflowExact(t *testing.T) {
	m, err := New(&Configuration{MaxLabelSets: 10, Labels: []string{LabelReason}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	var wg sync.WaitGroup
	const writers, reasons = 4, 50
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range reasons {
				m.Observe(nil, event("ns", fmt.Sprintf("R%d", i), int32(w+1)))
			}
		}()
	}
	wg.Wait()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum, overflow float64
	var sets, refused float64
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			switch mf.GetName() {
			case OccurrencesName:
				sum += mt.Counter.GetValue()
				if mt.Label[0].GetValue() == OverflowValue {
					overflow = mt.Counter.GetValue()
				}
			case LabelSetsName:
				sets = mt.Gauge.GetValue()
			case LabelSetsRefusedName:
				refused = mt.Counter.GetValue()
			}
		}
	}
	if want := float64(reasons * (1 + 2 + 3 + 4)); sum != want {
		t.Errorf("sum of occurrences = %v, want %v", sum, want)
	}
	if sets != 10 || overflow == 0 || refused != writers*reasons-float64(writers*10) {
		t.Errorf("label sets %v, overflow %v, refused %v; want 10, > 0, %d", sets, overflow, refused, writers*reasons-writers*10)
	}
}

// TestNameLabel: the object's name is a label only when configured.
func TestNameLabel(t *testing.T) {
	m, err := New(&Configuration{Labels: []string{LabelNamespace, LabelReason, LabelName}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(nil, event("a", "BackOff", 2))
	want := `
# HELP eventsd_event_occurrences_total ` + help(m) + `
# TYPE eventsd_event_occurrences_total counter
eventsd_event_occurrences_total{name="p",namespace="a",reason="BackOff"} 2
eventsd_event_occurrences_total{name="_overflow",namespace="_overflow",reason="_overflow"} 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), OccurrencesName); err != nil {
		t.Error(err)
	}
}

// namedEvent is an event of type typ and reason about the Pod name.
func namedEvent(typ, reason, name string, count int32) *corev1.Event {
	ev := event("ns", reason, count)
	ev.Type, ev.InvolvedObject.Name = typ, name
	return ev
}

// TestDefaultNames: with no labels listed, the object's name is kept for
// Warning events and the shipped alerts' reasons, empty for others; a
// file listing labels keeps meaning what it meant (name for every event
// when listed, for none when not).
func TestDefaultNames(t *testing.T) {
	for _, tc := range []struct {
		what string
		c    *Configuration
		want string
	}{
		{"default", nil, `
eventsd_event_occurrences_total{cluster="",kind="Pod",name="",namespace="ns",reason="Pulled",reporting_controller="kubelet",type="Normal"} 1
eventsd_event_occurrences_total{cluster="",kind="Pod",name="a",namespace="ns",reason="FailedMount",reporting_controller="kubelet",type="Warning"} 1
eventsd_event_occurrences_total{cluster="",kind="Pod",name="b",namespace="ns",reason="BackOff",reporting_controller="kubelet",type="Normal"} 1
eventsd_event_occurrences_total{cluster="_overflow",kind="_overflow",name="_overflow",namespace="_overflow",reason="_overflow",reporting_controller="_overflow",type="_overflow"} 0
`},
		{"name listed", &Configuration{Labels: []string{LabelReason, LabelName}}, `
eventsd_event_occurrences_total{name="a",reason="FailedMount"} 1
eventsd_event_occurrences_total{name="b",reason="BackOff"} 1
eventsd_event_occurrences_total{name="c",reason="Pulled"} 1
eventsd_event_occurrences_total{name="_overflow",reason="_overflow"} 0
`},
		{"name listed, nameFor", &Configuration{Labels: []string{LabelReason, LabelName}, NameFor: &NameSelection{Reasons: []string{"Pulled"}}}, `
eventsd_event_occurrences_total{name="",reason="FailedMount"} 1
eventsd_event_occurrences_total{name="",reason="BackOff"} 1
eventsd_event_occurrences_total{name="c",reason="Pulled"} 1
eventsd_event_occurrences_total{name="_overflow",reason="_overflow"} 0
`},
		{"name not listed", &Configuration{Labels: []string{LabelReason}}, `
eventsd_event_occurrences_total{reason="FailedMount"} 1
eventsd_event_occurrences_total{reason="BackOff"} 1
eventsd_event_occurrences_total{reason="Pulled"} 1
eventsd_event_occurrences_total{reason="_overflow"} 0
`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			m, err := New(tc.c, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.Observe(nil, namedEvent("Warning", "FailedMount", "a", 1))
			m.Observe(nil, namedEvent("Normal", "BackOff", "b", 1)) // the kubelet's image pull back-off
			m.Observe(nil, namedEvent("Normal", "Pulled", "c", 1))
			want := "# HELP eventsd_event_occurrences_total " + help(m) + "\n# TYPE eventsd_event_occurrences_total counter" + tc.want
			if err := testutil.CollectAndCompare(m, strings.NewReader(want), OccurrencesName); err != nil {
				t.Error(err)
			}
		})
	}
}

// values returns the counter's samples by their labels as
// name/reason, with the expiries, names refused and label sets refused.
func values(t *testing.T, m *Counter) (map[string]float64, [3]float64) {
	t.Helper()
	one := func(name string) float64 { return metricstest.Samples(t, m, name)[""] }
	return metricstest.Samples(t, m, OccurrencesName, LabelName, LabelReason),
		[3]float64{one(LabelSetsExpiredName), one(NamesRefusedName), one(LabelSetsRefusedName)}
}

// TestIdleExpiry: on a fake clock, a label set that has not grown for
// idleExpiry is deleted at the next scrape, one that grew is kept, a
// deleted one that grows again starts from 0 (a counter reset), and the
// maximum frees up: a new label set refused at the maximum gets a place
// once an idle one expires, without a scrape.
func TestIdleExpiry(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	m, err := New(&Configuration{Labels: []string{LabelReason, LabelName}, MaxLabelSets: 2, IdleExpiry: "1h"}, clk)
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(nil, namedEvent("Warning", "BackOff", "a", 3))
	m.Observe(nil, namedEvent("Warning", "BackOff", "b", 1))
	clk.SetTime(clk.Now().Add(30 * time.Minute))
	m.Observe(namedEvent("Warning", "BackOff", "b", 1), namedEvent("Warning", "BackOff", "b", 2))
	m.Observe(nil, namedEvent("Warning", "BackOff", "c", 5)) // the maximum: overflow
	got, counts := values(t, m)
	if want := map[string]float64{"a/BackOff": 3, "b/BackOff": 2, "_overflow/_overflow": 5}; !maps.Equal(got, want) || counts != [3]float64{0, 0, 1} {
		t.Fatalf("at 30m: %v %v, want %v and 1 refused", got, counts, want)
	}

	clk.SetTime(clk.Now().Add(30*time.Minute - time.Nanosecond)) // a: idle for 1h less 1ns
	if got, _ := values(t, m); got["a/BackOff"] != 3 {
		t.Fatalf("a expired before its idle hour: %v", got)
	}
	clk.SetTime(clk.Now().Add(time.Nanosecond)) // a idle for 1h: deleted by the scrape
	got, counts = values(t, m)
	if want := map[string]float64{"b/BackOff": 2, "_overflow/_overflow": 5}; !maps.Equal(got, want) || counts != [3]float64{1, 0, 1} {
		t.Fatalf("at 1h: %v %v, want %v, 1 expired, 1 refused", got, counts, want)
	}
	m.Observe(nil, namedEvent("Warning", "BackOff", "c", 4)) // room now
	m.Observe(nil, namedEvent("Warning", "BackOff", "a", 1)) // back, from 0; the maximum again
	got, counts = values(t, m)
	if want := map[string]float64{"b/BackOff": 2, "c/BackOff": 4, "_overflow/_overflow": 6}; !maps.Equal(got, want) || counts != [3]float64{1, 0, 2} {
		t.Fatalf("after c: %v %v, want %v", got, counts, want)
	}

	// Without a scrape, the maximum frees up when a new label set needs
	// a place and one has been idle long enough.
	clk.SetTime(clk.Now().Add(31 * time.Minute)) // b idle for 1h01m, c for 31m
	m.Observe(nil, namedEvent("Warning", "BackOff", "a", 2))
	m.mu.RLock()
	_, hasA := m.series[labelValues{2: "BackOff", nameIndex: "a"}]
	_, hasB := m.series[labelValues{2: "BackOff", nameIndex: "b"}]
	m.mu.RUnlock()
	if !hasA || hasB {
		t.Fatalf("a new label set at the maximum did not take the idle one's place: a %v, b %v", hasA, hasB)
	}
	got, counts = values(t, m)
	if want := map[string]float64{"a/BackOff": 2, "c/BackOff": 4, "_overflow/_overflow": 6}; !maps.Equal(got, want) || counts != [3]float64{2, 0, 2} {
		t.Fatalf("at 1h31m: %v %v, want %v", got, counts, want)
	}
}

// TestIdleExpiryFallbackGrows: an occurrence counted in an existing
// nameless label set because the maximum is reached makes it grow as any
// other: it is not deleted an idle period after it was made.
func TestIdleExpiryFallbackGrows(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	m, err := New(&Configuration{Labels: []string{LabelReason, LabelName}, MaxLabelSets: 2, IdleExpiry: "1h"}, clk)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	m.Observe(nil, namedEvent("Warning", "BackOff", "", 1))  // nameless
	m.Observe(nil, namedEvent("Warning", "BackOff", "a", 1)) // the maximum
	clk.SetTime(t0.Add(50 * time.Minute))
	m.Observe(nil, namedEvent("Warning", "BackOff", "b", 1)) // into the nameless one
	clk.SetTime(t0.Add(60 * time.Minute))
	got, counts := values(t, m)
	if want := map[string]float64{"/BackOff": 2, "_overflow/_overflow": 0}; !maps.Equal(got, want) || counts != [3]float64{1, 1, 0} {
		t.Fatalf("%v %v, want %v (a expired, b counted nameless)", got, counts, want)
	}
}

// TestNoIdleExpiry: idleExpiry 0s keeps label sets however idle.
func TestNoIdleExpiry(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	m, err := New(&Configuration{IdleExpiry: "0s"}, clk)
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(nil, namedEvent("Warning", "BackOff", "a", 3))
	clk.SetTime(clk.Now().Add(1000 * time.Hour))
	if got, counts := values(t, m); got["a/BackOff"] != 3 || counts[0] != 0 {
		t.Fatalf("%v %v, want a/BackOff 3 kept", got, counts)
	}
}

// TestNamedBound: past maxNamedLabelSets, an object's occurrences count
// in the same labels without the name, so alerts on the nameless series
// still fire and sums stay exact; the refusals are counted.
func TestNamedBound(t *testing.T) {
	m, err := New(&Configuration{MaxLabelSets: 4}, nil) // named: 2 at most
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		m.Observe(nil, namedEvent("Warning", "BackOff", name, int32(i+1)))
	}
	m.Observe(nil, namedEvent("Warning", "BackOff", "a", 10)) // a keeps its place
	got, counts := values(t, m)
	if want := map[string]float64{"a/BackOff": 11, "b/BackOff": 2, "/BackOff": 3 + 4, "_overflow/_overflow": 0}; !maps.Equal(got, want) || counts != [3]float64{0, 2, 0} {
		t.Fatalf("%v %v, want %v and 2 names refused", got, counts, want)
	}
}

// BenchmarkObserve is the cost a write pays: a create's labels looked up
// among DefaultMaxLabelSets label sets and its count added.
func BenchmarkObserve(b *testing.B) {
	m, err := New(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]*corev1.Event, DefaultMaxLabelSets)
	for i := range evs {
		evs[i] = event(fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("Reason%d", i/20), 1)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Observe(nil, evs[i%len(evs)])
			i++
		}
	})
}
