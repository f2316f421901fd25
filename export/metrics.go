package export

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the exporter's Prometheus metrics, labelled by sink.
type metrics struct {
	exported *prometheus.CounterVec
	retries  *prometheus.CounterVec
	lost     *prometheus.CounterVec
	leader   prometheus.Gauge
}

// sinkMetrics are one sink's children of metrics.
type sinkMetrics struct {
	exported, retries, lostHistory, lostRejected prometheus.Counter
}

// The reasons of eventsd_export_lost_total.
const (
	// lostHistory: revisions between the sink's cursor and the oldest the
	// store kept when the sink got back (an upper bound on the changes
	// lost: some may not have matched the filter).
	lostHistory = "history"
	// lostRejected: records of batches the destination refused
	// rejectedAttempts times.
	lostRejected = "rejected"
)

func newMetrics(e *Exporter, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		exported: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_export_records_total",
			Help: "Records (event changes) each sink acknowledged.",
		}, []string{"sink"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_export_retries_total",
			Help: "Batches sent again after a failed send, by sink.",
		}, []string{"sink"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_export_lost_total",
			Help: "Changes a sink will never get: reason=history counts revisions the store's history no longer had when the sink resumed (an upper bound: some may not have matched its filter); reason=rejected counts records of batches its destination refused and that were dropped.",
		}, []string{"sink", "reason"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventsd_export_leader",
			Help: "1 while this eventsd exports (on etcd, the replica that leads the export), 0 otherwise.",
		}),
	}
	cs := []prometheus.Collector{m.exported, m.retries, m.lost, m.leader}
	for _, r := range e.sinks {
		labels := prometheus.Labels{"sink": r.spec.Name}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "eventsd_export_lag_revisions", ConstLabels: labels,
				Help: "Revisions between the store's current revision and the sink's cursor (the last it acknowledged).",
			}, func() float64 { return float64(max(0, e.opts.Store.Revision()-r.acked.Load())) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "eventsd_export_lag_seconds", ConstLabels: labels,
				Help: "How long the oldest change the sink has not acknowledged has waited (sampled each second; since eventsd started at most).",
			}, func() float64 { return e.samples.age(e.opts.Clock.Now(), r.acked.Load()).Seconds() }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "eventsd_export_cursor_revision", ConstLabels: labels,
				Help: "The sink's cursor: the last revision it acknowledged, saved in the store.",
			}, func() float64 { return float64(r.acked.Load()) }),
		)
	}
	if reg != nil {
		for _, c := range cs {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("export: registering metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) forSink(name string) *sinkMetrics {
	return &sinkMetrics{
		exported:     m.exported.WithLabelValues(name),
		retries:      m.retries.WithLabelValues(name),
		lostHistory:  m.lost.WithLabelValues(name, lostHistory),
		lostRejected: m.lost.WithLabelValues(name, lostRejected),
	}
}
