package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/budget"
	"github.com/kubevents/kubevents/storage/diskindex"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
)

// undecodableLogInterval bounds how often an undecodable value is logged:
// a list over many encrypted values must not flood the log.
const undecodableLogInterval = 10 * time.Second

// statsIndexWait bounds how long Stats (a metrics scrape) waits for the
// index to have the store's last write before counting what it has.
const statsIndexWait = time.Second

// Store is a storage.Interface over etcd, in kube-apiserver's layout.
type Store struct {
	opts      Options
	cli       *clientv3.Client
	kv        kubernetes.Interface
	ownClient bool
	root      string // <prefix>/events/
	codec     *codec
	leases    *leaseManager
	log       *slog.Logger
	decodeLog *ratelog.Limiter

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	closed atomic.Bool
	wg     sync.WaitGroup

	health healthState // Health's cached answer

	hub      *hub
	hubCtx   context.Context // the shared watch's; progress requests go to its stream
	catchUps atomic.Int64    // catch-up watches opened
	// hubBreak cancels the shared watch's current etcd watch, which then
	// restarts as after a break (tests use it).
	hubBreak atomic.Pointer[context.CancelFunc]

	idx          atomic.Pointer[indexHolder] // the keys-only index lists plan with
	disk         *diskindex.Index            // the on-disk index (Options.IndexDir); nil without
	indexedLists atomic.Int64                // list pages served through idx
	listKeysRead atomic.Int64                // keys lists read from etcd
	indexBuilds  atomic.Int64                // indexes rebuilt after a break in the shared watch
	reconciles   atomic.Int64                // reconciliations of the on-disk index
	reconFetched atomic.Int64                // keys reconciliations fetched from etcd

	rev         atomic.Int64 // highest revision observed
	oldest      atomic.Int64 // the compacted revision
	deletesSeen atomic.Int64 // DELETEs under root seen by the shared watch
	ownDeletes  atomic.Int64 // deletes this store made
	writes      atomic.Int64 // successful write transactions
	undecodable atomic.Int64 // values skipped or refused as undecodable
	lastBytes   atomic.Int64 // the last database size Stats got

	hold historyHold // see hold.go

	undecodableMetric *prometheus.CounterVec
	grantsMetric      prometheus.Counter
	listKeysMetric    *prometheus.CounterVec

	// The storage budget (Options.MaxBytes; budget.go): nil without one.
	budget        *budget.Budget
	budgetWake    chan struct{}
	leaseExpiryMu sync.Mutex
	leaseExpiry   map[int64]time.Time // by lease ID, on the store's clock
}

var _ storage.Interface = (*Store)(nil)

// Open connects to etcd (or uses opts.Client) and returns a store over
// the events under opts.Prefix.
func Open(opts Options) (*Store, error) {
	opts = opts.withDefaults()
	s := &Store{
		opts:  opts,
		root:  opts.Prefix + "/events/",
		codec: newCodec(),
		log:   opts.Logger,
	}
	s.hold.wake = make(chan struct{}, 1)
	s.decodeLog = ratelog.New(opts.Clock, undecodableLogInterval)
	s.undecodableMetric = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eventsd_etcd_undecodable_values_total",
		Help: "Stored values the etcd store could not decode (encrypted at rest, or invalid), refused by gets and skipped by lists and watches.",
	}, []string{"reason"})
	s.grantsMetric = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "eventsd_etcd_lease_grants_total",
		Help: "etcd leases the store granted for events' TTLs.",
	})
	s.listKeysMetric = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eventsd_etcd_list_keys_read_total",
		Help: "Keys lists read from etcd: candidates fetched through the index (path=index) or keys of range reads (path=range).",
	}, []string{"path"})
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.undecodableMetric, s.grantsMetric, s.listKeysMetric} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("etcdstore: register metrics: %w", err)
			}
		}
	}
	var err error
	s.budget, err = budget.New(budget.Options{MaxBytes: opts.MaxBytes, RuleOf: opts.RuleOf,
		Registerer: opts.Registerer, Logger: opts.Logger, Clock: opts.Clock})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: %w", err)
	}
	s.budgetWake = make(chan struct{}, 1)
	s.leaseExpiry = map[int64]time.Time{}
	if opts.Client != nil {
		s.cli = opts.Client
	} else {
		if len(opts.Endpoints) == 0 {
			return nil, errors.New("etcdstore: no endpoints")
		}
		// As kube-apiserver's client: every endpoint given (requests
		// go round-robin to the connected ones, so losing one member
		// moves them to the others), keepalives to notice a connection
		// whose peer vanished, reconnection attempts at most
		// reconnectMaxDelay apart, and no AutoSyncInterval: the member list
		// etcd advertises may hold URLs this process cannot reach.
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:            opts.Endpoints,
			TLS:                  opts.TLS,
			DialTimeout:          opts.DialTimeout,
			DialKeepAliveTime:    keepAliveTime,
			DialKeepAliveTimeout: keepAliveTimeout,
			DialOptions:          []grpc.DialOption{grpc.WithConnectParams(reconnectParams)},
			Logger:               zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("etcdstore: connect to %v: %w", opts.Endpoints, err)
		}
		s.cli, s.ownClient = cli, true
	}
	s.kv = boundedKV{s: s, kv: kubernetes.Client{Client: s.cli}}
	s.leases = &leaseManager{
		clock:      opts.Clock,
		reuse:      opts.LeaseReuseDuration,
		maxObjects: opts.LeaseMaxObjects,
		grant: func(ctx context.Context, secs int64) (clientv3.LeaseID, error) {
			r, err := s.grant(ctx, secs)
			if err != nil {
				return clientv3.NoLease, err
			}
			s.grantsMetric.Inc()
			return r.ID, nil
		},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	ctx, cancel := context.WithTimeout(s.ctx, opts.DialTimeout)
	defer cancel()
	// One key, not a count of the prefix: etcd counts by visiting every
	// key (seconds at 10M events), and only the revision and the
	// cluster's id are needed here.
	resp, err := s.cli.Get(ctx, s.root, clientv3.WithCountOnly())
	if err != nil {
		s.closeClient()
		return nil, fmt.Errorf("etcdstore: read %s: %w", s.root, mapErr(s.unavailable(s.ctx, err)))
	}
	s.observe(resp.Header.Revision)
	comp, err := s.cli.Get(ctx, compactRevKey)
	if err != nil {
		s.closeClient()
		return nil, fmt.Errorf("etcdstore: read %s: %w", compactRevKey, mapErr(s.unavailable(s.ctx, err)))
	}
	var compactVersion int64
	if len(comp.Kvs) == 1 {
		compactVersion = comp.Kvs[0].Version
		if r, err := strconv.ParseInt(string(comp.Kvs[0].Value), 10, 64); err == nil {
			s.oldest.Store(r)
		}
	}

	// The index, and the revision the shared watch follows from: the
	// current one for a new index, or the on-disk index's own.
	from := resp.Header.Revision
	if opts.IndexDir != "" {
		d, rev, err := s.openDiskIndex(s.ctx, s.identity(resp.Header.ClusterId), resp.Header.Revision, s.oldest.Load())
		if err != nil {
			s.closeClient()
			return nil, err
		}
		s.disk, from = d, rev
		s.swapIndex(newDiskHolder(d, s.budget != nil))
	} else {
		m, u, err := s.buildIndex(s.ctx, resp.Header.Revision)
		if err != nil {
			s.closeClient()
			return nil, err
		}
		s.swapIndex(newMemHolder(m, u))
	}
	s.hub = newHub(from, opts.RingSize)
	s.hubCtx = clientv3.WithRequireLeader(s.ctx)
	created := make(chan struct{})
	s.wg.Add(1)
	go s.runHub(from, created)
	select {
	case <-created:
	case <-ctx.Done():
		s.log.Warn("etcdstore: the shared watch was not created in time; continuing")
	}
	s.wg.Add(1)
	go s.holdLoop()
	if s.budget != nil {
		s.wg.Add(1)
		go s.budgetLoop()
	}
	if opts.CompactionInterval > 0 {
		ticker := opts.Clock.NewTicker(opts.CompactionInterval)
		s.wg.Add(1)
		go s.compactLoop(ticker, compactVersion)
	}
	return s, nil
}

func (s *Store) closeClient() {
	s.cancel()
	if s.ownClient {
		_ = s.cli.Close()
	}
}

// key is the etcd key of namespace/name.
func (s *Store) key(namespace, name string) string { return s.root + namespace + "/" + name }

// observe raises the store's revision to rev.
func (s *Store) observe(rev int64) {
	for {
		cur := s.rev.Load()
		if rev <= cur || s.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// mapErr turns etcd's errors into the storage package's sentinels.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %v", storage.ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: %v", storage.ErrFutureRevision, err)
	}
	return err
}

func checkKey(namespace, name string) error {
	if namespace == "" || name == "" || strings.Contains(namespace, "/") || strings.Contains(name, "/") {
		return fmt.Errorf("etcdstore: invalid key %q/%q", namespace, name)
	}
	return nil
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	return nil
}

// decodeKV decodes kv, counting and logging (rate-limited) a value it
// cannot read.
func (s *Store) decodeKV(kv *mvccpb.KeyValue, rev int64) (*corev1.Event, error) {
	ev, err := s.codec.decode(string(kv.Key), kv.Value, rev)
	if err != nil {
		s.undecodable.Add(1)
		reason := "invalid"
		if errors.Is(err, ErrEncrypted) {
			reason = "encrypted"
		}
		s.undecodableMetric.WithLabelValues(reason).Inc()
		if ok, suppressed := s.decodeLog.Allow(); ok {
			s.log.Error("etcdstore: cannot decode a stored event", "err", err, "suppressed", suppressed)
		}
	}
	return ev, err
}

// UndecodableValues is the number of stored values the store met and
// could not decode (encrypted at rest, corrupt or not an Event) since it
// opened: refused by Get, skipped by lists and watches.
func (s *Store) UndecodableValues() int64 { return s.undecodable.Load() }

// CatchUpWatches is the number of etcd watches watchers have opened of
// their own since the store opened, having started or fallen behind the
// shared watch's ring of recent changes.
func (s *Store) CatchUpWatches() int64 { return s.catchUps.Load() }

// LeaseGrants is the number of leases the store has granted since it
// opened.
func (s *Store) LeaseGrants() int64 {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	return s.leases.grants
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, namespace, name string) (*corev1.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkKey(namespace, name); err != nil {
		return nil, err
	}
	resp, err := s.kv.Get(ctx, s.key(namespace, name), kubernetes.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: get %s/%s: %w", namespace, name, mapErr(err))
	}
	s.observe(resp.Revision)
	if resp.KV == nil {
		return nil, fmt.Errorf("event %s/%s: %w", namespace, name, storage.ErrNotFound)
	}
	return s.decodeKV(resp.KV, resp.KV.ModRevision)
}

func (s *Store) ttl(opts storage.WriteOptions) time.Duration {
	if opts.TTL > 0 {
		return opts.TTL
	}
	return s.opts.DefaultTTL
}

// written returns the object a write of ev at rev returns: what was
// stored, so without selfLink (see codec.encode).
func (s *Store) written(ev *corev1.Event, rev int64) *corev1.Event {
	s.observe(rev)
	s.writes.Add(1)
	out := ev.DeepCopy()
	out.ResourceVersion = strconv.FormatInt(rev, 10)
	out.SelfLink = ""
	return out
}

// Create implements storage.Interface: Txn(If ModRevision(key)=0,
// Then Put(key, value, lease)).
func (s *Store) Create(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if ev.ResourceVersion != "" {
		return nil, errors.New("etcdstore: resourceVersion must not be set on create")
	}
	if err := checkKey(ev.Namespace, ev.Name); err != nil {
		return nil, err
	}
	data, err := s.codec.encode(ev)
	if err != nil {
		return nil, err
	}
	lease, err := s.leases.lease(ctx, s.ttl(opts))
	if err != nil {
		return nil, err
	}
	resp, err := s.kv.OptimisticPut(ctx, s.key(ev.Namespace, ev.Name), data, 0, kubernetes.PutOptions{LeaseID: lease})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: create %s/%s: %w", ev.Namespace, ev.Name, mapErr(err))
	}
	if !resp.Succeeded {
		s.observe(resp.Revision)
		return nil, fmt.Errorf("event %s/%s: %w", ev.Namespace, ev.Name, storage.ErrExists)
	}
	out := s.written(ev, resp.Revision)
	if s.opts.Written != nil {
		s.opts.Written(nil, out)
	}
	return out, nil
}

// checkPreconditions checks pre against the stored kv of namespace/name.
func (s *Store) checkPreconditions(namespace, name string, kv *mvccpb.KeyValue, pre storage.Preconditions) error {
	if pre.Revision > 0 && pre.Revision != kv.ModRevision {
		return fmt.Errorf("event %s/%s is at revision %d, not %d: %w", namespace, name, kv.ModRevision, pre.Revision, storage.ErrConflict)
	}
	if pre.UID != "" {
		cur, err := s.decodeKV(kv, kv.ModRevision)
		if err != nil {
			return err
		}
		if string(cur.UID) != pre.UID {
			return fmt.Errorf("event %s/%s has UID %s, not %s: %w", namespace, name, cur.UID, pre.UID, storage.ErrConflict)
		}
	}
	return nil
}

// Update implements storage.Interface as kube-apiserver's GuaranteedUpdate
// does: read the current state, check the preconditions, then
// Txn(If ModRevision(key)=rev, Then Put(key, value, lease), Else Get(key)),
// retrying on a concurrent change unless a revision precondition forbids
// it. Unchanged content writes nothing (and so does not restart the TTL).
func (s *Store) Update(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkKey(ev.Namespace, ev.Name); err != nil {
		return nil, err
	}
	data, err := s.codec.encode(ev)
	if err != nil {
		return nil, err
	}
	key := s.key(ev.Namespace, ev.Name)
	got, err := s.kv.Get(ctx, key, kubernetes.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: update %s/%s: %w", ev.Namespace, ev.Name, mapErr(err))
	}
	s.observe(got.Revision)
	kv := got.KV
	for {
		var expected int64
		if kv == nil {
			if !opts.CreateIfMissing {
				return nil, fmt.Errorf("event %s/%s: %w", ev.Namespace, ev.Name, storage.ErrNotFound)
			}
		} else {
			if err := s.checkPreconditions(ev.Namespace, ev.Name, kv, opts.Precondition); err != nil {
				return nil, err
			}
			if bytes.Equal(kv.Value, data) {
				return s.decodeKV(kv, kv.ModRevision)
			}
			expected = kv.ModRevision
		}
		lease, err := s.leases.lease(ctx, s.ttl(opts))
		if err != nil {
			return nil, err
		}
		resp, err := s.kv.OptimisticPut(ctx, key, data, expected, kubernetes.PutOptions{LeaseID: lease, GetOnFailure: true})
		if err != nil {
			return nil, fmt.Errorf("etcdstore: update %s/%s: %w", ev.Namespace, ev.Name, mapErr(err))
		}
		if resp.Succeeded {
			out := s.written(ev, resp.Revision)
			s.reportUpdate(kv, out)
			return out, nil
		}
		s.observe(resp.Revision)
		kv = resp.KV // changed meanwhile: check again against its state
	}
}

// reportUpdate tells Options.Written of an update that replaced prev (nil
// when it created the event). A previous value that cannot be decoded
// (which the shared watch counts) is reported as none.
func (s *Store) reportUpdate(prev *mvccpb.KeyValue, cur *corev1.Event) {
	if s.opts.Written == nil {
		return
	}
	var before *corev1.Event
	if prev != nil {
		if ev, err := s.codec.decode(string(prev.Key), prev.Value, prev.ModRevision); err == nil {
			before = ev
		}
	}
	s.opts.Written(before, cur)
}

// Delete implements storage.Interface: read the current state, check the
// preconditions, then Txn(If ModRevision(key)=rev, Then Delete(key),
// Else Get(key)), retrying on a concurrent change.
func (s *Store) Delete(ctx context.Context, namespace, name string, pre storage.Preconditions) (*corev1.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkKey(namespace, name); err != nil {
		return nil, err
	}
	key := s.key(namespace, name)
	got, err := s.kv.Get(ctx, key, kubernetes.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: delete %s/%s: %w", namespace, name, mapErr(err))
	}
	s.observe(got.Revision)
	kv := got.KV
	for {
		if kv == nil {
			return nil, fmt.Errorf("event %s/%s: %w", namespace, name, storage.ErrNotFound)
		}
		if err := s.checkPreconditions(namespace, name, kv, pre); err != nil {
			return nil, err
		}
		last, err := s.decodeKV(kv, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		resp, err := s.kv.OptimisticDelete(ctx, key, kv.ModRevision, kubernetes.DeleteOptions{GetOnFailure: true})
		if err != nil {
			return nil, fmt.Errorf("etcdstore: delete %s/%s: %w", namespace, name, mapErr(err))
		}
		s.observe(resp.Revision)
		if resp.Succeeded {
			s.ownDeletes.Add(1)
			s.writes.Add(1)
			last.ResourceVersion = strconv.FormatInt(resp.Revision, 10)
			return last, nil
		}
		kv = resp.KV
	}
}

// Revision implements storage.Interface: the highest revision the store
// has observed in its own writes and reads and in its shared watch of the
// prefix (so other clients' writes of events count once the watch has
// delivered them). etcd's revision may be ahead of it by writes outside
// the prefix, such as the compaction key's.
func (s *Store) Revision() int64 { return s.rev.Load() }

// Stats implements storage.Interface. Events is the index's count of
// the decodable events, once it has the store's last write (or after
// statsIndexWait); Bytes is etcd's dbSizeInUse (the last one read when
// etcd does not answer in time, or when Health last found it
// unavailable); Expired is the DELETEs
// under the prefix this store did not make itself (lease expiry, or other
// clients' deletes); Commits and CommittedWrites are this store's
// successful write transactions.
func (s *Store) Stats() storage.Stats {
	st := storage.Stats{
		Expired:         max(0, s.deletesSeen.Load()-s.ownDeletes.Load()),
		OldestRevision:  s.oldest.Load(),
		Commits:         s.writes.Load(),
		CommittedWrites: s.writes.Load(),
	}
	// The events are the index's: what the shared watch delivered, and
	// what lists serve. Asking etcd to count the prefix instead costs it
	// O(events) per metrics scrape (over the request timeout at 10M).
	// The count waits briefly for the index to reach the store's last
	// write, so that a write just acknowledged is counted.
	if h := s.idx.Load(); h != nil {
		m := h.m
		if !s.closed.Load() && s.healthy() {
			ctx, cancel := context.WithTimeout(s.ctx, statsIndexWait)
			if caught, err := s.waitIndex(ctx, s.Revision()); err == nil {
				m = caught
			}
			cancel()
		}
		st.Events = int64(m.Len())
	}
	// While etcd is known to be unavailable (Health), the last size
	// stands: a metrics scrape does not wait for etcd's timeouts.
	if !s.closed.Load() && s.healthy() {
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
		if len(s.cli.Endpoints()) > 0 {
			if st, err := s.cli.Status(ctx, s.cli.Endpoints()[0]); err == nil {
				s.lastBytes.Store(st.DbSizeInUse)
			}
		}
		cancel()
	}
	st.Bytes = s.lastBytes.Load()
	return st
}

// Close implements storage.Interface: watchers end, background loops stop
// and, unless the client was given, the connection closes.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	var err error
	if s.disk != nil {
		// After the shared watch, its only writer, has stopped.
		err = s.disk.Close()
	}
	if s.ownClient {
		if cerr := s.cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("etcdstore: close: %w", err)
	}
	return nil
}
