package record

import (
	"context"
	"time"

	"github.com/kubevents/kubevents/internal/sinkretry"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of the broadcaster's options.
const (
	// DefaultQueueSize bounds each sink's and watcher's queue of events
	// waiting to be processed. It is client-go's maxQueuedEvents: enough
	// for a burst while the sink is briefly slow, and at about 1 KiB per
	// event a blocked sink holds at most about 1 MiB.
	DefaultQueueSize = 1000
	// DefaultShutdownTimeout bounds how long Shutdown spends writing what
	// is queued and pending. It leaves most of a typical 30 s termination
	// grace period to the rest of the program.
	DefaultShutdownTimeout = 10 * time.Second
	// dropLogInterval is the least time between two log lines about the
	// same kind of drop; the line carries how many it stands for.
	dropLogInterval = 10 * time.Second
)

// Defaults of RetryPolicy, from internal/sinkretry: eight attempts spaced
// 1, 2, 4, 8, 16, 30 and 30 s apart (±25%), about 90 s in all, comparable
// to client-go's 100-110 s over 12 attempts.
const (
	DefaultMaxAttempts = sinkretry.DefaultMaxAttempts
	DefaultInitial     = sinkretry.DefaultInitial
	DefaultMax         = sinkretry.DefaultMax
	DefaultJitter      = sinkretry.DefaultJitter
)

// RetryPolicy is the bounded exponential backoff for writes that fail with
// a transport error, 429 or 5xx; it mirrors internal/sinkretry.Policy.
// Zero fields take the defaults above.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts per write, the first
	// included.
	MaxAttempts int
	// Initial is the wait after the first failed attempt; each later
	// wait doubles, up to Max. A Retry-After from the server lengthens a
	// wait to at least that.
	Initial, Max time.Duration
	// Jitter spreads each wait uniformly by ±Jitter of itself; negative
	// means no jitter.
	Jitter float64
}

func (p RetryPolicy) internal() sinkretry.Policy {
	return sinkretry.Policy(p).WithDefaults()
}

// Option configures NewBroadcaster.
type Option func(*config)

// BroadcasterOption is client-go's name for Option.
type BroadcasterOption = Option

type config struct {
	correlator      CorrelatorOptions
	ctx             context.Context
	clock           clock.WithTicker
	logger          *klog.Logger
	registerer      prometheus.Registerer
	retry           RetryPolicy
	queueSize       int
	shutdownTimeout time.Duration
	resume          bool
}

// WithCorrelatorOptions sets the aggregation, deduplication and spam-filter
// options each sink's correlator uses.
func WithCorrelatorOptions(o CorrelatorOptions) Option {
	return func(c *config) { c.correlator = o }
}

// WithContext ties the broadcaster to ctx: cancelling it shuts the
// broadcaster down as Shutdown does, and its logger (klog.FromContext) is
// the default logger.
func WithContext(ctx context.Context) Option {
	return func(c *config) { c.ctx = ctx }
}

// WithSleepDuration is client-go's option for the wait between write
// attempts; here it sets the retry policy's initial delay (later waits
// still double). Zero or negative retries without waiting.
func WithSleepDuration(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = time.Nanosecond
		}
		c.retry.Initial = d
	}
}

// WithClock sets the clock for everything timed: event timestamps and
// names, aggregation windows, token buckets, retry backoff, deferred
// flushes, drop-log rate limits and the shutdown deadline. The default is
// CorrelatorOptions.Clock when that is a clock.WithTicker, else the real
// clock.
func WithClock(clk clock.WithTicker) Option {
	return func(c *config) { c.clock = clk }
}

// WithLogger sets the logger for the broadcaster's own messages (write
// failures, drops, StartStructuredLogging) and the recorders' default. The
// default is klog.FromContext of WithContext's context, else
// klog.Background().
func WithLogger(l klog.Logger) Option {
	return func(c *config) { c.logger = &l }
}

// WithMetrics registers the broadcaster's metrics with reg. A metric that
// is already registered there (by another broadcaster) is shared.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(c *config) { c.registerer = reg }
}

// WithRetryPolicy sets the backoff for failed writes, replacing any
// WithSleepDuration before it.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *config) { c.retry = p }
}

// WithQueueSize bounds each sink's and watcher's queue (DefaultQueueSize
// when n <= 0).
func WithQueueSize(n int) Option {
	return func(c *config) { c.queueSize = n }
}

// WithShutdownTimeout bounds how long Shutdown writes queued and pending
// events (DefaultShutdownTimeout when d <= 0), on the broadcaster's clock.
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *config) { c.shutdownTimeout = d }
}

// WithResume makes each sink rebuild its deduplication state from the
// sink's stored events, so that a restarted component keeps counting on its
// existing events instead of creating new ones. When a sink first sees an
// event from a source (component and host), it lists that component's
// events (fieldSelector source=<component>, filtered by host) and seeds its
// cache with their names and counts. The sink must be a
// *typedcorev1.EventSinkImpl or implement Lister; otherwise resuming is
// skipped with a log line.
func WithResume(on bool) Option {
	return func(c *config) { c.resume = on }
}

// passiveClock runs a caller's passive clock (CorrelatorOptions.Clock) for
// Now and Since, and the real clock for timers, which a passive clock
// cannot provide.
type passiveClock struct {
	clock.PassiveClock
	clock.RealClock
}

// Now is the passive clock's time.
func (p passiveClock) Now() time.Time { return p.PassiveClock.Now() }

// Since is the passive clock's elapsed time.
func (p passiveClock) Since(t time.Time) time.Duration { return p.PassiveClock.Since(t) }
