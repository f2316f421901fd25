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
}

func newMetrics(reg *prometheus.Registry, store storage.Interface) (*metrics, error) {
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
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_rejected_requests_total",
			Help: "Requests refused with 429 because their class (readOnly or mutating) had too many in flight.",
		}, []string{"class"}),
	}
	cs := []prometheus.Collector{
		m.requests, m.latency, m.watchers, m.rejected,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eventsd_stored_events", Help: "Events currently stored."},
			func() float64 { return float64(store.Stats().Events) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eventsd_expired_events_total", Help: "Events deleted because their TTL passed, since start."},
			func() float64 { return float64(store.Stats().Expired) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eventsd_storage_bytes", Help: "Approximate bytes the store uses on disk."},
			func() float64 { return float64(store.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eventsd_storage_revision", Help: "Revision of the last durable write."},
			func() float64 { return float64(store.Revision()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eventsd_storage_commits_total", Help: "Durable commits (one fsync each) since start."},
			func() float64 { return float64(store.Stats().Commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eventsd_storage_committed_writes_total", Help: "Writes carried by the durable commits since start; divided by commits, the mean group size."},
			func() float64 { return float64(store.Stats().CommittedWrites) }),
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

// Flush lets watches stream through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
