package events

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults. Each says why.
const (
	// DefaultFinishAfter is the redesign's finishTime: a series idle this
	// long is finished and its final count written; a singleton is
	// forgotten.
	DefaultFinishAfter = 6 * time.Minute
	// DefaultHeartbeatInterval is the redesign's refreshTime: an ongoing
	// series' count is written this often, which also renews the event's
	// TTL on the server (1 h by default).
	DefaultHeartbeatInterval = 30 * time.Minute
	// DefaultMaxQueued bounds the series waiting for a write, as client-go
	// bounds its queue (maxQueuedEvents).
	DefaultMaxQueued = 1000
	// DefaultMaxSeries bounds the events tracked at once, so memory stays
	// bounded in a storm of distinct events.
	DefaultMaxSeries = 10000
	// DefaultShutdownTimeout bounds how long Shutdown writes pending
	// counts.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultResumeTimeout bounds the list a recorder does to resume its
	// series.
	DefaultResumeTimeout = 30 * time.Second
	// LiveSeriesFirstWrite is the age of a series (since its first
	// occurrence) at which live counting (WithLiveSeriesCounts) first
	// writes its count; later writes come whenever the age has doubled
	// since the last write (20 s, 40 s, ...) until the spacing reaches the
	// heartbeat interval: a stored count lags the truth by at most about
	// half the series' age, at O(log duration) writes.
	LiveSeriesFirstWrite = 10 * time.Second
	// NoteLimit is the server's limit on note, in bytes.
	NoteLimit = 1024
	// ReportingInstanceLimit is the server's limit on reportingInstance.
	ReportingInstanceLimit = 128
	// truncationMarker ends a truncated note.
	truncationMarker = "...(truncated)"
	// watcherQueue bounds each StartEventWatcher / StartLogging queue.
	watcherQueue = 1000
	// dropLogInterval is the least time between two log lines about
	// drops, of any cause; the line carries how many it stands for.
	dropLogInterval = 10 * time.Second
	// dropLogKey is the one rate-limit key every drop is logged under, so
	// that all causes share one limiter.
	dropLogKey = "events"
)

// RetryPolicy is how failed writes are retried: up to MaxAttempts in all,
// the first delay Initial, doubling up to Max, each spread by ±Jitter of
// itself, and never shorter than a Retry-After the server gave. Zero fields
// take the defaults (8 attempts, 1 s, 30 s, 0.25).
type RetryPolicy struct {
	MaxAttempts  int
	Initial, Max time.Duration
	Jitter       float64
}

// Option configures a Broadcaster.
type Option func(*options)

type options struct {
	clock           clock.WithTicker
	logger          klog.Logger
	registerer      prometheus.Registerer
	retry           RetryPolicy
	finishAfter     time.Duration
	heartbeat       time.Duration
	maxQueued       int
	maxSeries       int
	shutdownTimeout time.Duration
	resume          bool
	resumeTimeout   time.Duration
	stateAnnotation bool
	liveCounts      bool
	hostname        string
}

func defaultOptions() options {
	return options{
		clock:           clock.RealClock{},
		logger:          klog.Background(),
		finishAfter:     DefaultFinishAfter,
		heartbeat:       DefaultHeartbeatInterval,
		maxQueued:       DefaultMaxQueued,
		maxSeries:       DefaultMaxSeries,
		shutdownTimeout: DefaultShutdownTimeout,
		resume:          true,
		resumeTimeout:   DefaultResumeTimeout,
		stateAnnotation: true,
		liveCounts:      true,
	}
}

// WithClock sets the clock for every timestamp and timer.
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger for drops and errors.
func WithLogger(l klog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMetrics registers the broadcaster's metrics with reg.
func WithMetrics(reg prometheus.Registerer) Option { return func(o *options) { o.registerer = reg } }

// WithRetryPolicy sets how failed writes are retried.
func WithRetryPolicy(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// WithFinishAfter sets how long a series stays idle before it is finished.
func WithFinishAfter(d time.Duration) Option { return func(o *options) { o.finishAfter = d } }

// WithHeartbeatInterval sets how often an ongoing series' count is written.
func WithHeartbeatInterval(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// WithQueueSize bounds the events waiting for a write; a new event beyond
// it is dropped and counted.
func WithQueueSize(n int) Option { return func(o *options) { o.maxQueued = n } }

// WithMaxSeries bounds the events tracked at once.
func WithMaxSeries(n int) Option { return func(o *options) { o.maxSeries = n } }

// WithShutdownTimeout bounds how long Shutdown writes pending counts.
func WithShutdownTimeout(d time.Duration) Option { return func(o *options) { o.shutdownTimeout = d } }

// WithResume turns resuming series from a list of the recorder's earlier
// events on (the default, when the sink can list) or off. A recorder
// resumes what its reporting controller and instance wrote, so the
// instance (controller and host name; see WithHostname) must identify one
// process: two live recorders sharing it would each count the other's
// series as their own.
func WithResume(on bool) Option { return func(o *options) { o.resume = on } }

// WithSeriesStateAnnotation turns the SeriesStateAnnotation on (the
// default) or off; off, series patches are byte for byte client-go's.
func WithSeriesStateAnnotation(on bool) Option { return func(o *options) { o.stateAnnotation = on } }

// WithLiveSeriesCounts turns live series counts on (the default) or off.
// On, an ongoing series' count is also written as the series ages: first
// at LiveSeriesFirstWrite, then whenever its age has doubled since the
// last write, the spacing capped at the heartbeat interval, and only when
// the count changed. Off, the redesign's strict schedule: the count is
// written when the series starts, every heartbeat interval, when it
// finishes and at Shutdown.
func WithLiveSeriesCounts(on bool) Option { return func(o *options) { o.liveCounts = on } }

// WithHostname sets the host name in reporting instances (default
// os.Hostname()).
func WithHostname(h string) Option { return func(o *options) { o.hostname = h } }
