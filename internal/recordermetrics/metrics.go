// Package recordermetrics holds the Prometheus metrics both recorders
// (record for core/v1, events for events.k8s.io/v1) report.
package recordermetrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop causes: every event or occurrence a recorder gives up on is counted
// under one of these.
const (
	// DropInvalid: the event could not be built (unsupported type, no
	// reference for the object).
	DropInvalid = "invalid"
	// DropQueueFull: the bounded queue of pending writes was full.
	DropQueueFull = "queue_full"
	// DropRejected: the server refused the event (4xx other than 429);
	// retrying cannot help.
	DropRejected = "rejected"
	// DropRetriesExhausted: every attempt failed with a retryable error.
	DropRetriesExhausted = "retries_exhausted"
	// DropShutdown: emitted after Shutdown, or still unwritten when the
	// shutdown deadline passed.
	DropShutdown = "shutdown"
	// DropRateLimited: an occurrence the spam filter kept from being
	// written; it is carried in the count of the event's next write.
	DropRateLimited = "rate_limited"
)

// Causes lists every drop cause above; the Dropped metric has no other
// label values. It must not be modified.
var Causes = []string{DropInvalid, DropQueueFull, DropRejected, DropRetriesExhausted, DropShutdown, DropRateLimited}

// Metrics are one broadcaster's counters.
type Metrics struct {
	// Emitted counts calls that produced an event (Event, Eventf, ...).
	Emitted prometheus.Counter
	// Deduplicated counts occurrences folded into an existing event or
	// series instead of a new object.
	Deduplicated prometheus.Counter
	// Aggregated counts occurrences folded into a
	// "(combined from similar events)" event.
	Aggregated prometheus.Counter
	// Writes counts API calls by verb (create, patch) and result
	// (success, error).
	Writes *prometheus.CounterVec
	// Dropped counts lost events or occurrences by cause.
	Dropped *prometheus.CounterVec
	// Retries counts attempts after the first.
	Retries prometheus.Counter
	// ActiveSeries is the number of events the recorder is tracking.
	ActiveSeries prometheus.Gauge
}

// New returns unregistered metrics for one broadcaster; api labels them
// ("v1" or "events.k8s.io/v1").
func New(api string) *Metrics {
	labels := prometheus.Labels{"api": api}
	return &Metrics{
		Emitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubevents_recorder_emitted_total",
			Help: "Events emitted by callers.", ConstLabels: labels}),
		Deduplicated: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubevents_recorder_deduplicated_total",
			Help: "Occurrences counted into an existing event or series rather than written as a new object.", ConstLabels: labels}),
		Aggregated: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubevents_recorder_aggregated_total",
			Help: "Occurrences folded into a combined event of similar messages.", ConstLabels: labels}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubevents_recorder_writes_total",
			Help: "API calls to the event sink, by verb and result.", ConstLabels: labels}, []string{"verb", "result"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubevents_recorder_dropped_total",
			Help: "Events or occurrences given up on, by cause.", ConstLabels: labels}, []string{"cause"}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubevents_recorder_retries_total",
			Help: "Write attempts after the first.", ConstLabels: labels}),
		ActiveSeries: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubevents_recorder_active_series",
			Help: "Events the recorder is tracking (deduplicating or counting).", ConstLabels: labels}),
	}
}

// Register registers every metric with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range m.collectors() {
		errs = append(errs, reg.Register(c.metric))
	}
	return errors.Join(errs...)
}

// RegisterShared registers every metric with reg, adopting a metric
// another broadcaster registered there already (one with the same
// description), so that broadcasters sharing a registry share their
// counters. Call it before anything resolves the metrics' children (as
// NewDropper does).
func (m *Metrics) RegisterShared(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range m.collectors() {
		err := reg.Register(c.metric)
		var are prometheus.AlreadyRegisteredError
		switch {
		case errors.As(err, &are):
			c.adopt(are.ExistingCollector)
		case err != nil:
			errs = append(errs, fmt.Errorf("registering metric: %w", err))
		}
	}
	return errors.Join(errs...)
}

// collector is one of the metrics and how to replace it with an equal
// one registered earlier.
type collector struct {
	metric prometheus.Collector
	adopt  func(prometheus.Collector)
}

// collectors lists every metric of m, the one list Register and
// RegisterShared both use.
func (m *Metrics) collectors() []collector {
	return []collector{
		{m.Emitted, adopt(&m.Emitted)},
		{m.Deduplicated, adopt(&m.Deduplicated)},
		{m.Aggregated, adopt(&m.Aggregated)},
		{m.Writes, adopt(&m.Writes)},
		{m.Dropped, adopt(&m.Dropped)},
		{m.Retries, adopt(&m.Retries)},
		{m.ActiveSeries, adopt(&m.ActiveSeries)},
	}
}

// adopt returns a function that sets *field to a collector of its type,
// and leaves it alone given one of another type.
func adopt[T prometheus.Collector](field *T) func(prometheus.Collector) {
	return func(c prometheus.Collector) {
		if v, ok := c.(T); ok {
			*field = v
		}
	}
}
