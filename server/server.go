package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventapi/fieldmanager"
	"github.com/kubevents/kubevents/eventfilter"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/retention"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/ui"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Server is the events API server. It is an http.Handler.
type Server struct {
	cfg      Config
	metrics  *metrics
	openapi  *openAPI
	version  []byte
	metricsH http.Handler
	// ui serves the web timeline; nil when Config.UI is off.
	ui http.Handler
	// retention chooses each write's TTL.
	retention *retention.Policy
	// fields keeps the events' managedFields (managedfields.go).
	fields *fieldmanager.Manager
	// filters compiles the filter parameter of lists and watches
	// (filter.go).
	filters *eventfilter.Compiler
	// folder folds creates into stored isomorphic events (fold.go).
	folder *folder
	// root is the scope of requests to the root (cluster.go): Store, or
	// with a fleet the root cluster's part of it or RootCluster's;
	// clusters are the scopes of a fleet's clusters, by name, and of the
	// fleet (FleetCluster).
	root     *scope
	clusters map[string]*scope

	handlers           map[verb]handlerFunc
	readOnly, mutating inflight
	rejectLog          *logLimiter
	rateLimitLog       *logLimiter
	errorLog           *logLimiter
	authLogs           authLogs
	requestInfo        *request.RequestInfoFactory
	anonymous          user.Info

	// workers run the handlers of requests with a timeout (withTimeout).
	workers *workerPool
	// readGate bounds the CPU of large reads: watch initializations, lists of every event.
	readGate *readGate
	// listBytes bounds what lists of every event answered in protobuf
	// hold (Config.ProtobufListBytes).
	listBytes    *byteBudget
	stopWatches  chan struct{}
	stopOnce     sync.Once
	shuttingDown atomic.Bool
}

var _ http.Handler = (*Server)(nil)

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, stopWatches: make(chan struct{}), workers: newWorkerPool(), readGate: newReadGate(cfg.ReadConcurrency),
		listBytes:    &byteBudget{limit: max(cfg.ProtobufListBytes, 0)},
		readOnly:     newInflight(cfg.MaxRequestsInflight),
		mutating:     newInflight(cfg.MaxMutatingRequestsInflight),
		rejectLog:    newLogLimiter(cfg.Clock, cfg.Logger, 10*time.Second),
		errorLog:     newLogLimiter(cfg.Clock, cfg.Logger, 10*time.Second),
		authLogs:     newAuthLogs(cfg),
		rateLimitLog: newLogLimiter(cfg.Clock, cfg.Logger, 10*time.Second),

		requestInfo: newRequestInfoFactory(),
		anonymous:   anonymousUser(),
	}
	s.handlers = s.verbHandlers()
	if err := s.newScopes(cfg); err != nil {
		return nil, err
	}
	var err error
	if s.retention, err = retention.NewPolicy(cfg.Retention, cfg.EventTTL); err != nil {
		return nil, fmt.Errorf("server: Config.Retention: %w", err)
	}
	if s.metrics, err = newMetrics(cfg.Registry, cfg.Store, s.retention.RuleNames()); err != nil {
		return nil, err
	}
	foldPolicy, err := fold.NewPolicy(cfg.Fold)
	if err != nil {
		return nil, fmt.Errorf("server: Config.Fold: %w", err)
	}
	if s.folder, err = newFolder(foldPolicy, cfg.Registry, newLogLimiter(cfg.Clock, cfg.Logger, 10*time.Second)); err != nil {
		return nil, err
	}
	if s.fields, err = fieldmanager.New(); err != nil {
		return nil, err
	}
	if s.filters, err = eventfilter.NewCompiler(cfg.FilterLimits); err != nil {
		return nil, fmt.Errorf("server: Config.FilterLimits: %w", err)
	}
	if s.openapi, err = newOpenAPI(); err != nil {
		return nil, err
	}
	if s.version, err = json.Marshal(cfg.Version); err != nil {
		return nil, err
	}
	if cfg.UI {
		s.ui = ui.Handler()
	}
	s.metricsH = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry})
	return s, nil
}

// BeginShutdown reports the server not ready and ends open watches, so
// that an http.Server.Shutdown that follows is not held up by them.
// Requests in flight complete; their writes are durable when answered.
func (s *Server) BeginShutdown() {
	s.shuttingDown.Store(true)
	s.stopOnce.Do(func() { close(s.stopWatches) })
}

// readyz answers /readyz: ok, or 503 naming the first check that fails.
// A store that cannot take writes (a full disk; reads are still served)
// or whose etcd is unreachable makes the server unready until it
// recovers, and so does a failing Config.ReadyChecks entry (a mirror
// behind its source). As kube-apiserver's, `?exclude=NAME` leaves a check
// out (a probe that must pass while the server serves what it has can
// exclude the mirror), and `?verbose` lists every check.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	excluded := map[string]bool{}
	for _, n := range q["exclude"] {
		excluded[n] = true
	}
	_, verbose := q["verbose"]
	var report strings.Builder
	failed := ""
	check := func(name string, err error) {
		switch {
		case excluded[name]:
			fmt.Fprintf(&report, "[+]%s excluded: ok\n", name)
		case err != nil:
			fmt.Fprintf(&report, "[-]%s failed: %v\n", name, err)
			if failed == "" {
				failed = name + ": " + err.Error()
			}
		default:
			fmt.Fprintf(&report, "[+]%s ok\n", name)
		}
	}
	if s.shuttingDown.Load() {
		check("shutdown", errors.New("shutting down"))
	} else {
		check("shutdown", nil)
	}
	var storeErr error
	if hr, ok := s.cfg.Store.(storage.HealthReporter); ok {
		storeErr = hr.Health()
	}
	check("storage", storeErr)
	for _, c := range s.cfg.ReadyChecks {
		check(c.Name(), c.Check(r))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		if verbose {
			_, _ = w.Write([]byte(report.String() + "readyz check failed\n"))
			return
		}
		_, _ = w.Write([]byte(failed + "\n"))
		return
	}
	if verbose {
		_, _ = w.Write([]byte(report.String() + "readyz check passed\n"))
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// Drain waits, after the http.Server's Shutdown, for the handlers that
// still run although their requests were answered 504 (withTimeout), so
// that the store is closed under none of them; it gives up when ctx ends.
// Idle handler goroutines end.
func (s *Server) Drain(ctx context.Context) error {
	err := s.workers.drain(ctx)
	if err == nil {
		s.workers.close()
	}
	return err
}

// ServeHTTP implements http.Handler. A panic in a handler is logged with
// its stack and answered with a 500 Status, not a dropped connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.InstanceID != "" {
		w.Header().Set(InstanceHeader, s.cfg.InstanceID)
	}
	w = &negotiatedWriter{ResponseWriter: w, status: statusOutput(r.Header.Get("Accept"))}
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			if p, ok := v.(*handlerPanic); ok {
				// Raised again from a handler's worker goroutine.
				v, stack = p.value, p.stack
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Logger.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(stack))
			writeStatus(w, apierrors.NewInternalError(fmt.Errorf("the server panicked serving the request: %v", v)))
		}
	}()
	s.serve(w, r)
}

// InstanceHeader is the response header carrying Config.InstanceID.
const InstanceHeader = "Kubevents-Instance"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	r, ok := s.routeCluster(w, r)
	if !ok {
		return
	}
	switch r.URL.Path {
	case "/healthz", "/livez":
		_, _ = w.Write([]byte("ok"))
		return
	case "/readyz":
		if s.shuttingDown.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		s.readyz(w, r)
		return
	case "/version":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.version)
		return
	}
	if s.ui != nil && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, ui.Prefix)) {
		s.ui.ServeHTTP(w, r)
		return
	}
	r, u, frontProxy, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if r, ok = s.authorize(w, r, u); !ok {
		return
	}
	if r.URL.Path == "/metrics" {
		s.metricsH.ServeHTTP(w, r)
		return
	}
	if r.URL.Path == ClustersPathPrefix || r.URL.Path == strings.TrimSuffix(ClustersPathPrefix, "/") {
		s.serveClusters(w, r)
		return
	}
	if s.cfg.Profiling && strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		serveProfile(w, r)
		return
	}
	if rr, watchPath, ok := parseResourcePath(r.URL.Path); ok {
		s.serveResource(w, r, rr, watchPath)
		return
	}
	if ns, ok := kubeventsPath(r.URL.Path, eventapi.LineageResource); ok {
		s.serveLineages(w, r, ns)
		return
	}
	if ns, ok := kubeventsPath(r.URL.Path, eventapi.FacetResource); ok {
		s.serveFacets(w, r, ns)
		return
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if s.scopeOf(r.Context()).discovery.serve(w, r) || s.openapi.serve(w, r, frontProxy) || serveNamespace(w, r) {
			return
		}
	}
	writeStatus(w, notFoundPath())
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, rr resourceRequest, watchPath bool) {
	rr.scope = s.scopeOf(r.Context())
	if !storage.ValidRequestNamespace(rr.namespace) {
		// No namespace holds the mark of a cluster's storage (a
		// DNS-1123 name cannot): as kube-apiserver for a namespace
		// that cannot exist.
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, rr.namespace))
		return
	}
	if !resolveVerb(r, &rr, watchPath) {
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	start := s.cfg.Clock.Now()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		s.metrics.observe(rr.verb, rr.version.Group(), rec.code, s.cfg.Clock.Since(start))
		if rec.code >= 500 {
			s.errorLog.Warn("request failed with a server error", "verb", rr.verb, "path", r.URL.Path, "code", rec.code)
		}
	}()
	if rr.verb == verbWatch {
		s.handlers[rr.verb](rec, r, rr)
		return
	}
	limit, class := s.readOnly, "readOnly"
	if isMutating(rr.verb) && rr.version == eventapi.KubeventsV1 {
		writeStatus(rec, newStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, kubeventsReadOnly))
		return
	}
	if ro := s.scopeOf(r.Context()).readOnly; isMutating(rr.verb) && ro != "" {
		writeStatus(rec, newStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, ro))
		return
	}
	if isMutating(rr.verb) {
		limit, class = s.mutating, "mutating"
		if !s.readBodyFirst(rec, r) {
			return
		}
	}
	s.withTimeout(rec, r, rr.query, func(w http.ResponseWriter, r *http.Request) {
		if !limit.tryAcquire() {
			s.metrics.rejected.WithLabelValues(class).Inc()
			s.rejectLog.Warn("request refused: too many requests in flight", "class", class, "verb", rr.verb)
			tooManyRequests(w)
			return
		}
		defer limit.release()
		s.handlers[rr.verb](w, r, rr)
	})
}

// kubeventsReadOnly is the refusal of a write to eventsd's own group. The
// group is a view for reading (through a cluster's kube-apiserver, when
// eventsd is registered there): events are written through core/v1 or
// events.k8s.io/v1, the groups every recorder writes to. It also keeps a
// cluster's namespace controller, which deletes a deleted namespace's
// objects of every group whose discovery lists delete, from deleting the
// history eventsd keeps.
var kubeventsReadOnly = "events of " + eventapi.KubeventsGroupVersion.String() + " are read-only: write events through core/v1 (/api/v1) or events.k8s.io/v1"

// handlerFunc serves one verb of the events resource.
type handlerFunc func(http.ResponseWriter, *http.Request, resourceRequest)

func (s *Server) verbHandlers() map[verb]handlerFunc {
	return map[verb]handlerFunc{
		verbGet: s.get, verbList: s.list, verbWatch: s.watch,
		verbCreate: s.create, verbUpdate: s.update, verbPatch: s.patch,
		verbDelete: s.delete, verbDeleteCollection: s.deleteCollection,
	}
}

// serveProfile serves net/http/pprof's handlers without registering them
// on http.DefaultServeMux.
func serveProfile(w http.ResponseWriter, r *http.Request) {
	switch name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/"); name {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "":
		pprof.Index(w, r)
	default:
		pprof.Handler(name).ServeHTTP(w, r)
	}
}
