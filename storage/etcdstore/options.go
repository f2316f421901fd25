package etcdstore

import (
	"crypto/tls"
	"log/slog"
	"strings"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Defaults for Options. Each is kube-apiserver's, so that eventsd and a
// kube-apiserver sharing an events etcd behave alike.
const (
	// DefaultPrefix is kube-apiserver's --etcd-prefix default.
	DefaultPrefix = "/registry"
	// DefaultTTL is kube-apiserver's --event-ttl default.
	DefaultTTL = time.Hour
	// DefaultLeaseReuseDuration is kube-apiserver's
	// --lease-reuse-duration-seconds default: one lease serves the writes
	// of up to a minute (less for short TTLs, see leaseReusePercent).
	DefaultLeaseReuseDuration = 60 * time.Second
	// DefaultLeaseMaxObjects is kube-apiserver's LeaseManagerConfig
	// default: at most this many objects are attached to one lease, so
	// that revoking it deletes a bounded number of keys in one go.
	DefaultLeaseMaxObjects = 1000
	// DefaultCompactionInterval is kube-apiserver's
	// --etcd-compaction-interval default.
	DefaultCompactionInterval = 5 * time.Minute
	// DefaultDialTimeout is how long Open waits for a connection; it is
	// kube-apiserver's dial timeout.
	DefaultDialTimeout = 20 * time.Second
	// DefaultRingSize is how many recent changes the shared watch keeps
	// decoded in memory for watchers; watchers further behind read etcd
	// with a watch of their own.
	DefaultRingSize = 4096
	// DefaultRequestTimeout bounds each etcd request (a get, one page of
	// a list, a transaction, a lease grant): while etcd is unreachable
	// or without quorum a request fails with storage.ErrUnreachable
	// after at most this long, well within the server's own 60 s request
	// timeout, so that clients get the answer that says why. It also
	// bounds the requests the store makes on its own (compaction, Stats,
	// the shared watch's restarts).
	DefaultRequestTimeout = 10 * time.Second
	// DefaultReadycheckTimeout bounds Health's request to etcd; it is
	// kube-apiserver's --etcd-readycheck-timeout default.
	DefaultReadycheckTimeout = 2 * time.Second
	// keepAliveTime and keepAliveTimeout are kube-apiserver's gRPC
	// keepalive settings for its etcd client: a connection whose peer
	// vanished without closing it (a host gone, a partition) is noticed
	// within 40 s and the client moves to another endpoint.
	keepAliveTime    = 30 * time.Second
	keepAliveTimeout = 10 * time.Second
	// reconnectMaxDelay caps gRPC's backoff between attempts to
	// reconnect to an endpoint (120 s by default): the store notices an
	// etcd that returns within this long, however long it was away.
	reconnectMaxDelay = 2 * time.Second
	// DefaultElectionTTL is the TTL of the session lease behind Lead's
	// leadership (and a history hold): kube-controller-manager's leader
	// election lease duration. A replica cut off from etcd loses its
	// leadership within it, and another takes over after it.
	DefaultElectionTTL = 15 * time.Second
	// DefaultMaxHistoryHold is storage.DefaultMaxHistoryHold: how long
	// history held for an exporter (Store.HoldHistory) is kept at most.
	DefaultMaxHistoryHold = storage.DefaultMaxHistoryHold
)

// Options configure Open. The zero value of each field means its default.
type Options struct {
	// Endpoints are the etcd client URLs, e.g. http://127.0.0.1:2379.
	// Required unless Client is set.
	Endpoints []string
	// TLS is the client TLS configuration; nil means plain connections.
	TLS *tls.Config
	// DialTimeout bounds the first connection (DefaultDialTimeout).
	DialTimeout time.Duration
	// RequestTimeout bounds each etcd request (DefaultRequestTimeout).
	// A caller's shorter deadline still applies and, when it expires
	// first, its context's error is returned rather than
	// storage.ErrUnreachable.
	RequestTimeout time.Duration
	// ReadycheckTimeout bounds the etcd request of Health
	// (DefaultReadycheckTimeout).
	ReadycheckTimeout time.Duration
	// Client, when set, is used instead of dialling Endpoints; the store
	// does not close it.
	Client *clientv3.Client

	// Prefix is the key prefix (DefaultPrefix): events live under
	// <Prefix>/events/<namespace>/<name>, as kube-apiserver keeps them.
	Prefix string
	// DefaultTTL is the TTL of writes that do not give one (DefaultTTL).
	DefaultTTL time.Duration
	// LeaseReuseDuration is how long one lease is reused for new writes,
	// capped at 5% of the TTL (DefaultLeaseReuseDuration).
	LeaseReuseDuration time.Duration
	// LeaseMaxObjects caps the objects attached to one lease
	// (DefaultLeaseMaxObjects).
	LeaseMaxObjects int
	// CompactionInterval is how often the store compacts etcd's history
	// to the revision it saw one interval earlier, coordinated with other
	// writers (kube-apiserver's scheme) through the key compact_rev_key.
	// Zero means DefaultCompactionInterval; negative disables compaction
	// (kube-apiserver's --etcd-compaction-interval=0).
	CompactionInterval time.Duration
	// HistoryMaxRevisions, when > 0, also compacts away revisions older
	// than the newest minus this many at each compaction, bounding
	// history in a write storm. Zero (the default, as upstream) keeps one
	// full interval. A history hold (Store.HoldHistory) overrides both.
	HistoryMaxRevisions int64

	// MaxHistoryHold bounds a history hold (Store.HoldHistory): the
	// store's compactions keep the changes a hold asks for only while
	// they are younger than this (DefaultMaxHistoryHold).
	MaxHistoryHold time.Duration
	// ElectionTTL is the TTL of the session lease of Lead, and of a
	// history hold, in whole seconds (DefaultElectionTTL).
	ElectionTTL time.Duration

	// IndexDir, when set, keeps the secondary index lists plan with in a
	// local pebble database in this directory (storage/diskindex)
	// instead of memory: nothing per event in the heap, and kept across
	// restarts, so that a restart resumes the shared watch where the
	// index stopped (or, when etcd has compacted past it, compares keys
	// and mod revisions and fetches only what changed) rather than
	// listing and decoding the whole prefix. The directory is created if
	// missing; no two stores (or processes) may share it. Empty: the
	// index is in memory (index.Memory), built at each Open.
	IndexDir string
	// IndexCacheBytes is the on-disk index's pebble block cache
	// (diskindex.DefaultCacheBytes).
	IndexCacheBytes int64

	// RingSize is the number of recent changes kept in memory for
	// watchers, at least (up to twice as many between trims)
	// (DefaultRingSize).
	RingSize int

	// MaxBytes is the storage budget; 0 (the default) is none. It bounds
	// the keys and values of the events under the prefix, as the
	// replica's shared watch last delivered them (not etcd's database
	// size, which keeps deleted revisions until compaction). When they
	// exceed MaxBytes, the events whose leases expire first are deleted
	// early (watchers get DELETED), each on the condition that it is
	// unchanged, until they are at budget.LowWaterPercent of it. With the
	// in-memory index it keeps a map entry per event in memory beside the
	// index (its key, size, lease, mod revision and rule); with IndexDir
	// those live in the on-disk index's records, and only the bytes of
	// each lease in memory.
	MaxBytes int64
	// RuleOf names the retention rule that gave an event its TTL, for
	// the count of early expirations by rule; "default" for all when nil.
	RuleOf func(ev *corev1.Event) string

	// Written, when set, is told of each create and update this store
	// makes (storage.WriteObserver).
	Written storage.WriteObserver
	// Clock drives compaction, watch progress bookmarks and lease reuse
	// decisions. Lease expiry itself runs on etcd's wall clock.
	Clock clock.WithTicker
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// Registerer, when set, receives the store's metrics:
	// eventsd_etcd_undecodable_values_total{reason} (encrypted or
	// invalid values met and skipped or refused) and
	// eventsd_etcd_lease_grants_total, and with MaxBytes the storage
	// budget's (storage/budget).
	Registerer prometheus.Registerer
}

// reconnectParams are gRPC's connection backoff defaults but for
// MaxDelay.
var reconnectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
	MinConnectTimeout: 20 * time.Second,
}

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.ReadycheckTimeout <= 0 {
		o.ReadycheckTimeout = DefaultReadycheckTimeout
	}
	o.Prefix = strings.TrimRight(o.Prefix, "/")
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(o.Prefix, "/") {
		o.Prefix = "/" + o.Prefix
	}
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.LeaseReuseDuration <= 0 {
		o.LeaseReuseDuration = DefaultLeaseReuseDuration
	}
	if o.LeaseMaxObjects <= 0 {
		o.LeaseMaxObjects = DefaultLeaseMaxObjects
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = DefaultCompactionInterval
	}
	if o.MaxHistoryHold <= 0 {
		o.MaxHistoryHold = DefaultMaxHistoryHold
	}
	if o.ElectionTTL <= 0 {
		o.ElectionTTL = DefaultElectionTTL
	}
	if o.RingSize <= 0 {
		o.RingSize = DefaultRingSize
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
