package server

import (
	"log/slog"
	"runtime"
	"time"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/eventfilter"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/retention"
	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/utils/clock"
)

// Defaults for Config.
const (
	// DefaultEventTTL is kube-apiserver's --event-ttl default.
	DefaultEventTTL = time.Hour
	// DefaultBookmarkInterval is how often a watch that asked for
	// bookmarks gets one when nothing else is sent; kube-apiserver's watch
	// cache sends them about once a minute.
	DefaultBookmarkInterval = time.Minute
	// DefaultMinWatchTimeout is kube-apiserver's --min-request-timeout: a
	// watch without timeoutSeconds ends after a random duration between
	// this and twice this, so clients spread their re-watches.
	DefaultMinWatchTimeout = 30 * time.Minute
	// DefaultMaxObjectSizeBytes is etcd's default request size limit
	// (--max-request-bytes, 1.5 MiB): kube-apiserver cannot store a
	// larger event, so eventsd does not either.
	DefaultMaxObjectSizeBytes = 1572864
	// DefaultProtobufListBytes bounds the encoded protobuf that lists of
	// every event hold at once across requests: some 150,000 events of
	// 400 bytes.
	DefaultProtobufListBytes = 64 << 20
)

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// Store holds the events. Required.
	Store storage.Interface
	// EventTTL is how long an event lives after its last write, when
	// Retention has no rule for it.
	EventTTL time.Duration
	// Retention, when set, holds ordered rules giving the events they
	// match another TTL than EventTTL (the first matching rule's); nil
	// gives every event EventTTL. It is validated by New.
	Retention *retention.Configuration
	// Fold, when set, holds ordered rules under which a create isomorphic
	// to a stored event last observed within the rule's window is folded
	// into that event instead of stored (package fold); nil folds
	// nothing. It is validated by New.
	Fold *fold.Configuration
	// Clock is used for timestamps set by the server, ages in tables,
	// bookmarks and watch timeouts.
	Clock clock.WithTicker
	// Logger receives request errors and operational messages.
	Logger *slog.Logger
	// Registry receives the server's metrics; a new registry when nil.
	Registry *prometheus.Registry
	// Authenticator, when set, must authenticate every request except
	// health checks and /version (they get 401 otherwise); when nil,
	// requests are kube-apiserver's anonymous user (system:anonymous in
	// system:unauthenticated). The user is put in the request's context
	// (k8s.io/apiserver's request.WithUser).
	Authenticator authenticator.Request
	// FrontProxy, when set, authenticates the requests an authenticating
	// front proxy forwards: a cluster's kube-apiserver aggregating
	// eventsd's own group (events.kubevents.io), which proves itself with
	// a client certificate and names the user in request headers
	// (k8s.io/apiserver's headerrequest). It is asked before
	// Authenticator; the requests it authenticates are authorized as any
	// other, and get an OpenAPI index listing eventsd's own group alone
	// (kube-apiserver merges it into its own). Requests it does not
	// authenticate go to Authenticator; when neither authenticates them,
	// they get 401.
	FrontProxy authenticator.Request
	// Authorizer, when set, decides every request except health checks
	// and /version on kube-apiserver's attributes (verb, API group,
	// resource, namespace, name, or non-resource path and verb): those
	// it does not allow get 403 with kube-apiserver's Forbidden message,
	// or 500 if it failed. Nil allows everything (AlwaysAllow).
	Authorizer authorizer.UnconditionalAuthorizer
	// BookmarkInterval is the idle time after which a watch with
	// allowWatchBookmarks gets a bookmark.
	BookmarkInterval time.Duration
	// MinWatchTimeout bounds watches without timeoutSeconds.
	MinWatchTimeout time.Duration
	// Version is served at /version; by default this binary's build
	// (internal/buildinfo).
	Version version.Info
	// Profiling serves Go profiles at /debug/pprof/.
	Profiling bool
	// DisableExtensions turns off the field selectors kube-apiserver does
	// not have (action, reportingInstance, related.*, involves.*, family.*): they get
	// its answer, 400 field label not supported.
	DisableExtensions bool
	// FilterLimits bound the cost of the CEL filters of lists and
	// watches (the filter parameter); zero fields take eventfilter's
	// defaults.
	FilterLimits eventfilter.Limits
	// MaxRequestsInflight bounds concurrent gets and lists, and
	// MaxMutatingRequestsInflight concurrent writes; beyond them requests
	// get 429 with Retry-After. Watches are counted while they send
	// their initial events (readOnly), not after. Negative means
	// unlimited.
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// ReadConcurrency bounds how many of the reads whose size clients
	// choose decode and encode at once: watches sending their initial
	// events (the state a watch without a resourceVersion, or with
	// sendInitialEvents, starts with) and lists of every event past
	// their first page. A crowd of them then leaves CPU to writes; the
	// others wait their turn, oldest first, within the request timeout.
	// 0 means GOMAXPROCS.
	ReadConcurrency int
	// ProtobufListBytes bounds the bytes that lists of every event (no
	// limit) answered in protobuf hold at once, across requests: such a
	// list is encoded page by page and sent once whole, since the
	// protobuf envelope starts with its length. A list that would take
	// more than is left is streamed in JSON instead, a page at a time,
	// when its client accepts JSON (client-go's typed clients do); a
	// client accepting only protobuf gets it anyway. 0 means
	// DefaultProtobufListBytes; negative, that every such list is
	// streamed in JSON when the client accepts it.
	ProtobufListBytes int64
	// ReadyChecks are checked by /readyz after the store's health (a
	// mirror reports whether it follows its source).
	ReadyChecks []healthz.HealthChecker
	// ReadOnly, when set, makes the events API read-only: writes of both
	// groups get 405 MethodNotAllowed with this message (why, and where
	// to write instead), and discovery lists get, list and watch only.
	// eventsd mirroring a cluster serves its events this way.
	ReadOnly string
	// InstanceID, when set, is sent in the InstanceHeader of every
	// response, errors and refusals of authentication included: a client
	// can tell which server process answered. eventsd gives a random one
	// per process, which its mirror compares with its source's, so that
	// it never mirrors itself.
	InstanceID string
	// MaxObjectSizeBytes bounds an event as stored (its protobuf
	// encoding): creates, updates and patches whose result is larger get
	// 413 and store nothing. Negative means unlimited.
	MaxObjectSizeBytes int
	// RequestTimeout bounds requests other than watches: unanswered by
	// then, they get 504 (kube-apiserver's --request-timeout).
	RequestTimeout time.Duration
	// BodyReadTimeout bounds reading a request body, which happens before
	// the request takes an in-flight slot.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds writing one response, or one watch frame.
	WriteTimeout time.Duration
	// EventRateLimit, when set, limits the rate of event creates, updates
	// and patches (of both API groups; dry runs excepted): refused writes
	// get 429 with a Retry-After.
	EventRateLimit *eventratelimit.Limiter
	// Lineage resolves the family.* field selectors: the ownership lineage
	// eventsd learns (package lineage). Nil answers them as a lineage that
	// knows nothing: each object's own events, with a warning that
	// ownership is not learned.
	Lineage Lineage
	// Clusters, when set, make the server a fleet's: each cluster is
	// served at /clusters/NAME/ from its part of Store (package
	// clusterview), and every one of them at /clusters/*/, read-only,
	// each event carrying its cluster in the annotation
	// events.kubevents.io/cluster. Empty: no fleet, and /clusters/ paths
	// are 404.
	Clusters []Cluster
	// RootCluster names the cluster of Clusters the root serves (a fleet
	// of one); empty, the root serves the root cluster's events: those
	// written to eventsd itself (with a fleet, apart from every named
	// cluster's), with Lineage and ReadOnly.
	RootCluster string
	// UI serves the web timeline (package ui) at /ui/. Its files are
	// served without authentication (they hold no data); the API requests
	// the page makes are authenticated and authorized as any other.
	UI bool
	// IdleTimeout closes keep-alive connections without a request for
	// this long, and ReadHeaderTimeout bounds reading a request's
	// headers; both are applied by NewHTTPServer.
	IdleTimeout, ReadHeaderTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.EventTTL <= 0 {
		c.EventTTL = DefaultEventTTL
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.BookmarkInterval <= 0 {
		c.BookmarkInterval = DefaultBookmarkInterval
	}
	if c.MinWatchTimeout <= 0 {
		c.MinWatchTimeout = DefaultMinWatchTimeout
	}
	if c.MaxRequestsInflight == 0 {
		c.MaxRequestsInflight = DefaultMaxRequestsInflight
	}
	if c.MaxMutatingRequestsInflight == 0 {
		c.MaxMutatingRequestsInflight = DefaultMaxMutatingRequestsInflight
	}
	if c.ReadConcurrency <= 0 {
		c.ReadConcurrency = runtime.GOMAXPROCS(0)
	}
	if c.MaxObjectSizeBytes == 0 {
		c.MaxObjectSizeBytes = DefaultMaxObjectSizeBytes
	}
	if c.ProtobufListBytes == 0 {
		c.ProtobufListBytes = DefaultProtobufListBytes
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.RequestTimeout, DefaultRequestTimeout}, {&c.BodyReadTimeout, DefaultBodyReadTimeout},
		{&c.WriteTimeout, DefaultWriteTimeout}, {&c.IdleTimeout, DefaultIdleTimeout},
		{&c.ReadHeaderTimeout, DefaultReadHeaderTimeout},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.Version.GitVersion == "" {
		c.Version = buildinfo.Get()
	}
	return c
}
