package eventmetrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	m, err := New(&Configuration{Reasons: []string{"BackOff"}})
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
	want := `
# HELP eventsd_event_occurrences_total ` + help(m) + `
# TYPE eventsd_event_occurrences_total counter
eventsd_event_occurrences_total{kind="Pod",namespace="a",reason="BackOff",reporting_controller="kubelet",type="Warning"} 7
eventsd_event_occurrences_total{kind="Pod",namespace="a",reason="_other",reporting_controller="kubelet",type="Warning"} 1
eventsd_event_occurrences_total{kind="Pod",namespace="b",reason="BackOff",reporting_controller="kubelet",type="Warning"} 4
eventsd_event_occurrences_total{kind="_overflow",namespace="_overflow",reason="_overflow",reporting_controller="_overflow",type="_overflow"} 0
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
	m, err := New(&Configuration{MaxLabelSets: 10, Labels: []string{LabelReason}})
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
	m, err := New(&Configuration{Labels: []string{LabelNamespace, LabelReason, LabelName}})
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

// BenchmarkObserve is the cost a write pays: a create's labels looked up
// among DefaultMaxLabelSets label sets and its count added.
func BenchmarkObserve(b *testing.B) {
	m, err := New(nil)
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
