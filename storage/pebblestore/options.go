package pebblestore

import (
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Defaults for Options. Each says why it is what it is.
const (
	// DefaultTTL is kube-apiserver's --event-ttl default.
	DefaultTTL = time.Hour
	// DefaultHistoryWindow keeps changes for watches to resume from for as
	// long as kube-apiserver's etcd keeps them (--etcd-compaction-interval).
	DefaultHistoryWindow = 5 * time.Minute
	// DefaultHistoryMaxEvents bounds the change log in a storm so that its
	// disk use stays bounded (about 1 KiB per change).
	DefaultHistoryMaxEvents = 1_000_000
	// DefaultMaxGroup bounds how many writes share one synced batch; more
	// only delays the first of them.
	DefaultMaxGroup = 512
	// DefaultExpiryInterval is how often expired events are looked for.
	// Upstream's lease expiry is at best second-granular too.
	DefaultExpiryInterval = time.Second
	// DefaultRingSize is how many recent changes are kept decoded in memory
	// for watchers; lagging watchers read the on-disk log instead.
	DefaultRingSize = 4096
	// DefaultRingBytes bounds the memory of those changes too: 4,096 small
	// events take about 10 MiB, but 4,096 events near the 3 MiB request
	// limit would take 12 GiB. 64 MiB keeps the whole ring for ordinary
	// events and bounds it for huge ones.
	DefaultRingBytes = 64 << 20
	// DefaultCacheBytes is pebble's block cache: enough for index blocks and
	// hot data, small enough for a 150 MiB RSS budget with 1M events.
	DefaultCacheBytes = 24 << 20
	// DefaultMemTableBytes is the size of one pebble memtable.
	DefaultMemTableBytes = 16 << 20
	// DefaultMinFreeBytes is the free space below which writes are refused
	// (storage.ErrUnavailable) rather than handed to pebble, which cannot
	// survive a write failing in its log: room to flush both memtables and
	// compact the result with level 0.
	DefaultMinFreeBytes = 4 * DefaultMemTableBytes
	// DefaultMaxListSnapshots bounds the pebble snapshots kept for the
	// continue tokens of paginated lists: one per distinct revision a
	// paginated list was served at, each kept for the history window after
	// its last page was served. A snapshot costs a few hundred bytes of
	// memory; on disk it keeps the versions it sees from being compacted
	// away, which is bounded by the writes of the history window, as the
	// change log is. Lists served at the same revision share a snapshot,
	// and a write storm makes one revision per group commit, so 10,000
	// covers a paginated list every 30 ms for the whole 5-minute window.
	DefaultMaxListSnapshots = 10_000
	// DefaultMaxHistoryHold is storage.DefaultMaxHistoryHold: how long
	// history held for an exporter (Store.HoldHistory) is kept at most.
	DefaultMaxHistoryHold = storage.DefaultMaxHistoryHold
)

// Options configure Open. The zero value of each field means its default.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// FS is the filesystem; vfs.Default when nil. Tests use vfs.NewMem()
	// or an error-injecting FS.
	FS vfs.FS
	// Clock drives TTLs, expiry and history trimming.
	Clock clock.WithTicker
	// DefaultTTL is the TTL of writes that do not give one.
	DefaultTTL time.Duration
	// HistoryWindow is how long changes are kept for watches to resume
	// from, and continue tokens stay consistent.
	HistoryWindow time.Duration
	// HistoryMaxEvents caps the number of kept changes, unless a hold
	// (Store.HoldHistory) needs more of them.
	HistoryMaxEvents int64
	// MaxHistoryHold is how long a change is kept at most for a hold
	// (Store.HoldHistory): older changes are trimmed whatever the hold
	// (DefaultMaxHistoryHold). While a hold lasts, the change log is
	// bounded by this time, not by HistoryWindow and HistoryMaxEvents.
	MaxHistoryHold time.Duration
	// MaxGroup caps the writes committed in one batch.
	MaxGroup int
	// ExpiryInterval is how often expired events are deleted.
	ExpiryInterval time.Duration
	// RingSize is the number of recent changes kept in memory.
	RingSize int
	// RingBytes caps the memory of the recent changes kept in memory (their
	// objects' protobuf sizes plus a per-object allowance for decoding).
	RingBytes int64
	// MaxListSnapshots caps the snapshots retained for continue tokens
	// (see DefaultMaxListSnapshots). Beyond it, the snapshot closest to
	// its expiry is dropped and its tokens get ErrCompacted early.
	MaxListSnapshots int
	// CacheBytes is the block cache size.
	CacheBytes int64
	// DecodedCacheEvents is how many decoded events the store keeps for
	// the lists its indexes serve (by uid, name, family, ...), so that a
	// question asked again does not decode them again
	// (DefaultDecodedCacheEvents when 0; negative keeps none), and with
	// each, once a list asked for it (ListOptions.WithProtobuf), its
	// protobuf with the resourceVersion. Full scans do not fill it.
	DecodedCacheEvents int
	// MemTableBytes is the memtable size.
	MemTableBytes uint64
	// MinFreeBytes is the free space the data directory's filesystem must
	// keep beyond a commit for the commit to be attempted; see
	// DefaultMinFreeBytes. Negative: no check.
	MinFreeBytes int64
	// MaxBytes is the storage budget; 0 (the default) is none. It bounds
	// the stored events' bytes: each event's object key and value (its
	// protobuf plus a 16-byte header), its TTL-queue entry and its index
	// entries, counted exactly as they are written and deleted (the
	// change log and pebble's compaction lag are not counted; see
	// budget.go). When a commit takes them over MaxBytes, the events
	// closest to their expiry are deleted early (watchers get DELETED)
	// until they are at budget.LowWaterPercent of it, so writes keep
	// succeeding.
	MaxBytes int64
	// RuleOf names the retention rule that gave an event its TTL, for
	// the count of early expirations by rule; "default" for all when nil.
	RuleOf func(ev *corev1.Event) string
	// Written, when set, is told of each create and update this store
	// makes (storage.WriteObserver).
	Written storage.WriteObserver
	// Registerer, when set, receives the storage budget's metrics
	// (storage/budget) when MaxBytes is set.
	Registerer prometheus.Registerer
	// NoSync skips fsync on commit. Only for tests and benchmarks that
	// measure something else; acknowledged writes may be lost on a crash.
	NoSync bool
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger

	// noTimeIndex keeps no last-observed time index (index.LastObserved):
	// the store writes the other indexes only and serves time ranges by
	// scans, as before issue 32. Only for this package's benchmarks,
	// which compare the index's write cost; a later open with the index
	// rebuilds it (its marker no longer matches the revision).
	noTimeIndex bool
	// rangeCandidates, when > 0, is the most candidates a list reads from
	// a time range before it scans instead (see rangeCap). For tests.
	rangeCandidates int
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.HistoryWindow <= 0 {
		o.HistoryWindow = DefaultHistoryWindow
	}
	if o.HistoryMaxEvents <= 0 {
		o.HistoryMaxEvents = DefaultHistoryMaxEvents
	}
	if o.MaxHistoryHold <= 0 {
		o.MaxHistoryHold = DefaultMaxHistoryHold
	}
	if o.MaxGroup <= 0 {
		o.MaxGroup = DefaultMaxGroup
	}
	if o.ExpiryInterval <= 0 {
		o.ExpiryInterval = DefaultExpiryInterval
	}
	if o.RingSize <= 0 {
		o.RingSize = DefaultRingSize
	}
	if o.RingBytes <= 0 {
		o.RingBytes = DefaultRingBytes
	}
	if o.DecodedCacheEvents == 0 {
		o.DecodedCacheEvents = DefaultDecodedCacheEvents
	}
	if o.MaxListSnapshots <= 0 {
		o.MaxListSnapshots = DefaultMaxListSnapshots
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
