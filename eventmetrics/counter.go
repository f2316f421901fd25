package eventmetrics

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/facet"
	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
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
	NamesRefusedName     = "eventsd_event_metrics_names_refused_total"
	LabelSetsExpiredName = "eventsd_event_metrics_label_sets_expired_total"
)

// nameIndex is the name label's index in AllLabels and labelValues,
// clusterIndex the cluster label's.
const (
	nameIndex    = 5
	clusterIndex = 6
)

// series is one label set's count and what its idle expiry needs: a
// write only sets touched (a load, and a store the first time since the
// last sweep, so that writes to a series do not contend on a clock or a
// timestamp); a sweep moves last to its own time when touched, and
// clears touched.
type series struct {
	n       atomic.Uint64
	touched atomic.Bool
	last    int64 // the clock's Unix nanoseconds: made, or seen touched by a sweep; under the write lock
}

// labelValues are an occurrence's values of AllLabels, in their order;
// labels the configuration leaves out are empty.
type labelValues [7]string

// Counter counts event occurrences; build it with New, feed it with
// Observe (a storage.WriteObserver) and register it with a Prometheus
// registry. It is safe for concurrent use.
//
// A label set that has not grown for the configuration's idle expiry is
// deleted (when scraped, or when a new label set finds the maximum
// reached), so that label sets naming objects that are gone free their
// place. The occurrences it counted were exported by earlier scrapes; if
// it grows again it starts from zero, a counter reset to Prometheus.
type Counter struct {
	clock      clock.PassiveClock
	keep       [7]bool // which of AllLabels are exported
	names      []string
	namespaces map[string]bool // nil: every namespace kept
	reasons    map[string]bool // nil: every reason kept
	nameFor    *NameSelection  // nil: every event keeps its name
	max        int
	maxNamed   int
	idle       time.Duration // 0: label sets never expire

	occurrences, labelSets, refused, namesRefused, expired *prometheus.Desc

	mu        sync.RWMutex
	series    map[labelValues]*series
	named     int   // label sets of series with a name
	lastSweep int64 // Unix nanoseconds of the last sweep at the maximum

	overflow          atomic.Uint64
	refusedCount      atomic.Uint64
	namesRefusedCount atomic.Uint64
	expiredCount      atomic.Uint64
}

// New returns a counter of c's labels and bounds; a nil c is the default
// configuration. It validates c. clk times the label sets' idle expiry;
// nil is the real clock.
func New(c *Configuration, clk clock.PassiveClock) (*Counter, error) {
	c, clk, err := defaulted(c, clk)
	if err != nil {
		return nil, err
	}
	m := &Counter{clock: clk, max: c.maxLabelSets(), maxNamed: c.maxNamedLabelSets(), idle: c.idleExpiry(),
		nameFor: c.nameFor(), series: map[labelValues]*series{}}
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
	m.namesRefused = prometheus.NewDesc(NamesRefusedName,
		"Writes whose new label set with an object's name eventsd_event_occurrences_total refused because it held its maximum of such label sets; their occurrences went to the same labels without the name.", nil, nil)
	m.expired = prometheus.NewDesc(LabelSetsExpiredName,
		"Label sets of eventsd_event_occurrences_total deleted because they had not grown for the configuration's idleExpiry; one that grows again restarts from 0 (a counter reset).", nil, nil)
	return m, nil
}

// defaulted returns c, the default configuration when nil, validated,
// and clk, the real clock when nil.
func defaulted(c *Configuration, clk clock.PassiveClock) (*Configuration, clock.PassiveClock, error) {
	if c == nil {
		c = &Configuration{}
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, nil, fmt.Errorf("invalid %s: %w", ConfigurationKind, errs.ToAggregate())
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return c, clk, nil
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
	// The store has a fleet's events under their storage namespaces
	// ("~C~ns"): the labels are the cluster and the real namespace.
	cluster, ns := storage.SplitClusterNamespace(ev.Namespace)
	if m.keep[0] {
		v[0] = kept(m.namespaces, ns)
	}
	if m.keep[clusterIndex] {
		v[clusterIndex] = cluster
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
	if m.keep[nameIndex] && m.nameFor.selects(ev.Type, ev.Reason) {
		v[nameIndex] = ev.InvolvedObject.Name
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

// add adds n occurrences to the series of v; when v is new, to a new
// series if the bounds allow, else (a named v past the named maximum) to
// v's series without the name, else to the overflow series.
func (m *Counter) add(v labelValues, n uint64) {
	// The series is grown under the read lock, so that a sweep (under the
	// write lock) never deletes a series between its lookup and its
	// growth.
	m.mu.RLock()
	s := m.series[v]
	if s == nil && v[nameIndex] != "" && m.named >= m.maxNamed {
		// The named label sets are full: the nameless one, if it
		// exists, without the write lock (a sweep at the next scrape
		// frees the named places of idle series).
		nameless := v
		nameless[nameIndex] = ""
		if s = m.series[nameless]; s != nil {
			m.namesRefusedCount.Add(1)
		}
	}
	if s != nil {
		s.n.Add(n)
		if !s.touched.Load() {
			s.touched.Store(true)
		}
		m.mu.RUnlock()
		return
	}
	m.mu.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now().UnixNano()
	s = m.seriesLocked(v, now)
	if s == nil {
		m.overflow.Add(n)
		m.refusedCount.Add(1)
		return
	}
	s.n.Add(n)
	if s.last != now { // one that existed (the nameless one, or one made meanwhile): it grew
		s.touched.Store(true)
	}
}

// seriesLocked returns v's series, made if the bounds allow (deleting
// idle series first when they do not), else for a named v its series
// without the name (made if the maximum allows), or nil. m.mu is held
// for writing.
func (m *Counter) seriesLocked(v labelValues, now int64) *series {
	if s := m.series[v]; s != nil {
		return s
	}
	named := v[nameIndex] != ""
	if len(m.series) >= m.max || (named && m.named >= m.maxNamed) {
		// At most one sweep a second: a saturated counter must not scan
		// its series at every refused write.
		if m.idle > 0 && now-m.lastSweep >= int64(time.Second) {
			m.lastSweep = now
			m.sweepLocked(now)
		}
	}
	if named && (m.named >= m.maxNamed || len(m.series) >= m.max) {
		v[nameIndex] = ""
		s := m.series[v]
		if s == nil && len(m.series) < m.max {
			s = &series{last: now}
			m.series[v] = s
		}
		if s != nil {
			m.namesRefusedCount.Add(1)
		}
		return s
	}
	if len(m.series) >= m.max {
		return nil
	}
	s := &series{last: now}
	m.series[v] = s
	if named {
		m.named++
	}
	return s
}

// sweepLocked deletes the series that have not grown for the idle
// expiry: made, or last seen grown by a sweep, at least that long ago.
// m.mu is held for writing.
func (m *Counter) sweepLocked(now int64) {
	if m.idle <= 0 {
		return
	}
	for v, s := range m.series {
		if s.touched.Load() {
			s.touched.Store(false)
			s.last = now
		} else if now-s.last >= int64(m.idle) {
			delete(m.series, v)
			if v[nameIndex] != "" {
				m.named--
			}
			m.expiredCount.Add(1)
		}
	}
}

// Describe implements prometheus.Collector.
func (m *Counter) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.occurrences
	ch <- m.labelSets
	ch <- m.refused
	ch <- m.namesRefused
	ch <- m.expired
}

// Collect implements prometheus.Collector: every label set's count (the
// idle ones deleted first), the overflow series (also when zero, so that
// sums and alerts on it always have a series), the number of label sets,
// the refusals and the expiries.
func (m *Counter) Collect(ch chan<- prometheus.Metric) {
	if m.idle > 0 {
		m.mu.Lock()
		m.sweepLocked(m.clock.Now().UnixNano())
		m.mu.Unlock()
	}
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
		ch <- prometheus.MustNewConstMetric(m.occurrences, prometheus.CounterValue, float64(c.n.Load()), values...)
	}
	m.mu.RUnlock()
	values = values[:0]
	for range m.names {
		values = append(values, OverflowValue)
	}
	ch <- prometheus.MustNewConstMetric(m.occurrences, prometheus.CounterValue, float64(m.overflow.Load()), values...)
	ch <- prometheus.MustNewConstMetric(m.labelSets, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(m.refused, prometheus.CounterValue, float64(m.refusedCount.Load()))
	ch <- prometheus.MustNewConstMetric(m.namesRefused, prometheus.CounterValue, float64(m.namesRefusedCount.Load()))
	ch <- prometheus.MustNewConstMetric(m.expired, prometheus.CounterValue, float64(m.expiredCount.Load()))
}
