package eventmetrics

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Names of the live series metrics.
const (
	LiveSeriesName          = "eventsd_event_series_live"
	LiveSeriesUntrackedName = "eventsd_event_series_live_untracked_total"
)

// SeriesFinishWindow is how long after its last observation a series
// stays live: client-go's events broadcaster (tools/events, finishTime)
// finishes a series, sends its last state and forgets it, once its
// lastObservedTime is more than 6 minutes old; until then an isomorphic
// event extends it.
const SeriesFinishWindow = 6 * time.Minute

// MaxTrackedSeries bounds the live series a LiveSeries tracks (about a
// hundred bytes each). A new live series past it, once the finished ones
// are dropped, is not tracked and is counted in
// eventsd_event_series_live_untracked_total.
const MaxTrackedSeries = 100000

// seriesKey names an event: its namespace and name.
type seriesKey struct{ namespace, name string }

// gaugeLabels are a live series' reason and kind.
type gaugeLabels [2]string

// liveEntry is a tracked series: its labels and when it finishes (Unix
// nanoseconds of the clock).
type liveEntry struct {
	labels   gaugeLabels
	deadline int64
}

// LiveSeries is the gauge eventsd_event_series_live{reason,kind}: the
// events with a series (events.k8s.io/v1 series, core/v1 series) not yet
// finished, that is whose lastObservedTime, or the time of the write that
// stored it if earlier, is less than SeriesFinishWindow old on the clock.
// Build it with NewLiveSeries, feed it with Observe (a
// storage.WriteObserver) and register it with a Prometheus registry. It
// is safe for concurrent use.
//
// Writes of events without a series cost a nil check. A series is
// tracked from the write that stored it to its finish; finished series
// are dropped when scraped (and when the tracking is full), without
// reading the store. Deletions are not observed: an event deleted while
// its series is live (a TTL shorter than the window, a delete through
// the API) is counted until its window ends.
type LiveSeries struct {
	clock      clock.PassiveClock
	window     time.Duration
	reasons    map[string]bool // nil: every reason kept
	maxSets    int
	maxTracked int

	live, untracked *prometheus.Desc

	mu        sync.Mutex
	series    map[seriesKey]liveEntry
	sets      map[gaugeLabels]int // live series per label set
	lastSweep int64

	untrackedCount atomic.Uint64
}

// NewLiveSeries returns the live series gauge with c's reasons (others
// counted as OtherValue) and at most c's maxLabelSets label sets (others
// counted under OverflowValue); a nil c is the default configuration. It
// validates c. clk tells when series finish; nil is the real clock.
func NewLiveSeries(c *Configuration, clk clock.PassiveClock) (*LiveSeries, error) {
	c, clk, err := defaulted(c, clk)
	if err != nil {
		return nil, err
	}
	return &LiveSeries{
		clock: clk, window: SeriesFinishWindow, reasons: setOf(c.Reasons), maxSets: c.maxLabelSets(), maxTracked: MaxTrackedSeries,
		series: map[seriesKey]liveEntry{}, sets: map[gaugeLabels]int{},
		live: prometheus.NewDesc(LiveSeriesName,
			"Events with a series not yet finished: last observed (or, if earlier, written) less than 6 minutes ago, the window after which client-go's events recorder finishes a series. "+
				"Counted from the writes this eventsd made since it started; deletions are not seen, a deleted series counts until its 6 minutes end. Label sets past the configuration's maximum are counted with both labels _overflow.",
			[]string{LabelReason, LabelKind}, nil),
		untracked: prometheus.NewDesc(LiveSeriesUntrackedName,
			fmt.Sprintf("Writes of a live series eventsd_event_series_live did not count because it tracked its maximum of %d live series.", MaxTrackedSeries),
			nil, nil),
	}, nil
}

// Observe tracks cur's series, if it has one, until it finishes; a write
// that leaves cur finished (or without a series) ends its tracking. It is
// a storage.WriteObserver.
func (l *LiveSeries) Observe(prev, cur *corev1.Event) {
	if cur == nil || (cur.Series == nil && (prev == nil || prev.Series == nil)) {
		return
	}
	now := l.clock.Now().UnixNano()
	key := seriesKey{cur.Namespace, cur.Name}
	deadline := int64(0)
	if cur.Series != nil {
		observed := now
		if t := cur.Series.LastObservedTime; !t.IsZero() && t.UnixNano() < now {
			observed = t.UnixNano()
		}
		deadline = observed + int64(l.window)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old, tracked := l.series[key]
	if tracked {
		l.dropLocked(key, old)
	}
	if deadline <= now {
		return
	}
	if !tracked && len(l.series) >= l.maxTracked && now-l.lastSweep >= int64(time.Second) {
		l.lastSweep = now
		l.sweepLocked(now)
	}
	if len(l.series) >= l.maxTracked {
		l.untrackedCount.Add(1)
		return
	}
	labels := gaugeLabels{kept(l.reasons, cur.Reason), cur.InvolvedObject.Kind}
	if _, ok := l.sets[labels]; !ok && len(l.sets) >= l.maxSets {
		labels = gaugeLabels{OverflowValue, OverflowValue}
	}
	l.series[key] = liveEntry{labels: labels, deadline: deadline}
	l.sets[labels]++
}

// dropLocked ends the tracking of key's entry e. l.mu is held.
func (l *LiveSeries) dropLocked(key seriesKey, e liveEntry) {
	delete(l.series, key)
	if l.sets[e.labels]--; l.sets[e.labels] <= 0 {
		delete(l.sets, e.labels)
	}
}

// sweepLocked drops the series finished at now. l.mu is held.
func (l *LiveSeries) sweepLocked(now int64) {
	for k, e := range l.series {
		if e.deadline <= now {
			l.dropLocked(k, e)
		}
	}
}

// Describe implements prometheus.Collector.
func (l *LiveSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- l.live
	ch <- l.untracked
}

// Collect implements prometheus.Collector: the finished series dropped,
// the live ones per label set, and the series left untracked.
func (l *LiveSeries) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	l.sweepLocked(l.clock.Now().UnixNano())
	for labels, n := range l.sets {
		ch <- prometheus.MustNewConstMetric(l.live, prometheus.GaugeValue, float64(n), labels[0], labels[1])
	}
	l.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(l.untracked, prometheus.CounterValue, float64(l.untrackedCount.Load()))
}
