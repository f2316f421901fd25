package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/budget"
	"github.com/kubevents/kubevents/storage/index"
	"github.com/kubevents/kubevents/storage/pebblebatch"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Store is the pebble-backed storage.Interface.
type Store struct {
	// unionKeysKept counts the multi-lookup candidates every view keeps
	// (list.go's unionCache), bounded by maxUnionKeysKept.
	unionKeysKept atomic.Int64
	// decoded keeps the events index-driven lists decoded (decoded.go).
	decoded *decodedCache

	opts Options
	// db is replaced only by the committer (see reopen), under dbMu and
	// with no view of it left; others read it under dbMu.
	db    *pebble.DB
	dbMu  sync.RWMutex
	popts *pebble.Options
	lock  *pebble.Lock // the data directory's; released after db
	// health says whether writes can be made durable now.
	health *health
	cache  interface{ Unref() }
	clock  clock.WithTicker
	log    *slog.Logger
	// indexes are the indexes every write maintains (index.Base, less
	// LastObserved with Options.noTimeIndex); timeServed says whether the
	// LastObserved entries are complete, so that lists may plan with them
	// (see timeindex.go).
	indexes    index.Set
	timeServed atomic.Bool

	// ops feeds the committer. closing is closed by Close; after it, writes
	// fail with storage.ErrClosed.
	ops       chan *op
	submitMu  sync.RWMutex // held shared while sending to ops; Close takes it exclusively
	stopped   bool         // guarded by submitMu: no more ops are accepted
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // committer, maintenance loop, watchers

	// Committer-owned state.
	rev      int64 // last assigned revision
	count    int64 // stored events
	presence *presence
	// presenceLoaded: the last loadState took the presence set Close
	// saved rather than rebuilding it (for tests). commitFailed: a commit
	// failed since open, so Close does not save the set (what the
	// database holds may differ from the committer's revision).
	presenceLoaded bool
	commitFailed   bool
	// liveBytes is the stored events' bytes (storedBytes); budget and
	// budgetWake enforce Options.MaxBytes (nil without one).
	liveBytes  int64
	budget     *budget.Budget
	budgetWake chan struct{}
	// staging writes each group in key order; its staging area is kept
	// between groups.
	staging pebblebatch.Sorted

	// Published state.
	durableRev atomic.Int64
	oldestRev  atomic.Int64 // oldest revision the change log holds
	events     atomic.Int64
	expired    atomic.Int64
	commits    atomic.Int64
	committed  atomic.Int64

	// storedBytes is liveBytes as of the last commit.
	storedBytes atomic.Int64

	viewMu   sync.Mutex
	viewCond *sync.Cond      // on viewMu: swapping ended, or a view was closed
	view     *view           // newest durable snapshot; nil if the database could not be reopened
	retained map[int64]*view // snapshots kept for continue tokens
	closed   bool            // views may no longer be acquired
	swapping bool            // the database is being reopened: wait
	live     int             // views not yet closed
	// namespaces counts the events of each namespace in view (on
	// viewMu): the committer applies each group's changes as it
	// publishes the group's view, so a list's first page finds the count
	// of its namespace at the revision it is served at, for
	// remainingItemCount, without counting keys.
	namespaces map[string]int64
	// loadedNamespaces are the counts loadState found, installed with
	// the view it makes possible.
	loadedNamespaces map[string]int64

	hub *hub

	hold historyHold // see hold.go
}

var _ storage.Interface = (*Store)(nil)

// view is a pebble snapshot of durable state at a revision, shared by
// readers and reference counted.
type view struct {
	snap     *pebble.Snapshot
	rev      int64
	refs     int
	deadline int64 // unix nanos; for retained views
	// unions keeps the candidates of the last multi-lookup lists served
	// at this view (list.go's unionKeys), so that the later pages of such
	// a list, at the same view, do not run its lookups again.
	unions unionCache
}

// Open opens (creating if needed) the store in opts.Dir, recovering its
// state from the write-ahead log, and starts its background work.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("pebblestore: Options.Dir is required")
	}
	opts = opts.withDefaults()
	lock, err := lockDir(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	h := newHealth(opts.Dir, opts.Logger, opts.Clock)
	cache := pebble.NewCache(opts.CacheBytes)
	popts := &pebble.Options{
		FS:            keepingFS{FS: opts.FS, h: h},
		Cache:         cache,
		MemTableSize:  opts.MemTableBytes,
		Logger:        pebbleLogger{h},
		EventListener: h.eventListener(),
		Lock:          lock,
	}
	// Bloom filters make the existence check of every create cheap.
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	popts.EnsureDefaults()
	s := &Store{
		opts:     opts,
		decoded:  newDecodedCache(opts.DecodedCacheEvents),
		popts:    popts,
		lock:     lock,
		health:   h,
		cache:    cache,
		clock:    opts.Clock,
		log:      opts.Logger,
		ops:      make(chan *op, opts.MaxGroup),
		closing:  make(chan struct{}),
		retained: map[int64]*view{},
		indexes:  index.Base(),
	}
	if opts.noTimeIndex {
		s.indexes = s.indexes.Without(index.LastObserved)
	}
	s.budget, err = budget.New(budget.Options{MaxBytes: opts.MaxBytes, RuleOf: opts.RuleOf,
		Registerer: opts.Registerer, Logger: opts.Logger, Clock: opts.Clock})
	if err != nil {
		cache.Unref()
		lock.Close()
		return nil, fmt.Errorf("pebblestore: %w", err)
	}
	s.budgetWake = make(chan struct{}, 1)
	s.viewCond = sync.NewCond(&s.viewMu)
	if s.db, err = s.openDB(); err == nil {
		var held int64
		if err = s.loadState(); err == nil {
			held, err = s.initialHold()
		}
		if err != nil {
			s.db.Close()
		}
		s.hold.rev.Store(held)
	}
	if err != nil {
		cache.Unref()
		lock.Close()
		return nil, err
	}
	s.view, s.namespaces = s.newViewLocked(s.rev), s.loadedNamespaces
	s.hub = newHub(opts.RingSize, opts.RingBytes, s.rev)
	s.wg.Add(2)
	go s.commitLoop()
	go s.maintenanceLoop()
	if s.budget != nil {
		s.wg.Add(1)
		go s.budgetLoop()
	}
	return s, nil
}

// openDB opens pebble over the data directory: read-write when its
// filesystem has the reserve free, and otherwise (pebble cannot even start
// writing on a full disk: it creates a log and a manifest) read-only, with
// the store's health saying so until a reopen succeeds.
func (s *Store) openDB() (*pebble.DB, error) {
	opts, h := s.opts, s.health
	var full error
	if du, err := opts.FS.GetDiskUsage(opts.Dir); err == nil && opts.MinFreeBytes >= 0 && du.AvailBytes < uint64(opts.MinFreeBytes) {
		full = fmt.Errorf("%d bytes free, less than the %d kept free", du.AvailBytes, opts.MinFreeBytes)
	}
	if full == nil {
		s.popts.ReadOnly = false
		db, err := pebble.Open(opts.Dir, s.popts)
		if err == nil {
			h.set(&h.readOnly, nil)
			return db, nil
		}
		if !diskFull(err) {
			return nil, fmt.Errorf("pebblestore: opening %s: %w", opts.Dir, err)
		}
		full = err
	}
	h.set(&h.readOnly, h.unavailable("opened read-only on a full disk; writes resume once space is freed",
		fmt.Errorf("%w (%w)", full, syscall.ENOSPC)))
	s.popts.ReadOnly = true
	db, err := pebble.Open(opts.Dir, s.popts)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: opening %s read-only: %w", opts.Dir, err)
	}
	return db, nil
}

// loadState reads the committer's state from a freshly opened database.
func (s *Store) loadState() error {
	var err error
	if s.rev, err = s.readMeta(metaRevision); err == nil {
		if s.count, err = s.readMeta(metaCount); err == nil {
			var oldest int64
			if oldest, err = s.readMeta(metaOldest); err == nil {
				if oldest == 0 {
					oldest = 1
				}
				s.oldestRev.Store(oldest)
			}
		}
	}
	if err == nil {
		s.presence, s.loadedNamespaces, err = takePresence(s.opts.FS, s.opts.Dir, s.rev, s.count)
		s.presenceLoaded = err == nil
		if err != nil {
			if !errors.Is(err, errNoPresenceFile) {
				s.log.Warn("pebblestore: the saved key presence set is unusable; rebuilding it from the TTL queue", "err", err)
			}
			s.presence, s.loadedNamespaces, err = loadPresence(s.db, s.count)
		}
	}
	if err == nil {
		err = s.loadTimeIndex()
	}
	if err == nil {
		s.liveBytes, err = s.loadStoredBytes()
	}
	if err != nil {
		return err
	}
	s.durableRev.Store(s.rev)
	s.events.Store(s.count)
	s.storedBytes.Store(s.liveBytes)
	return nil
}

func (s *Store) readMeta(key []byte) (int64, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pebblestore: reading %s: %w", key, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("pebblestore: corrupt %s", key)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// acquire returns the newest durable view; release it when done.
func (s *Store) acquire() (*view, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if err := s.waitViewLocked(); err != nil {
		return nil, err
	}
	s.view.refs++
	return s.view, nil
}

// acquireCounting is acquire, with the number of events namespace ns
// holds in the view.
func (s *Store) acquireCounting(ns string) (*view, int64, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if err := s.waitViewLocked(); err != nil {
		return nil, 0, err
	}
	s.view.refs++
	return s.view, s.namespaces[ns], nil
}

// acquireAt returns a view at exactly rev if one is still held: the
// newest one, or one retained for continue tokens whose time has not run
// out on the store's clock (the maintenance loop drops those only once per
// ExpiryInterval).
func (s *Store) acquireAt(rev int64) (*view, error) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if err := s.waitViewLocked(); err != nil {
		return nil, err
	}
	v := s.retained[rev]
	if v != nil && v.deadline <= s.clock.Now().UnixNano() {
		delete(s.retained, rev)
		s.unrefLocked(v)
		v = nil
	}
	if v == nil && s.view.rev == rev {
		v = s.view
	}
	if v == nil {
		return nil, nil
	}
	v.refs++
	return v, nil
}

func (s *Store) release(v *view) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	s.unrefLocked(v)
}

// waitViewLocked waits out a reopen and says whether views can be had.
func (s *Store) waitViewLocked() error {
	for s.swapping {
		s.viewCond.Wait()
	}
	switch {
	case s.closed:
		return storage.ErrClosed
	case s.view == nil:
		return s.health.err()
	}
	return nil
}

// newViewLocked takes a snapshot at rev. Called by the committer.
func (s *Store) newViewLocked(rev int64) *view {
	s.live++
	return &view{snap: s.db.NewSnapshot(), rev: rev, refs: 1}
}

func (s *Store) unrefLocked(v *view) {
	v.refs--
	if v.refs == 0 {
		v.unions.drop()
		v.snap.Close()
		s.live--
		if s.live == 0 {
			s.viewCond.Broadcast()
		}
	}
}

// retain keeps v for continue tokens until the history window passes
// after its latest page. At most Options.MaxListSnapshots are kept; beyond
// that the one closest to its deadline is dropped and its tokens are too
// old, as after an etcd compaction.
func (s *Store) retain(v *view) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	v.deadline = s.clock.Now().Add(s.opts.HistoryWindow).UnixNano()
	if _, ok := s.retained[v.rev]; ok || s.closed {
		return
	}
	if len(s.retained) >= s.opts.MaxListSnapshots {
		var first *view
		for _, r := range s.retained {
			if first == nil || r.deadline < first.deadline {
				first = r
			}
		}
		delete(s.retained, first.rev)
		s.unrefLocked(first)
	}
	v.refs++
	s.retained[v.rev] = v
}

// publishView installs a new durable snapshot, whose namespaces hold
// counts changed by the given amounts. Called by the committer.
func (s *Store) publishView(rev int64, counts map[string]int64) {
	s.viewMu.Lock()
	for ns, d := range counts {
		if n := s.namespaces[ns] + d; n > 0 {
			s.namespaces[ns] = n
		} else {
			delete(s.namespaces, ns)
		}
	}
	old := s.view
	s.view = s.newViewLocked(rev)
	if old != nil {
		s.unrefLocked(old)
	}
	s.viewMu.Unlock()
}

// Revision implements storage.Interface.
func (s *Store) Revision() int64 { return s.durableRev.Load() }

// Stats implements storage.Interface.
func (s *Store) Stats() storage.Stats {
	return storage.Stats{
		Events:          s.events.Load(),
		Bytes:           s.diskBytes(),
		Expired:         s.expired.Load(),
		OldestRevision:  s.oldestRev.Load(),
		Commits:         s.commits.Load(),
		CommittedWrites: s.committed.Load(),
	}
}

func (s *Store) diskBytes() int64 {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0
	}
	return int64(s.db.Metrics().DiskSpaceUsage())
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, namespace, name string) (*corev1.Event, error) {
	v, err := s.acquire()
	if err != nil {
		return nil, err
	}
	defer s.release(v)
	return getObject(v.snap, namespace, name)
}

func getObject(snap *pebble.Snapshot, namespace, name string) (*corev1.Event, error) {
	return getObjectVia(nil, snap, namespace, name)
}

// getObjectVia reads the object namespace/name from snap, decoded through
// c (nil: decoded afresh, as a Get whose caller may change the event).
func getObjectVia(c *decodedCache, snap *pebble.Snapshot, namespace, name string) (*corev1.Event, error) {
	key := objectKey(namespace, name)
	val, closer, err := snap.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("event %s/%s: %w", namespace, name, storage.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: get %s/%s: %w", namespace, name, err)
	}
	defer closer.Close()
	return c.decodeCached(key[1:], val)
}

// Close implements storage.Interface: it stops accepting writes, commits
// those already accepted, ends watchers and closes the database.
func (s *Store) Close() error {
	return s.close("")
}

// CloseAndRemove closes the store, then removes dir, the data directory
// or one of its parents, before releasing the directory's lock: for a
// start that failed after opening a store in a directory it created.
// Nothing of the store writes under dir any more once it is removed (the
// key presence set Close saves for the next start is not saved: there is
// none), and no other process can have opened the store in between.
func (s *Store) CloseAndRemove(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	data, err := filepath.Abs(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	if rel, err := filepath.Rel(abs, data); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("pebblestore: %s is neither the data directory %s nor one of its parents", dir, s.opts.Dir)
	}
	return s.close(abs)
}

// close closes the store; when remove is set, it removes that directory
// instead of saving the key presence set, before the lock is released.
func (s *Store) close(remove string) error {
	s.closeOnce.Do(func() {
		s.submitMu.Lock()
		s.stopped = true
		s.submitMu.Unlock()
		close(s.closing)
	})
	s.wg.Wait()
	s.viewMu.Lock()
	s.closed = true
	for _, v := range s.retained {
		s.unrefLocked(v)
	}
	s.retained = nil
	if s.view != nil {
		s.unrefLocked(s.view)
	}
	namespaces := s.namespaces
	s.viewMu.Unlock()
	var err error
	if s.db != nil {
		// The committer has stopped: its set and the published counts are
		// those of revision s.rev, which the database holds.
		if remove == "" && !s.commitFailed && !s.popts.ReadOnly && !s.health.isBroken() {
			if serr := savePresence(s.opts.FS, s.opts.Dir, s.presence, namespaces, s.rev); serr != nil {
				s.log.Warn("pebblestore: could not save the key presence set; the next start rebuilds it", "err", serr)
			}
		}
		err = s.db.Close()
	}
	s.cache.Unref()
	if remove != "" {
		if rerr := s.opts.FS.RemoveAll(remove); rerr != nil && err == nil {
			err = rerr
		}
	}
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}

// WrittenBytes is what pebble has written to disk since start: the WAL,
// flushes and compactions. Per write, it measures the store's I/O work.
func (s *Store) WrittenBytes() int64 {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0
	}
	m := s.db.Metrics()
	t := m.Total()
	return int64(m.WAL.BytesWritten + t.TableBytesFlushed + t.TableBytesCompacted + t.BlobBytesFlushed + t.BlobBytesCompacted)
}
