package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/storage"
)

// SourceResourceVersionAnnotation is set on every mirrored event: the
// source's resourceVersion of the change the event was last written from.
// A change whose resourceVersion is not newer is already applied.
const SourceResourceVersionAnnotation = "events.kubevents.io/source-resource-version"

// DeletionPolicy says what a deletion in the source does to the mirrored
// event.
type DeletionPolicy string

// Deletion policies.
const (
	// DeletionsKeep keeps the event until eventsd's own retention expires
	// it: the source's deletions are mostly its TTL, which a mirror is
	// there to outlive.
	DeletionsKeep DeletionPolicy = "keep"
	// DeletionsPropagate deletes it too; a relist deletes the mirrored
	// events the source no longer has.
	DeletionsPropagate DeletionPolicy = "propagate"
)

// InitialSync says how the mirror reads the source's state.
type InitialSync string

// Initial sync modes.
const (
	// InitialSyncAuto asks for a WatchList stream and lists page by page
	// if the source refuses it.
	InitialSyncAuto InitialSync = "auto"
	// InitialSyncWatchList uses WatchList only.
	InitialSyncWatchList InitialSync = "watchlist"
	// InitialSyncList lists page by page, then watches.
	InitialSyncList InitialSync = "list"
)

// Defaults of Options. Each says why it is what it is.
const (
	// DefaultWorkers apply changes concurrently (each key always on the
	// same worker): a store's write waits for its sync to disk, so the
	// rate a mirror follows is about workers per fsync. With eight, each
	// waiting on its own fsync, a sync of 100,000 events took 49 s and
	// lag passed 250 ms at 360 changes/s; with 64 sharing group commits,
	// 21 s and 210 ms at 400/s (BENCHMARKS.md, "Mirror"). A worker idle
	// costs a goroutine.
	DefaultWorkers = 64
	// DefaultPageSize is the page of a paginated initial list, as
	// client-go's reflectors ask: small enough for the source's memory.
	DefaultPageSize = 500
	// DefaultMinBackoff and DefaultMaxBackoff space the attempts against
	// a source that fails or refuses (doubling, with jitter), as
	// client-go's reflectors back off: a source down for a minute is
	// tried again within 30 s of its return.
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultCursorInterval is how often, at most, the cursor is saved:
	// a restart re-reads at most this much of the source's history (and
	// skips it), while a busy source costs one extra write a second.
	DefaultCursorInterval = time.Second
	// DefaultSourceTTL is kube-apiserver's default --event-ttl: events
	// the source created while the mirror was away longer than this may
	// have expired before it came back.
	DefaultSourceTTL = time.Hour
	// DefaultReadyGrace is how long the watch of the source may be down
	// before the mirror reports itself not ready: a watch the source
	// closes is resumed within a second, which should not flap /readyz.
	DefaultReadyGrace = 30 * time.Second
	// healthyStream is how long a watch must have lasted for the backoff
	// to start again from its minimum.
	healthyStream = 30 * time.Second
	// workerQueue bounds the changes queued for one worker: beyond it
	// the mirror stops reading its watch until the store catches up.
	workerQueue = 256
	// cursorName and caughtUpName are the store cursors the mirror keeps:
	// the source resourceVersion up to which every change is applied, and
	// the Unix time at which the mirror last had applied everything it
	// had received.
	cursorName   = "mirror"
	caughtUpName = "mirror-caught-up"
	// leaderName is the leadership mirrors on one shared store (etcd)
	// elect: one replica follows the source.
	leaderName = "mirror"
)

// Options configure a Mirror. The zero value of each optional field means
// its default.
type Options struct {
	// Source is the cluster followed. Required.
	Source Source
	// Store receives the events and keeps the cursor. Required.
	Store Store
	// SourceName names the source in logs and in the read-only API's
	// answers (a kubeconfig context, or "in-cluster").
	SourceName string
	// TTL gives each mirrored write its TTL (eventsd's retention rules and
	// --event-ttl); nil or 0: the store's default.
	TTL func(*corev1.Event) time.Duration
	// Stored, when set, is called with each event the mirror has created
	// or updated in the store, once stored (eventsd counts them by the
	// retention rule that chose their TTL, as it counts its API's writes).
	Stored func(*corev1.Event)
	// Deletions is DeletionsKeep (the default) or DeletionsPropagate.
	Deletions DeletionPolicy
	// InitialSync is InitialSyncAuto (the default), InitialSyncWatchList
	// or InitialSyncList.
	InitialSync InitialSync
	// SourceTTL is the source's event TTL, to measure what may have been
	// missed; DefaultSourceTTL when 0.
	SourceTTL time.Duration
	// Workers apply changes; DefaultWorkers when 0.
	Workers int
	// PageSize is the limit of each page of a paginated list.
	PageSize int64
	// MinBackoff and MaxBackoff space attempts against a failing source.
	MinBackoff, MaxBackoff time.Duration
	// CursorInterval bounds how often the cursor is saved.
	CursorInterval time.Duration
	// ReadyGrace is how long the watch may be down before Check fails.
	ReadyGrace time.Duration
	// Clock drives backoff, cursor saves, lag and readiness.
	Clock clock.WithTicker
	// Registerer receives the metrics; none are registered when nil.
	Registerer prometheus.Registerer
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// SourceID identifies the source (eventsd gives its server's URL):
	// CheckStore keeps it in the store beside the cursor, so that the
	// cursor of one source is never resumed on another. Empty: the
	// source is not recorded nor compared.
	SourceID string
	// AllowExistingEvents lets CheckStore go on with a store that holds
	// events the mirror did not write (no cursor), or the cursor of
	// another source (which it then drops: the new source is read from
	// its start).
	AllowExistingEvents bool
	// CheckSource, when set, is called before the mirror first reads the
	// source, and after each failure until it succeeds. An error wrapping
	// ErrRefused stops the mirror (Run returns it); others are retried as
	// the source's failures are. eventsd refuses to mirror itself with it.
	CheckSource func(ctx context.Context) error
}

// ErrRefused is wrapped by the errors of a source the mirror must not
// follow (Options.CheckSource) and of a store it must not write into
// (CheckStore): they are not retried.
var ErrRefused = errors.New("mirror: refused")

func (o Options) withDefaults() Options {
	if o.Deletions == "" {
		o.Deletions = DeletionsKeep
	}
	if o.InitialSync == "" {
		o.InitialSync = InitialSyncAuto
	}
	if o.SourceTTL <= 0 {
		o.SourceTTL = DefaultSourceTTL
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.CursorInterval <= 0 {
		o.CursorInterval = DefaultCursorInterval
	}
	if o.ReadyGrace <= 0 {
		o.ReadyGrace = DefaultReadyGrace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SourceName == "" {
		o.SourceName = "source"
	}
	return o
}

// Mirror follows a source's events into a store. Create it with New and
// run it with Run.
type Mirror struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	// dropLog rate-limits the log of changes the store refused for good.
	dropLog *ratelog.Limiter

	mu sync.Mutex
	// leading: this replica runs the mirror (always, on a store without
	// an Elector).
	leading bool
	// synced: the source's state has been read since the mirror started
	// leading (a relist unsets it until it is done).
	synced bool
	// live: a watch of the source is open; downSince is when the last
	// one ended (or the mirror started).
	live      bool
	downSince time.Time
	// caughtUp is the last time every change received had been applied.
	caughtUp time.Time
	// latestRV is the newest source resourceVersion the mirror has heard
	// of (a change, a bookmark, a list), for the lag in revisions.
	latestRV int64
	// applier is the running applier, for the metrics.
	applier *applier
}

var _ healthz.HealthChecker = (*Mirror)(nil)

// New checks opts and registers the metrics.
func New(opts Options) (*Mirror, error) {
	if opts.Source == nil || opts.Store == nil {
		return nil, errors.New("mirror: Options.Source and Options.Store are required")
	}
	switch opts.Deletions {
	case "", DeletionsKeep, DeletionsPropagate:
	default:
		return nil, fmt.Errorf("mirror: unknown deletion policy %q (keep or propagate)", opts.Deletions)
	}
	switch opts.InitialSync {
	case "", InitialSyncAuto, InitialSyncWatchList, InitialSyncList:
	default:
		return nil, fmt.Errorf("mirror: unknown initial sync %q (auto, watchlist or list)", opts.InitialSync)
	}
	opts = opts.withDefaults()
	m := &Mirror{opts: opts, log: opts.Logger.With("source", opts.SourceName), dropLog: ratelog.New(opts.Clock, 10*time.Second)}
	m.downSince = opts.Clock.Now()
	// Alone on its store, the mirror leads from the start: it is not
	// ready until it has read the source.
	_, shared := opts.Store.(storage.Elector)
	m.leading = !shared
	var err error
	if m.metrics, err = newMetrics(opts.Registerer, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Name implements healthz.HealthChecker: /readyz's check is "mirror".
func (m *Mirror) Name() string { return "mirror" }

// Check implements healthz.HealthChecker: it fails while the mirror leads
// but has not read the source's state yet, or while its watch of the
// source has been down for longer than ReadyGrace. A replica that does
// not lead is ready: it serves what the leader mirrors.
func (m *Mirror) Check(*http.Request) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !m.leading:
		return nil
	case !m.synced:
		return fmt.Errorf("the mirror of %s has not read the source's events yet", m.opts.SourceName)
	case !m.live && m.opts.Clock.Since(m.downSince) > m.opts.ReadyGrace:
		return fmt.Errorf("the mirror of %s has not been watching the source for %v: it is behind", m.opts.SourceName,
			m.opts.Clock.Since(m.downSince).Truncate(time.Second))
	}
	return nil
}

// Run follows the source until ctx ends; it returns nil then. On a store
// that is a storage.Elector, it mirrors only while this replica leads.
func (m *Mirror) Run(ctx context.Context) error {
	el, ok := m.opts.Store.(storage.Elector)
	if !ok {
		m.setLeading(true)
		return m.lead(ctx)
	}
	for ctx.Err() == nil {
		leading, release, err := el.Lead(ctx, leaderName)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("mirror: electing the replica that mirrors: %w", err)
		}
		m.log.Info("mirroring on this replica")
		m.setLeading(true)
		err = m.lead(leading)
		m.setLeading(false)
		release()
		if err != nil {
			return err
		}
		if ctx.Err() == nil {
			m.log.Warn("no longer the replica that mirrors; standing by")
		}
	}
	return nil
}

func (m *Mirror) setLeading(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leading, m.synced, m.live = on, false, false
	m.downSince = m.opts.Clock.Now()
}

// lead mirrors until ctx ends, or until CheckSource refuses the source
// (its error is returned).
func (m *Mirror) lead(ctx context.Context) error {
	// Before anything is read from the source, so that nothing of a
	// refused one is applied.
	if err := m.checkSource(ctx); err != nil {
		return err
	}
	cursor, caughtUp, ok := m.loadCursor(ctx)
	if !ok {
		return nil
	}
	a := newApplier(ctx, m)
	defer a.stop()
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		m.saveCursors(ctx, a)
	}()
	defer func() {
		a.stop()
		<-saverDone
	}()

	rv, reason := "", "start"
	if cursor > 0 {
		rv = strconv.FormatInt(cursor, 10)
		m.mu.Lock()
		m.synced = true // what was mirrored before is served; the watch resumes
		m.mu.Unlock()
		m.log.Info("resuming the watch of the source", "resourceVersion", rv, "caughtUp", caughtUp)
	}
	if !caughtUp.IsZero() {
		m.mu.Lock()
		m.caughtUp = caughtUp
		m.mu.Unlock()
	}
	backoff := m.opts.MinBackoff
	for ctx.Err() == nil {
		var (
			w       watch.Interface
			initial *initialState
			err     error
		)
		if rv == "" {
			w, initial, rv, err = m.startSync(ctx, a, reason)
		} else {
			w, err = m.opts.Source.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		}
		started := m.opts.Clock.Now()
		if err == nil {
			m.setLive(true)
			rv, err = m.follow(ctx, w, a, rv, initial)
			w.Stop()
			m.setLive(false)
		}
		if ctx.Err() != nil {
			return nil
		}
		if isExpired(err) {
			m.relistAfterExpiry(rv)
			rv, reason = "", "expired"
			continue
		}
		if err == nil {
			// The source ended the watch (its timeout): resume at once.
			m.metrics.reconnects.Inc()
			backoff = m.opts.MinBackoff
			continue
		}
		if m.opts.Clock.Since(started) > healthyStream {
			backoff = m.opts.MinBackoff
		}
		m.countSourceError(err)
		m.log.Warn("the source failed; trying again", "err", err, "resourceVersion", rv, "retryIn", backoff)
		if !m.sleep(ctx, backoff+rand.N(backoff/2+1)) {
			return nil
		}
		m.metrics.reconnects.Inc()
		backoff = min(2*backoff, m.opts.MaxBackoff)
	}
	return nil
}

// checkSource asks Options.CheckSource, if set, until it answers: its
// refusal (ErrRefused) is returned, other failures are counted, logged
// and asked again after a backoff, as the source's. It returns nil when
// the source is accepted or ctx ended.
func (m *Mirror) checkSource(ctx context.Context) error {
	if m.opts.CheckSource == nil {
		return nil
	}
	backoff := m.opts.MinBackoff
	for ctx.Err() == nil {
		err := m.opts.CheckSource(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil || errors.Is(err, ErrRefused) {
			return err
		}
		m.countSourceError(err)
		m.log.Warn("the source failed; trying again", "err", err, "retryIn", backoff)
		if !m.sleep(ctx, backoff+rand.N(backoff/2+1)) {
			return nil
		}
		backoff = min(2*backoff, m.opts.MaxBackoff)
	}
	return nil
}

// loadCursor reads the saved cursor and caught-up time, retrying while
// the store fails; ok is false when ctx ended first.
func (m *Mirror) loadCursor(ctx context.Context) (cursor int64, caughtUp time.Time, ok bool) {
	backoff := m.opts.MinBackoff
	for {
		var err error
		var found bool
		cursor, found, err = m.opts.Store.Cursor(ctx, cursorName)
		if err == nil {
			var at int64
			if at, found, err = m.opts.Store.Cursor(ctx, caughtUpName); err == nil {
				if found && at > 0 {
					caughtUp = time.Unix(at, 0)
				}
				return cursor, caughtUp, true
			}
		}
		m.log.Warn("reading the mirror's cursor from the store; trying again", "err", err, "retryIn", backoff)
		if !m.sleep(ctx, backoff) {
			return 0, time.Time{}, false
		}
		backoff = min(2*backoff, m.opts.MaxBackoff)
	}
}

func (m *Mirror) setLive(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live = on
	if !on {
		m.downSince = m.opts.Clock.Now()
	}
}

// sleep waits d on the clock; false if ctx ended first.
func (m *Mirror) sleep(ctx context.Context, d time.Duration) bool {
	t := m.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// isExpired reports whether err is the source's 410: its history no
// longer reaches the resourceVersion asked for.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// countSourceError counts a failed request or stream by HTTP code (0 for
// transport errors).
func (m *Mirror) countSourceError(err error) {
	code := 0
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		code = int(se.Status().Code)
	}
	m.metrics.sourceErrors.WithLabelValues(strconv.Itoa(code)).Inc()
}

// relistAfterExpiry counts and logs a relist forced by the source's
// compaction, and the gap it may leave: events the source created and
// deleted (its TTL) while the mirror was behind cannot be mirrored.
func (m *Mirror) relistAfterExpiry(rv string) {
	m.mu.Lock()
	since := m.caughtUp
	m.synced = false
	m.mu.Unlock()
	now := m.opts.Clock.Now()
	if since.IsZero() {
		m.log.Warn("the source no longer has the history after the mirror's cursor (410 Gone): listing it again", "resourceVersion", rv)
		return
	}
	away := now.Sub(since)
	gap := away - m.opts.SourceTTL
	if gap <= 0 {
		m.log.Warn("the source no longer has the history after the mirror's cursor (410 Gone): listing it again; nothing can be missing, since the mirror was behind for less than the source's event TTL",
			"resourceVersion", rv, "behindFor", away.Truncate(time.Second), "sourceEventTTL", m.opts.SourceTTL)
		return
	}
	m.metrics.gapSeconds.Add(gap.Seconds())
	m.log.Warn("the source no longer has the history after the mirror's cursor (410 Gone): listing it again; events the source created and expired in the gap cannot be mirrored",
		"resourceVersion", rv, "gapFrom", since.UTC().Format(time.RFC3339), "gapTo", now.Add(-m.opts.SourceTTL).UTC().Format(time.RFC3339),
		"gap", gap.Truncate(time.Second), "behindFor", away.Truncate(time.Second), "sourceEventTTL", m.opts.SourceTTL)
}

// parseRV reads a source resourceVersion: kube-apiserver's are etcd
// revisions. ok is false for anything else (then the cursor is not
// saved, and a restart lists again).
func parseRV(rv string) (int64, bool) {
	n, err := strconv.ParseInt(rv, 10, 64)
	return n, err == nil && n > 0
}

// observe records a source resourceVersion the mirror heard of.
func (m *Mirror) observe(rv string) {
	n, ok := parseRV(rv)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > m.latestRV {
		m.latestRV = n
	}
}
