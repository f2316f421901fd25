package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kubevents/kubevents/internal/sinkretry"
	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// Defaults of SinkSpec and Options. Each says why it is what it is.
const (
	// DefaultMaxBatch bounds the records of one Send: big enough that a
	// storm of 1,000 changes/s costs a few requests a second, small enough
	// that a batch sent again after a failure is cheap.
	DefaultMaxBatch = 500
	// DefaultMaxWait is how long a record waits for others to share its
	// batch: the sink's lag while writes are sparse.
	DefaultMaxWait = time.Second
	// DefaultMinBackoff and DefaultMaxBackoff space the attempts of a
	// failing Send (doubling, with jitter): a sink down for 30 s is
	// retried about every 30 s at worst, and comes back within that.
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultCursorInterval is how often, at most, a sink's cursor is
	// saved when it moves only past changes the sink filters out: a
	// restart then re-reads at most this much history, and an idle store
	// costs no writes.
	DefaultCursorInterval = 5 * time.Second
	// DefaultLagSample is how often the store's revision is sampled to
	// tell how old a sink's oldest unacknowledged change is.
	DefaultLagSample = time.Second
	// rejectedAttempts is how many times a batch the destination refuses
	// (ErrRejected) is sent before it is dropped: a refusal may be a
	// transient misconfiguration of the receiver, but retrying it forever
	// would stop the sink for good.
	rejectedAttempts = 3
	// progressInterval asks the store for a bookmark when nothing
	// happened for this long, so the cursor of a sink whose filter
	// matches nothing still moves and the history behind it can go.
	progressInterval = time.Second
	// leaderName is the leadership exporters on one shared store (etcd)
	// elect: one replica exports, or every change would go out once per
	// replica.
	leaderName = "export"
	// maxLagSamples bounds the revision samples kept for the lag in
	// seconds: at one a second, a day.
	maxLagSamples = 86_400
)

// Store is what the exporter needs of the event store: watches from a
// revision, the revision reached, the oldest revision kept, and the
// sinks' cursors. A store that also implements storage.HistoryHolder
// keeps its history back to the slowest cursor; one that implements
// storage.Elector is shared by replicas, of which only the leader exports.
type Store interface {
	Watch(ctx context.Context, opts storage.WatchOptions) (storage.Watcher, error)
	Revision() int64
	Stats() storage.Stats
	storage.CursorStore
}

// SinkSpec is one configured sink.
type SinkSpec struct {
	// Name names the sink in metrics, logs and its cursor: a DNS label.
	Name string
	// Type is the kind of sink (webhook, otlp, file), for logs.
	Type string
	// Sink delivers the batches. The exporter closes it when Run returns.
	Sink Sink
	// Filter selects the changes the sink gets.
	Filter Filter
	// MaxBatch bounds the records of one Send; DefaultMaxBatch when 0.
	MaxBatch int
	// MaxWait is how long a record waits for more to share its batch;
	// DefaultMaxWait when 0.
	MaxWait time.Duration
}

// Options configure an Exporter. The zero value of each optional field
// means its default.
type Options struct {
	// Store is read from, and keeps the cursors. Required.
	Store Store
	// Sinks are the sinks to export to. Required.
	Sinks []SinkSpec
	// Clock drives batching, backoff, cursor saves and lag.
	Clock clock.WithTicker
	// Registerer receives the metrics; none are registered when nil.
	Registerer prometheus.Registerer
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff space the attempts of a failing Send.
	MinBackoff, MaxBackoff time.Duration
	// CursorInterval bounds how often an idle sink's cursor is saved.
	CursorInterval time.Duration
	// LagSample is how often the store's revision is sampled for lag.
	LagSample time.Duration
}

// Exporter tees the store's changes to its sinks. Create it with New and
// run it with Run.
type Exporter struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	sinks   []*sinkRunner
	samples *lagSamples
}

// New checks opts and registers the metrics.
func New(opts Options) (*Exporter, error) {
	if opts.Store == nil {
		return nil, errors.New("export: no store")
	}
	if len(opts.Sinks) == 0 {
		return nil, errors.New("export: no sinks")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.CursorInterval <= 0 {
		opts.CursorInterval = DefaultCursorInterval
	}
	if opts.LagSample <= 0 {
		opts.LagSample = DefaultLagSample
	}
	e := &Exporter{opts: opts, log: opts.Logger, samples: &lagSamples{}}
	seen := map[string]bool{}
	for i, spec := range opts.Sinks {
		if msgs := validation.IsDNS1123Label(spec.Name); len(msgs) > 0 {
			return nil, fmt.Errorf("export: sinks[%d].name %q: %s", i, spec.Name, msgs[0])
		}
		if seen[spec.Name] {
			return nil, fmt.Errorf("export: sinks[%d].name %q: duplicate", i, spec.Name)
		}
		seen[spec.Name] = true
		if spec.Sink == nil {
			return nil, fmt.Errorf("export: sink %q: no sink", spec.Name)
		}
		if spec.MaxBatch <= 0 {
			spec.MaxBatch = DefaultMaxBatch
		}
		if spec.MaxWait <= 0 {
			spec.MaxWait = DefaultMaxWait
		}
		e.sinks = append(e.sinks, &sinkRunner{e: e, spec: spec, log: opts.Logger.With("sink", spec.Name, "sinkType", spec.Type)})
	}
	m, err := newMetrics(e, opts.Registerer)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	for _, r := range e.sinks {
		r.m = m.forSink(r.spec.Name)
	}
	return e, nil
}

// Run exports until ctx ends, then closes the sinks and returns nil. On a
// store shared by replicas it first waits to lead, and stops exporting
// (to wait again) when it loses the leadership.
func (e *Exporter) Run(ctx context.Context) error {
	defer func() {
		for _, r := range e.sinks {
			if err := r.spec.Sink.Close(); err != nil {
				r.log.Warn("export: closing the sink", "err", err)
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.sampleLoop(ctx)
	}()
	defer wg.Wait()
	elector, shared := e.opts.Store.(storage.Elector)
	for attempt := 1; ctx.Err() == nil; {
		lctx, release := ctx, func() {}
		if shared {
			var err error
			lctx, release, err = elector.Lead(ctx, leaderName)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				e.log.Warn("export: cannot run for leadership; trying again", "err", err)
				if !e.sleep(ctx, e.backoff(attempt, nil)) {
					return nil
				}
				attempt++
				continue
			}
			attempt = 1
			e.log.Info("export: leading; exporting from this replica")
		}
		e.metrics.leader.Set(1)
		e.runSinks(lctx)
		e.metrics.leader.Set(0)
		release()
		if ctx.Err() == nil {
			e.log.Warn("export: lost the leadership; another replica exports")
		}
	}
	return nil
}

// runSinks runs every sink until ctx ends.
func (e *Exporter) runSinks(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range e.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(ctx)
		}()
	}
	wg.Wait()
}

// backoff is the wait after the failed attempt number attempt: doubling
// from MinBackoff to MaxBackoff with jitter, and at least what the sink's
// destination asked for (export.RetryAfter of err, as the webhook sink's
// answers to 429 and 503 carry), up to MaxBackoff.
func (e *Exporter) backoff(attempt int, err error) time.Duration {
	d := sinkretry.Policy{Initial: e.opts.MinBackoff, Max: e.opts.MaxBackoff}.WithDefaults().Delay(attempt, err)
	return max(d, min(RetryAfter(err), e.opts.MaxBackoff))
}

// sleep waits d on the clock; false when ctx ended first.
func (e *Exporter) sleep(ctx context.Context, d time.Duration) bool {
	t := e.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// holdHistory asks the store to keep the history the slowest sink needs.
func (e *Exporter) holdHistory() {
	h, ok := e.opts.Store.(storage.HistoryHolder)
	if !ok {
		return
	}
	slowest := int64(0)
	for _, r := range e.sinks {
		if a := r.acked.Load(); a > 0 && (slowest == 0 || a < slowest) {
			slowest = a
		}
	}
	if slowest > 0 {
		h.HoldHistory(slowest)
	}
}

// sampleLoop samples the store's revision for the lag in seconds.
func (e *Exporter) sampleLoop(ctx context.Context) {
	t := e.opts.Clock.NewTicker(e.opts.LagSample)
	defer t.Stop()
	e.samples.add(e.opts.Clock.Now(), e.opts.Store.Revision())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		slowest := int64(-1)
		for _, r := range e.sinks {
			if a := r.acked.Load(); slowest < 0 || a < slowest {
				slowest = a
			}
		}
		e.samples.add(e.opts.Clock.Now(), e.opts.Store.Revision())
		e.samples.prune(slowest)
	}
}

// lagSamples are (time, store revision) samples, oldest first: the first
// sample past a cursor tells since when the change after it has waited.
type lagSamples struct {
	mu sync.Mutex
	s  []lagSample
}

type lagSample struct {
	at  time.Time
	rev int64
}

func (l *lagSamples) add(at time.Time, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.s); n > 0 && l.s[n-1].rev == rev {
		return // nothing new: the older sample is the one that counts
	}
	if len(l.s) >= maxLagSamples {
		l.s = append(l.s[:0], l.s[len(l.s)/2:]...)
	}
	l.s = append(l.s, lagSample{at: at, rev: rev})
}

// prune drops the samples no cursor at or past acked needs: all but the
// newest one at or before acked.
func (l *lagSamples) prune(acked int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 0
	for i+1 < len(l.s) && l.s[i+1].rev <= acked {
		i++
	}
	l.s = append(l.s[:0], l.s[i:]...)
}

// age returns how long the store has had changes past acked (0 when it
// has none), as sampled: the time since the first sample past acked.
func (l *lagSamples) age(now time.Time, acked int64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.s {
		if s.rev > acked {
			return now.Sub(s.at)
		}
	}
	return 0
}

// isChange reports whether t is a change (not a bookmark or an error).
func isChange(t watch.EventType) bool {
	return t == watch.Added || t == watch.Modified || t == watch.Deleted
}
