package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
	rejected *prometheus.CounterVec
	// initializing counts watches sending their initial events, and
	// initTimeouts those that could not within the request timeout.
	initializing prometheus.Gauge
	initTimeouts prometheus.Counter

	rateLimited    *prometheus.CounterVec
	rateLimitNovel prometheus.Counter
	// unauthorized and forbidden count requests answered 401 and 403 (or
	// 500 when authorization failed), by outcome.
	unauthorized, forbidden *prometheus.CounterVec
	// retentionWrites counts stored writes by the retention rule that
	// chose their TTL.
	retentionWrites *prometheus.CounterVec
}

// newMetrics registers the server's metrics; rules are the retention
// rules' names, whose counters start at zero.
func newMetrics(reg *prometheus.Registry, store storage.Interface, rules []string) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_requests_total",
			Help: "API requests by verb, API group and HTTP status code.",
		}, []string{"verb", "group", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventsd_request_duration_seconds",
			Help:    "API request latency by verb and API group, watches excluded.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"verb", "group"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventsd_watchers",
			Help: "Open watch streams.",
		}),
		initializing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eventsd_watch_initializations",
			Help: "Watches sending their initial events (the state they start with); each holds a readOnly in-flight slot until they are sent.",
		}),
		initTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_watch_initialization_timeouts_total",
			Help: "Watches ended (or refused with 429 before they started) because their initial events could not be sent within the request timeout.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_rejected_requests_total",
			Help: "Requests refused with 429 because their class (readOnly or mutating) had too many in flight.",
		}, []string{"class"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_event_rate_limit_refusals_total",
			Help: "Event writes refused with 429 by the event rate limits, by limit type (Server, Namespace, User, SourceAndObject); a write several limits refuse counts for each.",
		}, []string{"type"}),
		rateLimitNovel: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventsd_event_rate_limit_novel_admissions_total",
			Help: "Event creates admitted although their SourceAndObject limit was reached, because no event for their object and reason was stored (the novelty rule).",
		}),
		unauthorized: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_unauthorized_requests_total",
			Help: "Requests refused with 401: rejected (no or unknown credentials) or error (an authenticator such as the token webhook failed).",
		}, []string{"outcome"}),
		forbidden: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_forbidden_requests_total",
			Help: "Requests not authorized: rejected (403, no authorizer allowed them) or error (500, an authorizer such as the webhook failed).",
		}, []string{"outcome"}),
		retentionWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_retention_rule_writes_total",
			Help: "Event writes stored (creates, updates and patches), by the --retention-config rule that chose their TTL: its name, or its index when unnamed; default for the --event-ttl of events no rule matches.",
		}, []string{"rule"}),
	}
	for _, r := range rules {
		m.retentionWrites.WithLabelValues(r)
	}
	cs := []prometheus.Collector{
		m.requests, m.latency, m.watchers, m.initializing, m.initTimeouts, m.rejected, m.rateLimited, m.rateLimitNovel, m.unauthorized, m.forbidden, m.retentionWrites,
		newStoreCollector(store),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// storeCollector exports the store's Stats and Revision. It reads Stats
// once per scrape: a Stats call can be costly (pebblestore's reads the
// database's metrics under its mutex).
type storeCollector struct {
	store                                                      storage.Interface
	events, expired, bytes, revision, commits, committedWrites *prometheus.Desc
}

func newStoreCollector(store storage.Interface) *storeCollector {
	return &storeCollector{
		store:           store,
		events:          prometheus.NewDesc("eventsd_stored_events", "Events currently stored.", nil, nil),
		expired:         prometheus.NewDesc("eventsd_expired_events_total", "Events deleted because their TTL passed, since start.", nil, nil),
		bytes:           prometheus.NewDesc("eventsd_storage_bytes", "Approximate bytes the store uses on disk.", nil, nil),
		revision:        prometheus.NewDesc("eventsd_storage_revision", "Revision of the last durable write.", nil, nil),
		commits:         prometheus.NewDesc("eventsd_storage_commits_total", "Durable commits (one fsync each) since start.", nil, nil),
		committedWrites: prometheus.NewDesc("eventsd_storage_committed_writes_total", "Writes carried by the durable commits since start; divided by commits, the mean group size.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.events, c.expired, c.bytes, c.revision, c.commits, c.committedWrites} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(st.Events))
	ch <- prometheus.MustNewConstMetric(c.expired, prometheus.CounterValue, float64(st.Expired))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(c.revision, prometheus.GaugeValue, float64(c.store.Revision()))
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(st.Commits))
	ch <- prometheus.MustNewConstMetric(c.committedWrites, prometheus.CounterValue, float64(st.CommittedWrites))
}

func (m *metrics) observe(v verb, group string, code int, d time.Duration) {
	if group == "" {
		group = "core"
	}
	m.requests.WithLabelValues(string(v), group, strconv.Itoa(code)).Inc()
	if v != verbWatch {
		m.latency.WithLabelValues(string(v), group).Observe(d.Seconds())
	}
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

// WriteHeader records the first status code.
func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush lets watches stream through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
