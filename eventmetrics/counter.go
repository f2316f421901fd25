package eventmetrics

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/facet"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// Marker label values.
const (
	// OverflowValue is every label's value in the series that counts the
	// occurrences of label sets refused past MaxLabelSets.
	OverflowValue = "_overflow"
	// OtherValue is the namespace or reason label's value of the
	// namespaces or reasons the configuration does not keep.
	OtherValue = "_other"
)

// Metric names.
const (
	OccurrencesName      = "eventsd_event_occurrences_total"
	LabelSetsName        = "eventsd_event_metrics_label_sets"
	LabelSetsRefusedName = "eventsd_event_metrics_label_sets_refused_total"
)

// labelValues are an occurrence's values of AllLabels, in their order;
// labels the configuration leaves out are empty.
type labelValues [6]string

// Counter counts event occurrences; build it with New, feed it with
// Observe (a storage.WriteObserver) and register it with a Prometheus
// registry. It is safe for concurrent use.
type Counter struct {
	keep       [6]bool // which of AllLabels are exported
	names      []string
	namespaces map[string]bool // nil: every namespace kept
	reasons    map[string]bool // nil: every reason kept
	max        int

	occurrences, labelSets, refused *prometheus.Desc

	mu     sync.RWMutex
	series map[labelValues]*atomic.Uint64

	overflow     atomic.Uint64
	refusedCount atomic.Uint64
}

// New returns a counter of c's labels and bounds; a nil c is the default
// configuration. It validates c.
func New(c *Configuration) (*Counter, error) {
	if c == nil {
		c = &Configuration{}
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s: %w", ConfigurationKind, errs.ToAggregate())
	}
	m := &Counter{max: c.MaxLabelSets, series: map[labelValues]*atomic.Uint64{}}
	if m.max == 0 {
		m.max = DefaultMaxLabelSets
	}
	labels := c.Labels
	if len(labels) == 0 {
		labels = DefaultLabels
	}
	for i, l := range AllLabels {
		if slices.Contains(labels, l) {
			m.keep[i] = true
			m.names = append(m.names, l)
		}
	}
	m.namespaces, m.reasons = setOf(c.Namespaces), setOf(c.Reasons)
	m.occurrences = prometheus.NewDesc(OccurrencesName,
		"Event occurrences written through this eventsd (a create of count N adds N, a count or series increase adds the increase; mirrored and folded events included; deletions change nothing), by the labels of --event-metrics-config. "+
			"Each replica counts its own writes from its start: sum over replicas. Label sets past the configuration's maximum are counted with every label _overflow.",
		m.names, nil)
	m.labelSets = prometheus.NewDesc(LabelSetsName,
		"Label sets (series) of eventsd_event_occurrences_total, the overflow series excluded.", nil, nil)
	m.refused = prometheus.NewDesc(LabelSetsRefusedName,
		"Writes whose new label set eventsd_event_occurrences_total refused because it held its maximum of label sets; their occurrences went to the _overflow series.", nil, nil)
	return m, nil
}

// setOf returns values as a set, nil when empty (everything kept).
func setOf(values []string) map[string]bool {
	if len(values) == 0 {
		return nil
	}
	s := make(map[string]bool, len(values))
	for _, v := range values {
		s[v] = true
	}
	return s
}

// Observe counts the occurrences a write added: cur's less prev's (all
// of cur's for a create, prev nil), under cur's labels. A write that
// lowers an event's count adds nothing. It is a storage.WriteObserver.
func (m *Counter) Observe(prev, cur *corev1.Event) {
	if cur == nil {
		return
	}
	n := int64(eventapi.Occurrences(cur))
	if prev != nil {
		n -= int64(eventapi.Occurrences(prev))
	}
	if n <= 0 {
		return
	}
	m.add(m.labelsOf(cur), uint64(n))
}

// labelsOf returns ev's label values as the configuration keeps them.
func (m *Counter) labelsOf(ev *corev1.Event) labelValues {
	var v labelValues
	if m.keep[0] {
		v[0] = kept(m.namespaces, ev.Namespace)
	}
	if m.keep[1] {
		v[1] = ev.Type
	}
	if m.keep[2] {
		v[2] = kept(m.reasons, ev.Reason)
	}
	if m.keep[3] {
		v[3] = ev.InvolvedObject.Kind
	}
	if m.keep[4] {
		v[4] = facet.ReportingController(ev)
	}
	if m.keep[5] {
		v[5] = ev.InvolvedObject.Name
	}
	return v
}

// kept returns v if set keeps it, else OtherValue.
func kept(set map[string]bool, v string) string {
	if set == nil || set[v] {
		return v
	}
	return OtherValue
}

// add adds n occurrences to the series of v, or to the overflow series
// when v is new and the maximum is reached.
func (m *Counter) add(v labelValues, n uint64) {
	m.mu.RLock()
	c := m.series[v]
	m.mu.RUnlock()
	if c == nil {
		m.mu.Lock()
		if c = m.series[v]; c == nil && len(m.series) < m.max {
			c = &atomic.Uint64{}
			m.series[v] = c
		}
		m.mu.Unlock()
	}
	if c == nil {
		m.overflow.Add(n)
		m.refusedCount.Add(1)
		return
	}
	c.Add(n)
}

// Describe implements prometheus.Collector.
func (m *Counter) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.occurrences
	ch <- m.labelSets
	ch <- m.refused
}

// Collect implements prometheus.Collector: every label set's count, the
// overflow series (also when zero, so that sums and alerts on it always
// have a series), the number of label sets and the refusals.
func (m *Counter) Collect(ch chan<- prometheus.Metric) {
	values := make([]string, 0, len(m.names))
	m.mu.RLock()
	n := len(m.series)
	for v, c := range m.series {
		values = values[:0]
		for i := range v {
			if m.keep[i] {
				values = append(values, v[i])
			}
		}
		ch <- prometheus.MustNewConstMetric(m.occurrences, prometheus.CounterValue, float64(c.Load()), values...)
	}
	m.mu.RUnlock()
	values = values[:0]
	for range m.names {
		values = append(values, OverflowValue)
	}
	ch <- prometheus.MustNewConstMetric(m.occurrences, prometheus.CounterValue, float64(m.overflow.Load()), values...)
	ch <- prometheus.MustNewConstMetric(m.labelSets, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(m.refused, prometheus.CounterValue, float64(m.refusedCount.Load()))
}
