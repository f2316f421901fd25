package lineage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
)

// Defaults of FollowerOptions.
const (
	// DefaultRetryInterval is how long a kind that could not be mapped is
	// remembered before an event naming it makes the Follower ask
	// discovery again, and the longest wait between two attempts to map a
	// configured kind.
	DefaultRetryInterval = time.Minute
	// followerLogInterval spaces the log lines of one recurring failure
	// (a refused resource, kinds that cannot be mapped).
	followerLogInterval = 10 * time.Minute
	// notedQueue bounds the kinds waiting to be mapped; NoteKind drops a
	// kind when it is full (a later event naming it notes it again).
	notedQueue = 64
	// maxNotedKinds bounds the kinds remembered from events, most of
	// them failures when a client writes events about made-up kinds.
	maxNotedKinds = 4096
)

// DefaultKinds returns the resources a Follower follows unless told
// otherwise: Pods, their controllers, and Nodes, as resource.group.
func DefaultKinds() []string {
	return []string{"pods", "replicasets.apps", "deployments.apps", "statefulsets.apps", "daemonsets.apps", "jobs.batch", "cronjobs.batch", "nodes"}
}

// FollowerOptions configure a Follower. Metadata, Mapper and Graph are
// required; the zero value of every other field takes its default.
type FollowerOptions struct {
	// Metadata reads the source cluster's objects, metadata only.
	Metadata metadata.Interface
	// Mapper maps resources to kinds and the kinds events name to
	// resources (NewMapper builds one over the source's discovery).
	Mapper meta.RESTMapper
	// Graph receives what is learned.
	Graph *Graph
	// Clock spaces the retries of kinds that cannot be mapped and the
	// log lines of recurring failures.
	Clock clock.Clock
	// Log receives refusals, failures and the kinds followed.
	Log *slog.Logger
	// Registerer receives the metrics; none are registered when nil.
	Registerer prometheus.Registerer
	// Kinds are the resources followed from the start, as resource or
	// resource.group ("pods", "replicasets.apps"); default DefaultKinds.
	// Learning is reported once all of them have been listed.
	Kinds []string
	// RetryInterval: see DefaultRetryInterval.
	RetryInterval time.Duration
}

// Follower learns ownership from a source cluster's object metadata: it
// lists and watches each followed resource metadata-only (client-go's
// Reflector over the metadata client, with WatchList where the server
// offers it), as kube-controller-manager's garbage collector does, and
// feeds its Graph: an added or changed object is observed, a deleted one
// marked deleted, and a complete list (the first, and each relist after a
// 410 or a restart) replaces what the graph holds of that kind. It keeps
// no copy of the objects: the Graph is the only one in memory.
type Follower struct {
	opts    FollowerOptions
	mapper  meta.RESTMapperWithContext // opts.Mapper's
	metrics *followerMetrics
	noted   chan schema.GroupVersionKind
	mapLog  *ratelog.Limiter

	mu         sync.RWMutex
	configured []*source
	byResource map[schema.GroupResource]*source
	byKind     map[schema.GroupKind]*kindState
	learning   string
	learnSet   bool // learning was passed on to the Graph
	ran        bool
	resetAt    time.Time // the mapper's last reset
}

// kindState is what the Follower knows of a kind events named.
type kindState struct {
	following bool      // mapped to a followed resource
	pending   bool      // queued for mapping
	failedAt  time.Time // when it could not be mapped
}

// source is one followed resource; its state is under Follower.mu.
type source struct {
	gr         schema.GroupResource
	name       string // resource.group, as in Kinds and the metrics
	configured bool
	limiter    *ratelog.Limiter

	mapping           *meta.RESTMapping // nil until mapped
	mapErr            error
	listErr, watchErr error
	synced            bool // a complete list was read
}

// NewFollower returns a Follower of opts.Kinds; Run follows them.
func NewFollower(opts FollowerOptions) (*Follower, error) {
	switch {
	case opts.Metadata == nil:
		return nil, errors.New("lineage: FollowerOptions.Metadata is required")
	case opts.Mapper == nil:
		return nil, errors.New("lineage: FollowerOptions.Mapper is required")
	case opts.Graph == nil:
		return nil, errors.New("lineage: FollowerOptions.Graph is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.Kinds == nil {
		opts.Kinds = DefaultKinds()
	}
	f := &Follower{
		opts:       opts,
		mapper:     meta.ToRESTMapperWithContext(opts.Mapper),
		noted:      make(chan schema.GroupVersionKind, notedQueue),
		mapLog:     ratelog.New(opts.Clock, followerLogInterval),
		byResource: map[schema.GroupResource]*source{},
		byKind:     map[schema.GroupKind]*kindState{},
	}
	for _, k := range opts.Kinds {
		gr := schema.ParseGroupResource(k)
		if gr.Resource == "" || strings.ContainsAny(k, " /:") || strings.ToLower(k) != k {
			return nil, fmt.Errorf("lineage: kind %q: want a resource in lower case, as resource or resource.group (e.g. pods, replicasets.apps)", k)
		}
		if f.byResource[gr] != nil {
			return nil, fmt.Errorf("lineage: kind %q is listed twice", k)
		}
		s := f.newSource(gr, true)
		f.configured = append(f.configured, s)
	}
	m, err := newFollowerMetrics(opts.Registerer, f)
	if err != nil {
		return nil, fmt.Errorf("lineage: registering the follower's metrics: %w", err)
	}
	f.metrics = m
	return f, nil
}

// newSource registers a source of gr; under f.mu, or before f is shared.
func (f *Follower) newSource(gr schema.GroupResource, configured bool) *source {
	s := &source{gr: gr, name: gr.String(), configured: configured, limiter: ratelog.New(f.opts.Clock, followerLogInterval)}
	f.byResource[gr] = s
	return s
}

// NewMapper returns a RESTMapper over the discovery of the cluster cfg
// reaches, cached in memory: resources are discovered at the first
// mapping, and again when a kind is not found (at most once per
// RetryInterval, by the Follower).
func NewMapper(cfg *rest.Config) (meta.RESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("lineage: discovery client: %w", err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}

// Run follows the configured kinds, and those NoteKind adds, until ctx
// ends. A Follower runs once; a new one may follow into the same Graph.
func (f *Follower) Run(ctx context.Context) error {
	f.mu.Lock()
	if f.ran {
		f.mu.Unlock()
		return errors.New("lineage: the Follower has already run")
	}
	f.ran = true
	f.mu.Unlock()
	f.updateLearning()

	var wg sync.WaitGroup
	for _, s := range f.configured {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.mapConfigured(ctx, s) {
				f.follow(ctx, s)
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			f.mu.Lock()
			f.setLearning("ownership is not learned: the source cluster is no longer followed")
			f.mu.Unlock()
			return nil
		case gvk := <-f.noted:
			if s := f.mapNoted(ctx, gvk); s != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f.follow(ctx, s)
				}()
			}
		}
	}
}

// HasSynced reports whether every configured kind has been listed
// completely at least once.
func (f *Follower) HasSynced() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, s := range f.configured {
		if !s.synced {
			return false
		}
	}
	return true
}

// NoteKind tells the Follower that an event named an object of kind in
// apiVersion: a kind not followed yet is mapped to its resource (by Run,
// in the background) and followed from then on. A kind that cannot be
// mapped is not asked about again for RetryInterval. It never blocks, and
// costs a map lookup under a read lock for a kind already known.
func (f *Follower) NoteKind(apiVersion, kind string) {
	if kind == "" {
		return
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: kind}
	f.mu.RLock()
	st := f.byKind[gk]
	known := st != nil && (st.following || st.pending || (!st.failedAt.IsZero() && f.opts.Clock.Since(st.failedAt) < f.opts.RetryInterval))
	f.mu.RUnlock()
	if known {
		return
	}
	now := f.opts.Clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st = f.byKind[gk]
	switch {
	case st == nil:
		if len(f.byKind) >= maxNotedKinds && !f.forgetFailures(now) {
			return
		}
		st = &kindState{}
		f.byKind[gk] = st
	case st.following || st.pending:
		return
	case now.Sub(st.failedAt) < f.opts.RetryInterval:
		return
	}
	select {
	case f.noted <- gv.WithKind(kind):
		st.pending = true
	default:
	}
}

// forgetFailures drops the kinds whose mapping failed longer than
// RetryInterval ago, under f.mu; it reports whether there is room for
// another kind.
func (f *Follower) forgetFailures(now time.Time) bool {
	for gk, st := range f.byKind {
		if !st.following && !st.pending && now.Sub(st.failedAt) >= f.opts.RetryInterval {
			delete(f.byKind, gk)
		}
	}
	return len(f.byKind) < maxNotedKinds
}

// mapConfigured maps a configured resource to its kind, retrying with
// backoff until it succeeds or ctx ends (false).
func (f *Follower) mapConfigured(ctx context.Context, s *source) bool {
	delay := time.Second
	for {
		m, err := f.mapResource(ctx, s.gr)
		f.mu.Lock()
		s.mapping, s.mapErr = m, err
		if err == nil {
			f.byKind[m.GroupVersionKind.GroupKind()] = &kindState{following: true}
		}
		f.updateLearningLocked()
		f.mu.Unlock()
		if err == nil {
			return true
		}
		if ok, n := s.limiter.Allow(); ok {
			f.opts.Log.Warn("lineage: cannot map a resource to follow to its kind; retrying", "resource", s.name, "err", err, "suppressed", n)
		}
		select {
		case <-ctx.Done():
			return false
		case <-f.opts.Clock.After(delay):
		}
		delay = min(2*delay, f.opts.RetryInterval)
	}
}

// mapResource maps gr to the RESTMapping of its preferred version.
func (f *Follower) mapResource(ctx context.Context, gr schema.GroupResource) (*meta.RESTMapping, error) {
	gvk, err := f.mapper.KindForWithContext(ctx, gr.WithVersion(""))
	if err != nil && meta.IsNoMatchError(err) && f.resetMapper() {
		gvk, err = f.mapper.KindForWithContext(ctx, gr.WithVersion(""))
	}
	if err != nil {
		return nil, fmt.Errorf("lineage: mapping %s: %w", gr, err)
	}
	m, err := f.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("lineage: mapping %s: %w", gvk, err)
	}
	return m, nil
}

// resetMapper makes a resettable Mapper discover again, at most once per
// RetryInterval; it reports whether it did.
func (f *Follower) resetMapper() bool {
	r, ok := f.opts.Mapper.(meta.ResettableRESTMapper)
	if !ok {
		return false
	}
	now := f.opts.Clock.Now()
	f.mu.Lock()
	if !f.resetAt.IsZero() && now.Sub(f.resetAt) < f.opts.RetryInterval {
		f.mu.Unlock()
		return false
	}
	f.resetAt = now
	f.mu.Unlock()
	r.Reset()
	return true
}

// mapNoted maps a kind NoteKind queued; it returns the source to follow
// when the kind's resource is not followed yet.
func (f *Follower) mapNoted(ctx context.Context, gvk schema.GroupVersionKind) *source {
	gk := gvk.GroupKind()
	m, err := f.mapper.RESTMappingWithContext(ctx, gk, gvk.Version)
	if err != nil && meta.IsNoMatchError(err) && f.resetMapper() {
		m, err = f.mapper.RESTMappingWithContext(ctx, gk, gvk.Version)
	}
	if err != nil && gvk.Version != "" && ctx.Err() == nil {
		// The version the event named may no longer be served.
		m, err = f.mapper.RESTMappingWithContext(ctx, gk)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.byKind[gk]
	if st == nil {
		st = &kindState{}
		f.byKind[gk] = st
	}
	st.pending = false
	if err != nil {
		st.failedAt = f.opts.Clock.Now()
		if ok, n := f.mapLog.Allow(); ok {
			f.opts.Log.Info("lineage: a kind events name cannot be mapped to a resource of the source; its objects' ownership is not learned",
				"apiVersion", gvk.GroupVersion().String(), "kind", gvk.Kind, "err", err, "suppressed", n)
		}
		return nil
	}
	st.following = true
	if f.byResource[m.Resource.GroupResource()] != nil {
		return nil // followed already (a configured kind, or another version's)
	}
	s := f.newSource(m.Resource.GroupResource(), false)
	s.mapping = m
	f.opts.Log.Info("lineage: following a kind events name", "resource", s.name, "kind", m.GroupVersionKind.Kind)
	return s
}

// follow lists and watches s until ctx ends.
func (f *Follower) follow(ctx context.Context, s *source) {
	f.mu.RLock()
	m := s.mapping
	f.mu.RUnlock()
	ri := f.opts.Metadata.Resource(m.Resource)
	store := &graphStore{f: f, s: s, apiVersion: m.GroupVersionKind.GroupVersion().String(), kind: m.GroupVersionKind.Kind}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := ri.List(ctx, opts)
			f.requestDone(ctx, s, "list", err)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, opts)
			f.requestDone(ctx, s, "watch", err)
			if err != nil {
				return nil, err
			}
			return newErrorCountingWatch(w, func(code int) {
				f.metrics.errors.WithLabelValues(s.name, "watch", strconv.Itoa(code)).Inc()
			}), nil
		},
	}
	// The reflector's own logs would repeat a refusal at every retry:
	// requestDone logs, rate-limited.
	quiet := logr.Discard()
	r := cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, store, cache.ReflectorOptions{
		Name:            "lineage " + s.name,
		TypeDescription: s.name + " metadata",
		Logger:          &quiet,
	})
	r.RunWithContext(klog.NewContext(ctx, quiet))
}

// requestDone accounts for a list or watch request of s: a failure is
// counted, logged (rate-limited) and, while it lasts, is the reason
// ownership is not learned when s is configured.
func (f *Follower) requestDone(ctx context.Context, s *source, request string, err error) {
	if err != nil && ctx.Err() != nil {
		return // stopping
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := &s.listErr
	if request == "watch" {
		prev = &s.watchErr
	}
	if err == nil {
		if *prev != nil {
			*prev = nil
			f.updateLearningLocked()
		}
		return
	}
	code := statusCode(err)
	f.metrics.errors.WithLabelValues(s.name, request, strconv.Itoa(code)).Inc()
	*prev = err
	f.updateLearningLocked()
	if ok, n := s.limiter.Allow(); ok {
		f.opts.Log.Warn("lineage: the source cluster does not let its objects be followed; retrying with backoff",
			"resource", s.name, "request", request, "code", code, "err", err, "hint", hint(s, request, err), "suppressed", n)
	}
}

// statusCode is err's HTTP status code, 0 when it is not an API status
// (a transport error).
func statusCode(err error) int {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return int(se.Status().Code)
	}
	return 0
}

// hint says what to do about a failed request.
func hint(s *source, request string, err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("the source refuses to %s %s (403 Forbidden): grant get, list and watch on %q of API group %q to eventsd's identity in the source cluster",
			request, s.name, s.gr.Resource, s.gr.Group)
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("the source does not serve %s (404 Not Found)", s.name)
	}
	return fmt.Sprintf("the %s of %s failed: %v", request, s.name, err)
}

// updateLearning sets the Graph's learning state from the configured
// sources'.
func (f *Follower) updateLearning() {
	f.mu.Lock()
	f.updateLearningLocked()
	f.mu.Unlock()
}

func (f *Follower) updateLearningLocked() {
	var waiting []string
	for _, s := range f.configured {
		switch {
		case s.mapping == nil && s.mapErr != nil:
			f.setLearning(fmt.Sprintf("ownership is not learned: the source's discovery does not map %s: %v", s.name, s.mapErr))
			return
		case s.listErr != nil:
			f.setLearning("ownership is not learned: " + hint(s, "list", s.listErr))
			return
		case s.watchErr != nil:
			f.setLearning("ownership is not learned: " + hint(s, "watch", s.watchErr))
			return
		case !s.synced:
			waiting = append(waiting, s.name)
		}
	}
	if len(waiting) > 0 {
		f.setLearning("ownership is not learned yet: the first lists of " + strings.Join(waiting, ", ") + " from the source cluster are under way")
		return
	}
	f.setLearning("")
}

// setLearning passes reason on to the Graph when it changed; under f.mu.
func (f *Follower) setLearning(reason string) {
	if reason == f.learning && f.learnSet {
		return
	}
	f.learning, f.learnSet = reason, true
	f.opts.Graph.SetLearning(reason)
}

// graphStore is the Reflector's store: it writes each object's metadata
// through to the Graph and keeps nothing (the Reflector calls only
// cache.ReflectorStore's methods; with no resync period, never Resync).
type graphStore struct {
	f                *Follower
	s                *source
	apiVersion, kind string // the mapping's
}

var _ cache.ReflectorStore = (*graphStore)(nil)

// The store's methods return no error: the Reflector would only log it
// (to the discarded logger) or, from Replace, list again and again for
// an object that cannot change. An object that cannot be read (none can,
// from the metadata API) is skipped, and logged (rate-limited) by skip.

// Add observes the object.
func (g *graphStore) Add(obj any) error { g.observe(obj); return nil }

// Update observes the object.
func (g *graphStore) Update(obj any) error { g.observe(obj); return nil }

func (g *graphStore) observe(obj any) {
	o, err := g.object(obj)
	if err != nil {
		g.skip(err)
		return
	}
	g.f.opts.Graph.Observe(o)
	g.f.metrics.objects.WithLabelValues(g.s.name).Inc()
}

// skip logs, rate-limited, an object that could not be read.
func (g *graphStore) skip(err error) {
	if ok, n := g.s.limiter.Allow(); ok {
		g.f.opts.Log.Error("lineage: skipping an object of the source that cannot be read", "resource", g.s.name, "err", err, "suppressed", n)
	}
}

// Delete marks the object deleted now.
func (g *graphStore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	switch {
	case err != nil:
		g.skip(fmt.Errorf("lineage: deleted object of %s: %w", g.s.name, err))
	case m.GetUID() == "":
		g.skip(fmt.Errorf("lineage: deleted %s %s/%s has no uid", g.s.name, m.GetNamespace(), m.GetName()))
	default:
		g.f.opts.Graph.MarkDeleted(ID(m.GetUID()), time.Time{})
	}
	return nil
}

// Replace reconciles the Graph's objects of this kind with a complete
// list: those missing from it were deleted while nothing watched.
func (g *graphStore) Replace(list []any, _ string) error {
	objs := make([]Object, 0, len(list))
	for _, obj := range list {
		o, err := g.object(obj)
		if err != nil {
			g.skip(err)
			continue
		}
		objs = append(objs, o)
	}
	f := g.f
	f.opts.Graph.Replace(g.apiVersion, g.kind, objs)
	f.metrics.relists.WithLabelValues(g.s.name).Inc()
	f.metrics.objects.WithLabelValues(g.s.name).Add(float64(len(objs)))
	f.mu.Lock()
	if !g.s.synced || g.s.listErr != nil {
		f.opts.Log.Info("lineage: following the source's objects", "resource", g.s.name, "objects", len(objs))
	}
	g.s.synced, g.s.listErr = true, nil
	f.updateLearningLocked()
	f.mu.Unlock()
	return nil
}

// Resync does nothing: there is no cache to resync.
func (g *graphStore) Resync() error { return nil }

// object is the Graph's Object of a listed or watched object's metadata.
func (g *graphStore) object(obj any) (Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return Object{}, fmt.Errorf("lineage: object of %s: %w", g.s.name, err)
	}
	if m.GetUID() == "" {
		return Object{}, fmt.Errorf("lineage: %s %s/%s has no uid", g.s.name, m.GetNamespace(), m.GetName())
	}
	refs := m.GetOwnerReferences()
	owners := make([]ID, 0, len(refs)) // not nil: an object without owners has none any more
	for _, r := range refs {
		if r.UID != "" {
			owners = append(owners, ID(r.UID))
		}
	}
	return Object{
		ID:         ID(m.GetUID()),
		APIVersion: g.apiVersion,
		Kind:       g.kind,
		Namespace:  m.GetNamespace(),
		Name:       m.GetName(),
		Owners:     owners,
		FirstSeen:  m.GetCreationTimestamp().Time,
	}, nil
}

// errorCountingWatch passes a watch's events on, counting its ERROR
// events (a 410 Gone when the source compacted past the watch) by code.
type errorCountingWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newErrorCountingWatch(in watch.Interface, count func(code int)) watch.Interface {
	w := &errorCountingWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go w.loop(count)
	return w
}

func (w *errorCountingWatch) loop(count func(code int)) {
	defer close(w.out)
	for {
		select {
		case <-w.stop:
			return
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			if e.Type == watch.Error {
				code := http.StatusInternalServerError
				if st, ok := e.Object.(*metav1.Status); ok && st.Code != 0 {
					code = int(st.Code)
				}
				count(code)
			}
			select {
			case w.out <- e:
			case <-w.stop:
				return
			}
		}
	}
}

// ResultChan returns the events of the watch.
func (w *errorCountingWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop ends the watch; its loop ends without waiting for a reader.
func (w *errorCountingWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.in.Stop()
}

// followerMetrics are the Follower's Prometheus metrics.
type followerMetrics struct {
	objects, relists, errors *prometheus.CounterVec
}

func newFollowerMetrics(reg prometheus.Registerer, f *Follower) (*followerMetrics, error) {
	m := &followerMetrics{
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_lineage_source_objects_total",
			Help: "Object metadata the lineage learned from the source cluster (each listed, added or changed object), by resource.",
		}, []string{"resource"}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_lineage_source_relists_total",
			Help: "Complete lists of a resource of the source cluster reconciled with the lineage (the first, then after a 410 Gone or a failed watch), by resource.",
		}, []string{"resource"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventsd_lineage_source_errors_total",
			Help: "Failed lists and watches of the source cluster's objects and errors their watches delivered, by resource, request (list, watch) and HTTP code (0: transport error; 403: not permitted, retried with backoff).",
		}, []string{"resource", "request", "code"}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.objects, m.relists, m.errors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eventsd_lineage_learning",
			Help: "1 while ownership is learned from the source cluster (every configured resource listed and none refused), else 0.",
		}, func() float64 {
			f.mu.RLock()
			defer f.mu.RUnlock()
			if f.ran && f.learning == "" {
				return 1
			}
			return 0
		}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
