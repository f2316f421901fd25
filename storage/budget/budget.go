// Package budget is what both storage backends share to keep their stored
// events within a byte budget (eventsd's --max-storage-bytes): the
// low-water mark early expiry stops at, the metrics counting early
// expirations by retention rule, and the rate-limited log of them.
//
// Each backend measures its own bytes and chooses its own victims (the
// events closest to their expiry, first); a Budget only decides when to
// start and stop, and reports.
package budget

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// LowWaterPercent is the share of the budget early expiry brings the
// measured bytes down to once they exceed the budget: stopping at the
// budget itself would expire a few events at every write that follows,
// one round each; 10% of room lets many writes through per round.
const LowWaterPercent = 90

// logInterval bounds how often a round of early expirations is logged: a
// write storm against a full budget expires events every second.
const logInterval = 10 * time.Second

// DefaultRuleName is the rule early expirations are counted under when
// the store has no way to tell an event's retention rule (Options.RuleOf
// is nil): retention's name for events no rule matched.
const DefaultRuleName = "default"

// Metric names, the same on both backends.
const (
	ExpirationsMetric = "eventsd_storage_budget_expirations_total"
	BytesMetric       = "eventsd_storage_budget_bytes"
	LimitMetric       = "eventsd_storage_budget_limit_bytes"
)

// Options configure New.
type Options struct {
	// MaxBytes is the budget; New returns nil for 0 or less (no budget).
	MaxBytes int64
	// RuleOf names the retention rule that gave ev its TTL, for the
	// expirations metric; every event is DefaultRuleName when nil.
	RuleOf func(ev *corev1.Event) string
	// Registerer, when set, receives the metrics.
	Registerer prometheus.Registerer
	// Logger receives the rate-limited log of early expirations.
	Logger *slog.Logger
	// Clock times the log's rate limit.
	Clock clock.PassiveClock
}

// Budget decides when a store expires events early, and counts and logs
// those it does. Its methods are safe for concurrent use.
type Budget struct {
	max      int64
	ruleOf   func(*corev1.Event) string
	log      *slog.Logger
	logLimit *ratelog.Limiter

	expirations *prometheus.CounterVec
	bytes       prometheus.Gauge
	total       atomic.Int64
	busy        atomic.Bool
}

// New returns the budget of o, or nil when o.MaxBytes is not positive.
// Its metrics: ExpirationsMetric{rule}, the events expired early by the
// retention rule that gave them their TTL; BytesMetric, the bytes the
// store last measured; LimitMetric, the budget.
func New(o Options) (*Budget, error) {
	if o.MaxBytes <= 0 {
		return nil, nil
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	b := &Budget{max: o.MaxBytes, ruleOf: o.RuleOf, log: o.Logger, logLimit: ratelog.New(o.Clock, logInterval)}
	b.expirations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: ExpirationsMetric,
		Help: "Events expired before their TTL to keep the stored events within --max-storage-bytes, by the retention rule that gave them their TTL (default: none matched).",
	}, []string{"rule"})
	b.bytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BytesMetric,
		Help: "Bytes of the stored events as --max-storage-bytes counts them, as last measured.",
	})
	limit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: LimitMetric,
		Help: "The storage budget (--max-storage-bytes).",
	})
	limit.Set(float64(o.MaxBytes))
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{b.expirations, b.bytes, limit} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("storage budget: register metrics: %w", err)
			}
		}
	}
	return b, nil
}

// Max is the budget in bytes.
func (b *Budget) Max() int64 { return b.max }

// LowWater is what early expiry, once started, brings the bytes down to.
func (b *Budget) LowWater() int64 { return b.max / 100 * LowWaterPercent }

// Over reports whether measured bytes exceed the budget (and records them
// for BytesMetric).
func (b *Budget) Over(measured int64) bool {
	b.bytes.Set(float64(measured))
	return measured > b.max
}

// Excess is how many bytes early expiry must free from measured to reach
// the low-water mark (0 when it is there already).
func (b *Budget) Excess(measured int64) int64 {
	b.bytes.Set(float64(measured))
	return max(0, measured-b.LowWater())
}

// Begin marks the start of a round of early expiry, End its end.
func (b *Budget) Begin() { b.busy.Store(true) }

// End marks the end of a round of early expiry.
func (b *Budget) End() { b.busy.Store(false) }

// Busy reports whether a round of early expiry is under way.
func (b *Budget) Busy() bool { return b.busy.Load() }

// Expired counts ev, deleted early, under its rule.
func (b *Budget) Expired(ev *corev1.Event) {
	rule := DefaultRuleName
	if b.ruleOf != nil {
		rule = b.ruleOf(ev)
	}
	b.ExpiredRule(rule)
}

// ExpiredRule counts an event of the retention rule rule, deleted early.
func (b *Budget) ExpiredRule(rule string) {
	b.expirations.WithLabelValues(rule).Inc()
	b.total.Add(1)
}

// Expirations is the number of events expired early since the store
// opened.
func (b *Budget) Expirations() int64 { return b.total.Load() }

// Logged records the end of a round of n early expirations that took the
// measured bytes from before to after, and logs it at most once per logInterval (with the number of
// rounds left unlogged since).
func (b *Budget) Logged(n int, before, after int64) {
	b.bytes.Set(float64(after))
	if n == 0 {
		return
	}
	if ok, suppressed := b.logLimit.Allow(); ok {
		b.log.Warn("storage budget exceeded: expired the events closest to their expiry early",
			"expired", n, "bytesBefore", before, "bytesAfter", after, "maxStorageBytes", b.max,
			"lowWaterBytes", b.LowWater(), "roundsSuppressed", suppressed)
	}
}
