package mirror

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the mirror's Prometheus metrics.
type metrics struct {
	applied, skipped *prometheus.CounterVec
	dropped          prometheus.Counter
	storeRetries     prometheus.Counter
	relists          *prometheus.CounterVec
	reconnects       prometheus.Counter
	sourceErrors     *prometheus.CounterVec
	gapSeconds       prometheus.Counter
	cursorErrors     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, m *Mirror) (*metrics, error) {
	mt := &metrics{
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_mirror_changes_applied_total",
			Help: "Changes of the source's events written to the store, by type (added, modified, deleted).",
		}, []string{"type"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_mirror_changes_skipped_total",
			Help: "Changes of the source's events that wrote nothing, by reason: applied (received again after a restart or relist), deletion-kept (--source-deletions=keep), absent (a deletion of an event not stored).",
		}, []string{"reason"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_mirror_changes_dropped_total",
			Help: "Changes of the source's events the store refused for good (not for being unavailable: those are retried); each is logged, rate-limited.",
		}),
		storeRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_mirror_store_retries_total",
			Help: "Attempts to write a change again because the store was unavailable (full disk, etcd unreachable).",
		}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_mirror_relists_total",
			Help: "Reads of the source's whole state, by reason: start (no cursor saved) or expired (the source compacted past the cursor: 410 Gone).",
		}, []string{"reason"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_mirror_reconnects_total",
			Help: "Watches of the source started again from the cursor after one ended or failed.",
		}),
		sourceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_mirror_source_errors_total",
			Help: "Failed requests and watches of the source, by HTTP code (0: transport error).",
		}, []string{"code"}),
		gapSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_mirror_gap_seconds_total",
			Help: "Time windows in which events the source created and expired could not be mirrored: after a 410, how long the mirror was behind beyond the source's event TTL.",
		}),
		cursorErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_mirror_cursor_save_errors_total",
			Help: "Failed saves of the mirror's cursor (the next save covers them).",
		}),
	}
	if reg == nil {
		return mt, nil
	}
	cs := []prometheus.Collector{mt.applied, mt.skipped, mt.dropped, mt.storeRetries, mt.relists, mt.reconnects, mt.sourceErrors, mt.gapSeconds, mt.cursorErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eventsd_mirror_synced",
			Help: "1 while this replica mirrors and has read the source's events since it started (or since the last relist), else 0.",
		}, func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.leading && m.synced {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eventsd_mirror_lag_seconds",
			Help: "How far behind its source the mirror is: the age of the oldest change received and not yet applied, or, while the watch of the source is down, how long it has been.",
		}, m.lagSeconds),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eventsd_mirror_lag_resource_versions",
			Help: "The newest source resourceVersion the mirror has heard of (changes, bookmarks) less its cursor.",
		}, m.lagRevisions),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return mt, nil
}

func (m *Mirror) lagSeconds() float64 {
	m.mu.Lock()
	a, leading, live, down := m.applier, m.leading, m.live, m.downSince
	m.mu.Unlock()
	if !leading {
		return 0
	}
	now := m.opts.Clock.Now()
	var lag float64
	if !live {
		lag = now.Sub(down).Seconds()
	}
	if a != nil {
		if _, oldest := a.state(); !oldest.IsZero() {
			lag = max(lag, now.Sub(oldest).Seconds())
		}
	}
	return lag
}

func (m *Mirror) lagRevisions() float64 {
	m.mu.Lock()
	a, latest := m.applier, m.latestRV
	m.mu.Unlock()
	if a == nil {
		return 0
	}
	cursor, _ := a.state()
	n, ok := parseRV(cursor)
	if !ok {
		return 0
	}
	return float64(max(latest-n, 0))
}
