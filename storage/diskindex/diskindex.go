// Package diskindex is the etcd backend's secondary index of Events kept
// in a local pebble database instead of memory: the same answers as
// index.Memory (Keys of a plan, at the index's revision or an older one,
// in key order), with the Go heap holding nothing per event, and kept
// across restarts so that a replica resumes its watch where the index
// stopped rather than listing and decoding the whole prefix again.
//
// Layout (every key starts with its kind's byte):
//
//	i <index id> <escaped value> 0x00 0x01 <ns>/<name>  index entries (index.AppendEntryPrefix), empty value
//	o <ns>/<name>                 the key's mod revision, its value's size, lease and retention rule,
//	                              whether it is indexed (decodable) and its indexed values
//	r <revision> <ns>/<name>      the values a change at revision removed (history for Keys at an older revision)
//	L <lease> <ns>/<name>         the keys of each lease (the storage budget's victims), empty value
//	b <lease>                     the bytes and keys each lease holds
//	m<name>                       meta: format, indexes, etcd cluster id, prefix, revision, since, count
//
// One goroutine writes (the backend's watch feed): Apply writes one watch
// batch as one pebble batch that also moves the revision, without fsync,
// so that a crash loses a suffix of batches and the revision written with
// them says where to resume. Readers take a pebble snapshot together with
// the revision it reflects.
package diskindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/internal/dirlock"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/index"
	"github.com/kubevents/kubevents/storage/pebblebatch"
	corev1 "k8s.io/api/core/v1"
)

// FormatVersion is the layout version written in the index's meta; an
// index of another version (or another set of indexes) is discarded and
// rebuilt.
const FormatVersion = 1

// Defaults for Options.
const (
	// DefaultCacheBytes is the pebble block cache: small and bounded,
	// since lists read few blocks (one object's entries are adjacent).
	DefaultCacheBytes = 16 << 20
	// DefaultMemTableBytes is the size of each of pebble's memtables.
	DefaultMemTableBytes = 8 << 20
)

// maxRemoved bounds the removal records kept when the backend does not
// Forget them (etcd compacted by someone who never tells this replica):
// past it the oldest quarter is dropped, as index.Memory does.
const maxRemoved = 1 << 20

// ErrDirInUse is wrapped by Open's error when another process (or another
// Index in this process) has the directory open.
var ErrDirInUse = dirlock.ErrInUse

// Options configure Open.
type Options struct {
	// Dir is the index's directory, created if missing. Required. No two
	// processes may share it (Open takes a lock).
	Dir string
	// Set is the indexes kept (index.All() when empty). An index written
	// with another set is discarded at Open.
	Set index.Set
	// CacheBytes is pebble's block cache (DefaultCacheBytes).
	CacheBytes int64
	// MemTableBytes is the size of each pebble memtable
	// (DefaultMemTableBytes).
	MemTableBytes int
	// FS is the filesystem (vfs.Default).
	FS vfs.FS
	// Logger receives pebble's logs (at debug level, errors at error);
	// slog.Default() when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Set.Len() == 0 {
		o.Set = index.All()
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes <= 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Identity says what an index indexes: the etcd cluster (its cluster id)
// and the key prefix of the events (e.g. "/registry/events/").
type Identity struct {
	ClusterID uint64
	Prefix    string
}

// Change is one change of a watch batch (or of a reconciliation).
type Change struct {
	// Namespace and Name are the key's.
	Namespace, Name string
	// Delete removes the key.
	Delete bool
	// New says the key is known to have no record in the index (a
	// reconciliation found none; a watch's create of a key, which did
	// not exist at the index's revision): Apply does not read its
	// record, a point read that misses into the sstables' blocks.
	New bool
	// Event is the new state, indexed; nil for a value that cannot be
	// decoded, which is kept for the storage budget but not indexed
	// (lists skip it).
	Event *corev1.Event
	// Revision is the change's revision (the key's mod revision for a
	// put, the deletion's revision for a delete).
	Revision int64
	// Size, Lease and Rule are what the storage budget counts of a put:
	// the bytes of its key and value, its etcd lease, and the retention
	// rule that gave it its TTL.
	Size  int64
	Lease int64
	Rule  string
}

// KeyRevision is a stored key ("<ns>/<name>") and its mod revision.
type KeyRevision struct {
	Key         string
	ModRevision int64
}

// Usage is what the index keeps of a key for the storage budget.
type Usage struct {
	Key         string
	ModRevision int64
	Size        int64
	Lease       int64
	Rule        string
}

// leaseUse is a lease's totals.
type leaseUse struct{ bytes, keys int64 }

// Index is the on-disk index. Its methods are safe for concurrent use,
// but only one goroutine may write (Apply, SetRevision, the
// reconciliation, Forget may run beside it).
type Index struct {
	opts  Options
	set   index.Set
	pos   map[index.ID]int // position of each index in set
	db    *pebble.DB
	lock  *pebble.Lock
	cache *pebble.Cache

	wmu sync.Mutex // serializes writers; guards what follows
	// staging and overlay are Apply's: its writes in key order, and the
	// records it changed (nil: removed), reused from batch to batch.
	staging pebblebatch.Sorted
	overlay map[string]*record

	mu          sync.RWMutex // guards what follows; held while a batch commits and the state moves
	id          Identity
	rev         int64 // the revision the index reflects (0: none, or being reconciled)
	persisted   int64 // the revision last written
	since       int64 // the oldest revision Keys answers for
	count       int64 // indexed keys
	removedN    int64 // removal records
	bytes       int64 // the budget's bytes of every key
	leases      map[int64]leaseUse
	reconciling bool
	changed     chan struct{} // closed, and replaced, when rev advances
	closed      bool
}

// Meta keys.
var (
	metaFormat  = []byte("mformat")
	metaSet     = []byte("mset")
	metaCluster = []byte("mcluster")
	metaPrefix  = []byte("mprefix")
	metaRev     = []byte("mrev")
	metaSince   = []byte("msince")
	metaCount   = []byte("mcount")
	metaRemoved = []byte("mremoved")
)

// Key kinds.
const (
	kindEntry   = 'i'
	kindObject  = 'o'
	kindRemoved = 'r'
	kindLease   = 'L'
	kindBytes   = 'b'
)

// Open opens (creating if needed) the index in opts.Dir. An index of
// another format or set of indexes is emptied. The caller checks
// Identity and Revision against etcd: an index of another cluster or
// prefix, one at revision 0 (new, or left mid-reconciliation), or one
// whose revision etcd has compacted is brought up to date with
// BeginReconcile ... EndReconcile; otherwise the backend feeds it from a
// watch from Revision()+1.
func Open(opts Options) (*Index, error) {
	if opts.Dir == "" {
		return nil, errors.New("diskindex: Options.Dir is required")
	}
	opts = opts.withDefaults()
	lock, err := dirlock.Lock(opts.FS, opts.Dir, "index directory")
	if err != nil {
		return nil, err
	}
	cache := pebble.NewCache(opts.CacheBytes)
	popts := &pebble.Options{
		FS:           opts.FS,
		Cache:        cache,
		MemTableSize: uint64(opts.MemTableBytes),
		Logger:       pebbleLogger{opts.Logger},
		Lock:         lock,
	}
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	popts.EnsureDefaults()
	db, err := pebble.Open(opts.Dir, popts)
	if err != nil {
		cache.Unref()
		lock.Close()
		return nil, fmt.Errorf("diskindex: opening %s: %w", opts.Dir, err)
	}
	d := &Index{opts: opts, set: opts.Set, pos: map[index.ID]int{}, db: db, lock: lock, cache: cache, leases: map[int64]leaseUse{}, changed: make(chan struct{}), overlay: map[string]*record{}}
	for p, id := range d.set.IDs() {
		d.pos[id] = p
	}
	if err := d.load(); err != nil {
		d.closeDB()
		return nil, err
	}
	return d, nil
}

// setBytes is the meta value of a set of indexes: their ids.
func setBytes(s index.Set) []byte {
	ids := s.IDs()
	out := make([]byte, len(ids))
	for i, id := range ids {
		out[i] = byte(id)
	}
	return out
}

// load reads the meta and the lease totals, emptying an index of another
// format or set.
func (d *Index) load() error {
	format, _ := d.getUint(metaFormat)
	set, err := d.get(metaSet)
	if err != nil {
		return err
	}
	if format != FormatVersion || string(set) != string(setBytes(d.set)) {
		if format != 0 || set != nil {
			d.opts.Logger.Info("diskindex: discarding an index of another format", "dir", d.opts.Dir, "format", format)
		}
		return d.reset(Identity{})
	}
	cluster, _ := d.getUint(metaCluster)
	prefix, err := d.get(metaPrefix)
	if err != nil {
		return err
	}
	d.id = Identity{ClusterID: cluster, Prefix: string(prefix)}
	rev, _ := d.getUint(metaRev)
	since, _ := d.getUint(metaSince)
	count, _ := d.getUint(metaCount)
	removed, _ := d.getUint(metaRemoved)
	d.rev, d.persisted, d.since, d.count, d.removedN = int64(rev), int64(rev), int64(since), int64(count), int64(removed)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindBytes}, UpperBound: []byte{kindBytes + 1}})
	if err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		v := it.Value()
		b, n := binary.Uvarint(v)
		keys, _ := binary.Uvarint(v[max(n, 0):])
		l := int64(binary.BigEndian.Uint64(k[1:]))
		d.leases[l] = leaseUse{bytes: int64(b), keys: int64(keys)}
		d.bytes += int64(b)
	}
	return it.Error()
}

// reset empties the index and records id, at revision 0.
func (d *Index) reset(id Identity) error {
	b := d.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	putUint(b, metaFormat, FormatVersion)
	_ = b.Set(metaSet, setBytes(d.set), nil)
	putUint(b, metaCluster, id.ClusterID)
	_ = b.Set(metaPrefix, []byte(id.Prefix), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("diskindex: emptying %s: %w", d.opts.Dir, err)
	}
	// Give the space back now rather than at pebble's leisure.
	if err := d.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		d.opts.Logger.Warn("diskindex: compacting the emptied index", "err", err)
	}
	d.mu.Lock()
	d.id, d.rev, d.persisted, d.since, d.count, d.removedN, d.bytes = id, 0, 0, 0, 0, 0, 0
	d.leases = map[int64]leaseUse{}
	d.mu.Unlock()
	return nil
}

func putUint(b *pebble.Batch, k []byte, v uint64) {
	_ = b.Set(k, binary.AppendUvarint(nil, v), nil)
}

func (d *Index) get(k []byte) ([]byte, error) {
	v, c, err := d.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("diskindex: reading %q: %w", k, err)
	}
	defer c.Close()
	return append([]byte{}, v...), nil
}

func (d *Index) getUint(k []byte) (uint64, error) {
	v, err := d.get(k)
	if err != nil || v == nil {
		return 0, err
	}
	x, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, fmt.Errorf("diskindex: bad meta value %q", k)
	}
	return x, nil
}

// Set returns the indexes kept; plan lookups with its Plan.
func (d *Index) Set() index.Set { return d.set }

// Identity returns the cluster and prefix the index was built for (zero
// for a new index).
func (d *Index) Identity() Identity {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.id
}

// Len returns the number of indexed (decodable) keys.
func (d *Index) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return int(d.count)
}

// Revision returns the revision the index reflects: 0 for an index that
// needs reconciling (new, or left mid-reconciliation); while one runs,
// the revision it started from.
func (d *Index) Revision() int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.rev
}

// Bytes returns the budget's bytes of every key (indexed or not).
func (d *Index) Bytes() int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.bytes
}

// LeaseBytes returns the bytes each lease's keys hold (lease 0: keys
// without one).
func (d *Index) LeaseBytes() map[int64]int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[int64]int64, len(d.leases))
	for l, u := range d.leases {
		out[l] = u.bytes
	}
	return out
}

// Wait returns once the index has reached rev, or with ctx's error.
func (d *Index) Wait(ctx context.Context, rev int64) error {
	return index.WaitRevision(ctx, rev, func() (int64, <-chan struct{}) {
		d.mu.RLock()
		defer d.mu.RUnlock()
		return d.rev, d.changed
	})
}

// advance records rev and wakes waiters; d.mu is held.
func (d *Index) advance(rev int64) {
	if rev > d.rev {
		d.rev = rev
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

// SetRevision records that the index reflects rev (a progress
// notification) without a change. It is written with the next batch (or
// at Close): after a crash the watch resumes from the last batch's
// revision, replaying nothing that changes the index.
func (d *Index) SetRevision(rev int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.reconciling {
		d.advance(rev)
	}
}

// record is the decoded value of an o key.
type record struct {
	modRev  int64
	size    int64
	lease   int64
	rule    string
	indexed bool
	vals    []string // by position in the set; "" for none
}

func (d *Index) encodeRecord(r *record) []byte {
	b := make([]byte, 0, 64)
	b = binary.AppendUvarint(b, uint64(r.modRev))
	b = binary.AppendUvarint(b, uint64(r.size))
	b = binary.AppendVarint(b, r.lease)
	b = appendString(b, r.rule)
	if r.indexed {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, v := range r.vals {
		b = appendString(b, v)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads a record's fields in order; a short or bad value sets err.
type decoder struct {
	b   []byte
	err error
}

// errCorruptRecord is a record value that does not decode.
var errCorruptRecord = errors.New("diskindex: corrupt record")

// corrupt records that the value does not decode; every later read
// fails too.
func (c *decoder) corrupt() { c.err, c.b = errCorruptRecord, nil }

func (c *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(c.b)
	if n <= 0 {
		c.corrupt()
		return 0
	}
	c.b = c.b[n:]
	return x
}

func (c *decoder) varint() int64 {
	x, n := binary.Varint(c.b)
	if n <= 0 {
		c.corrupt()
		return 0
	}
	c.b = c.b[n:]
	return x
}

func (c *decoder) str() string {
	n := c.uvarint()
	if uint64(len(c.b)) < n {
		c.corrupt()
		return ""
	}
	s := string(c.b[:n])
	c.b = c.b[n:]
	return s
}

func (c *decoder) byte1() byte {
	if len(c.b) == 0 {
		c.corrupt()
		return 0
	}
	x := c.b[0]
	c.b = c.b[1:]
	return x
}

func (d *Index) decodeRecord(v []byte) (*record, error) {
	c := decoder{b: v}
	r := &record{modRev: int64(c.uvarint()), size: int64(c.uvarint()), lease: c.varint(), rule: c.str(), indexed: c.byte1() == 1}
	r.vals = make([]string, d.set.Len())
	for i := range r.vals {
		r.vals[i] = c.str()
	}
	return r, c.err
}

// decodeValues reads the values of a removal record.
func (d *Index) decodeValues(v []byte) ([]string, error) {
	c := decoder{b: v}
	vals := make([]string, d.set.Len())
	for i := range vals {
		vals[i] = c.str()
	}
	return vals, c.err
}

func objectKey(key string) []byte { return append([]byte{kindObject}, key...) }

func entryKey(id index.ID, value, key string) []byte {
	return append(index.AppendEntryPrefix([]byte{kindEntry}, id, value), key...)
}

func removedKey(rev int64, key string) []byte {
	k := make([]byte, 9, 9+len(key))
	k[0] = kindRemoved
	binary.BigEndian.PutUint64(k[1:], uint64(rev))
	return append(k, key...)
}

func leaseKey(lease int64, key string) []byte {
	k := make([]byte, 9, 9+len(key))
	k[0] = kindLease
	binary.BigEndian.PutUint64(k[1:], uint64(lease))
	return append(k, key...)
}

func bytesKey(lease int64) []byte {
	k := make([]byte, 9)
	k[0] = kindBytes
	binary.BigEndian.PutUint64(k[1:], uint64(lease))
	return k
}

// getRecord reads key's record through r (a batch or the database).
func (d *Index) getRecord(r pebble.Reader, key string) (*record, error) {
	v, c, err := r.Get(objectKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("diskindex: reading %s: %w", key, err)
	}
	defer c.Close()
	rec, err := d.decodeRecord(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, key)
	}
	return rec, nil
}

// Apply writes one batch of changes and moves the index to rev, in one
// pebble batch written without fsync. While a reconciliation runs, rev
// is 0 (the revision moves at EndReconcile) and no removals are recorded.
func (d *Index) Apply(rev int64, changes []Change) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.mu.RLock()
	reconciling, closed := d.reconciling, d.closed
	d.mu.RUnlock()
	switch {
	case closed:
		return fmt.Errorf("diskindex: %w", storage.ErrClosed)
	case reconciling && rev != 0:
		return errors.New("diskindex: Apply with a revision during a reconciliation")
	case !reconciling && rev == 0:
		return errors.New("diskindex: Apply without a revision")
	}
	// The writes go to a plain batch in key order (pebblebatch.Sorted:
	// pebble's memtable insertions are then short searches from the
	// previous key rather than from the skiplist's head), so they cannot
	// be read back before the commit: the records this Apply changed are
	// read from an overlay instead, which an indexed batch would have
	// answered.
	b := &d.staging
	b.Reset(d.db.NewBatch())
	defer func() {
		_ = b.Close()
		clear(d.overlay)
	}()
	var dCount, dRemoved, dBytes int64
	dLeases := map[int64]leaseUse{}
	for _, c := range changes {
		key := c.Namespace + "/" + c.Name
		old, changed := d.overlay[key]
		if !changed && !c.New {
			var err error
			if old, err = d.getRecord(d.db, key); err != nil {
				return err
			}
		}
		var rec *record
		if !c.Delete {
			rec = &record{modRev: c.Revision, size: c.Size, lease: c.Lease, rule: c.Rule, indexed: c.Event != nil, vals: make([]string, d.set.Len())}
			if c.Event != nil {
				for id, v := range d.set.Entries(c.Event) {
					rec.vals[d.pos[id]] = v
				}
			}
		}
		if old == nil && rec == nil {
			continue
		}
		d.overlay[key] = rec
		// The removal record: the old values leave at this revision.
		if old != nil && old.indexed && !reconciling && (rec == nil || !rec.indexed || !equalVals(old.vals, rec.vals)) {
			v := make([]byte, 0, 32)
			for _, s := range old.vals {
				v = appendString(v, s)
			}
			b.Set(removedKey(c.Revision, key), v)
			dRemoved++
		}
		// Index entries.
		for p, id := range d.set.IDs() {
			var ov, nv string
			if old != nil && old.indexed {
				ov = old.vals[p]
			}
			if rec != nil && rec.indexed {
				nv = rec.vals[p]
			}
			if ov == nv {
				continue
			}
			if ov != "" {
				b.Delete(entryKey(id, ov, key))
			}
			if nv != "" {
				b.Set(entryKey(id, nv, key), nil)
			}
		}
		if old != nil && old.indexed {
			dCount--
		}
		if rec != nil && rec.indexed {
			dCount++
		}
		// The budget's bytes, by lease.
		if old != nil {
			u := dLeases[old.lease]
			u.bytes -= old.size
			u.keys--
			dLeases[old.lease] = u
			dBytes -= old.size
			if rec == nil || rec.lease != old.lease {
				b.Delete(leaseKey(old.lease, key))
			}
		}
		if rec != nil {
			u := dLeases[rec.lease]
			u.bytes += rec.size
			u.keys++
			dLeases[rec.lease] = u
			dBytes += rec.size
			if old == nil || rec.lease != old.lease {
				b.Set(leaseKey(rec.lease, key), nil)
			}
			b.Set(objectKey(key), d.encodeRecord(rec))
		} else {
			b.Delete(objectKey(key))
		}
	}
	d.mu.RLock()
	count, removed, cur := d.count+dCount, d.removedN+dRemoved, d.rev
	newLeases := make(map[int64]leaseUse, len(dLeases))
	for l, du := range dLeases {
		u := d.leases[l]
		u.bytes += du.bytes
		u.keys += du.keys
		newLeases[l] = u
	}
	d.mu.RUnlock()
	for l, u := range newLeases {
		if u.keys <= 0 {
			b.Delete(bytesKey(l))
		} else {
			b.Set(bytesKey(l), binary.AppendUvarint(binary.AppendUvarint(nil, uint64(u.bytes)), uint64(u.keys)))
		}
	}
	b.Set(metaCount, binary.AppendUvarint(nil, uint64(count)))
	b.Set(metaRemoved, binary.AppendUvarint(nil, uint64(removed)))
	if rev != 0 {
		b.Set(metaRev, binary.AppendUvarint(nil, uint64(max(rev, cur))))
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("diskindex: writing a batch at revision %d: %w", rev, err)
	}
	d.mu.Lock()
	d.count, d.removedN, d.bytes = count, removed, d.bytes+dBytes
	for l, u := range newLeases {
		if u.keys <= 0 {
			delete(d.leases, l)
		} else {
			d.leases[l] = u
		}
	}
	if rev != 0 {
		d.persisted = max(rev, cur)
		d.advance(rev)
	}
	over := d.removedN > maxRemoved
	d.mu.Unlock()
	if over {
		return d.trimRemoved()
	}
	return nil
}

func equalVals(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// trimRemoved drops the oldest quarter of the removal records; d.wmu is
// held.
func (d *Index) trimRemoved() error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindRemoved}, UpperBound: []byte{kindRemoved + 1}})
	if err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	var rev int64
	n := int64(0)
	for it.First(); it.Valid() && n < maxRemoved/4; it.Next() {
		rev = int64(binary.BigEndian.Uint64(it.Key()[1:9]))
		n++
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	return d.forget(rev)
}

// Forget drops the removal records of revisions up to rev, so that Keys
// at a revision older than rev fail: the backend calls it with the
// revision etcd is compacted to.
func (d *Index) Forget(rev int64) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.forget(rev)
}

// forget is Forget with d.wmu held.
func (d *Index) forget(rev int64) error {
	d.mu.RLock()
	since, closed := d.since, d.closed
	d.mu.RUnlock()
	if rev <= since || closed {
		return nil
	}
	end := removedKey(rev+1, "")
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kindRemoved}, UpperBound: end})
	if err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	var n int64
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	b := d.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{kindRemoved}, end, nil)
	d.mu.RLock()
	removed := max(d.removedN-n, 0)
	d.mu.RUnlock()
	putUint(b, metaSince, uint64(rev))
	putUint(b, metaRemoved, uint64(removed))
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("diskindex: forgetting removals up to %d: %w", rev, err)
	}
	d.mu.Lock()
	d.since, d.removedN = rev, removed
	d.mu.Unlock()
	return nil
}

// BeginReconcile starts bringing the index up to date with etcd at some
// revision R without trusting its revision: for an index of id, it keeps
// the records (and a reconciliation compares them with etcd's keys and
// mod revisions); for another identity it empties the index first. Until
// EndReconcile the index is not served (its revision stays the old one
// and Keys fails with storage.ErrCompacted, so that the backend reads the
// range instead) and its revision on disk is 0, so that an index
// left mid-reconciliation is reconciled again at the next start.
func (d *Index) BeginReconcile(id Identity) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.Identity() != id {
		if cur := d.Identity(); cur != (Identity{}) {
			d.opts.Logger.Info("diskindex: discarding an index of another etcd cluster or prefix", "dir", d.opts.Dir,
				"cluster", fmt.Sprintf("%x", cur.ClusterID), "prefix", cur.Prefix)
		}
		if err := d.reset(id); err != nil {
			return err
		}
	}
	b := d.db.NewBatch()
	defer b.Close()
	putUint(b, metaRev, 0)
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("diskindex: %w", err)
	}
	d.mu.Lock()
	d.reconciling, d.persisted = true, 0
	d.mu.Unlock()
	return nil
}

// Scan returns up to limit stored keys from key from (inclusive) on,
// with their mod revisions, in key order: what a reconciliation compares
// with etcd's keys.
func (d *Index) Scan(from string, limit int) ([]KeyRevision, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: objectKey(from), UpperBound: []byte{kindObject + 1}})
	if err != nil {
		return nil, fmt.Errorf("diskindex: %w", err)
	}
	defer it.Close()
	var out []KeyRevision
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		rev, n := binary.Uvarint(it.Value())
		if n <= 0 {
			return nil, fmt.Errorf("diskindex: corrupt record %q", it.Key())
		}
		out = append(out, KeyRevision{Key: string(it.Key()[1:]), ModRevision: int64(rev)})
	}
	return out, it.Error()
}

// EndReconcile ends a reconciliation: the index reflects rev (the
// revision whose keys it was compared with). The removals recorded
// before are dropped, since the changes between the old revision and rev
// are not known: Keys answers from rev on.
func (d *Index) EndReconcile(rev int64) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	b := d.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{kindRemoved}, []byte{kindRemoved + 1}, nil)
	putUint(b, metaRemoved, 0)
	putUint(b, metaSince, uint64(rev))
	putUint(b, metaRev, uint64(rev))
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("diskindex: ending a reconciliation at %d: %w", rev, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reconciling, d.removedN, d.since, d.persisted = false, 0, rev, rev
	d.rev = 0
	d.advance(rev)
	return nil
}

// VictimsOf returns what the index keeps of the keys of leases (for the
// storage budget's early expiry), at most limit per lease.
func (d *Index) VictimsOf(leases []int64, limit int) ([]Usage, error) {
	var out []Usage
	for _, l := range leases {
		lo := leaseKey(l, "")
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: index.PrefixEnd(lo)})
		if err != nil {
			return nil, fmt.Errorf("diskindex: %w", err)
		}
		n := 0
		for it.First(); it.Valid() && n < limit; it.Next() {
			key := string(it.Key()[9:])
			rec, err := d.getRecord(d.db, key)
			if err != nil {
				it.Close()
				return nil, err
			}
			if rec == nil || rec.lease != l {
				continue // changed since the iterator began
			}
			out = append(out, Usage{Key: key, ModRevision: rec.modRev, Size: rec.size, Lease: l, Rule: rec.rule})
			n++
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("diskindex: %w", err)
		}
	}
	return out, nil
}

// Checkpoint writes a consistent copy of the index, as of now, to dir
// (which must not exist): a backup, and what a crash that lost the
// batches after now leaves.
func (d *Index) Checkpoint(dir string) error {
	if err := d.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("diskindex: checkpoint to %s: %w", dir, err)
	}
	return nil
}

// Close writes the revision progress notifications brought the index to
// (without a change) and closes the database and its lock.
func (d *Index) Close() error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	rev, persisted, reconciling := d.rev, d.persisted, d.reconciling
	d.mu.Unlock()
	var err error
	if !reconciling && rev > persisted {
		b := d.db.NewBatch()
		putUint(b, metaRev, uint64(rev))
		err = b.Commit(pebble.NoSync)
		b.Close()
	}
	if cerr := d.closeDB(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("diskindex: close: %w", err)
	}
	return nil
}

func (d *Index) closeDB() error {
	err := d.db.Close()
	d.cache.Unref()
	if lerr := d.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// Keys returns, in key order, up to limit (0: no limit) keys after the
// key after ("" for the first page) that can hold events matching, at
// revision at (0: the index's current revision), the selector p was
// planned from (with Set().Plan), and the revision the index was at: the
// contract of index.Memory.Keys. While a reconciliation runs it fails
// with storage.ErrCompacted (the backend reads the range instead).
func (d *Index) Keys(p index.Plan, at int64, after string, limit int) (keys []string, rev int64, err error) {
	d.mu.RLock()
	rev, since := d.rev, d.since
	if d.closed {
		d.mu.RUnlock()
		return nil, rev, fmt.Errorf("diskindex: %w", storage.ErrClosed)
	}
	if d.reconciling {
		d.mu.RUnlock()
		return nil, rev, fmt.Errorf("the index is being reconciled with etcd: %w", storage.ErrCompacted)
	}
	switch {
	case at > 0 && at < since:
		d.mu.RUnlock()
		return nil, rev, fmt.Errorf("revision %d: removals are kept from %d: %w", at, since, storage.ErrCompacted)
	case at > rev:
		d.mu.RUnlock()
		return nil, rev, fmt.Errorf("revision %d, index at %d: %w", at, rev, storage.ErrFutureRevision)
	}
	snap := d.db.NewSnapshot()
	d.mu.RUnlock()
	defer snap.Close()

	if p.None {
		return nil, rev, nil
	}
	lower, upper := p.KeyRange()
	exclusive := after != "" && after >= lower
	start := lower
	if exclusive {
		start = after
	}
	if p.Range != nil {
		if p, err = d.rangeLookups(snap, p); err != nil {
			return nil, rev, err
		}
	}
	poss := make([]int, len(p.Lookups))
	for i, lk := range p.Lookups {
		pos, ok := d.pos[lk.ID]
		if !ok {
			return nil, rev, fmt.Errorf("index %v is not kept by this index: plan with its Set", lk.ID)
		}
		poss[i] = pos
	}
	removed, err := d.removedSince(snap, p, poss, at, rev, after)
	if err != nil {
		return nil, rev, err
	}
	if p.Name != "" {
		key := p.Namespace + "/" + p.Name
		rec, err := d.getRecord(snap, key)
		if err != nil {
			return nil, rev, err
		}
		if rec != nil && rec.indexed && key > after || len(removed) > 0 {
			return []string{key}, rev, nil
		}
		return nil, rev, nil
	}
	// Streams: an iterator over keys with prefix pre, from pre+start.
	type stream struct {
		it     *pebble.Iterator
		pre    int  // bytes of prefix before the key
		object bool // o records: skip those not indexed
	}
	var streams []*stream
	defer func() {
		for _, s := range streams {
			s.it.Close()
		}
	}()
	open := func(pre []byte, object bool) error {
		lo := append(append([]byte{}, pre...), start...)
		hi := index.PrefixEnd(pre)
		if upper != "" {
			hi = append(append([]byte{}, pre...), upper...)
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("diskindex: %w", err)
		}
		s := &stream{it: it, pre: len(pre), object: object}
		streams = append(streams, s)
		it.First()
		if exclusive && it.Valid() && string(it.Key()[s.pre:]) == after {
			it.Next()
		}
		return nil
	}
	if p.Lookups == nil {
		if err := open([]byte{kindObject}, true); err != nil {
			return nil, rev, err
		}
	}
	for _, lk := range p.Lookups {
		if err := open(index.AppendEntryPrefix([]byte{kindEntry}, lk.ID, lk.Value), false); err != nil {
			return nil, rev, err
		}
	}
	head := func(s *stream) (string, bool) {
		for s.it.Valid() {
			if s.object && (len(s.it.Value()) == 0 || !d.indexedValue(s.it.Value())) {
				s.it.Next()
				continue
			}
			return string(s.it.Key()[s.pre:]), true
		}
		return "", false
	}
	keys = index.MergeKeys(len(streams), func(i int) (string, bool) { return head(streams[i]) },
		func(i int) { streams[i].it.Next() }, removed, limit, keys)
	for _, s := range streams {
		if err := s.it.Error(); err != nil {
			return nil, rev, fmt.Errorf("diskindex: %w", err)
		}
	}
	return keys, rev, nil
}

// rangeLookups turns p's Range into a lookup per value the index holds
// within it (index.RangeLookups), found with a seek per value; a range of
// more than index.MaxRangeLookups values fails with
// index.ErrRangeTooWide. p keeps its Range for removedSince.
func (d *Index) rangeLookups(snap *pebble.Snapshot, p index.Plan) (index.Plan, error) {
	if _, ok := d.pos[p.Range.ID]; !ok {
		return p, fmt.Errorf("index %v is not kept by this index: plan with its Set", p.Range.ID)
	}
	lo, hi := p.Range.Bounds()
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: append([]byte{kindEntry}, lo...), UpperBound: append([]byte{kindEntry}, hi...)})
	if err != nil {
		return p, fmt.Errorf("diskindex: %w", err)
	}
	defer it.Close()
	var corrupt error
	values := func(yield func(string) bool) {
		for ok := it.First(); ok; {
			key, found := index.EntryKey(it.Key()[1:])
			if !found {
				corrupt = fmt.Errorf("diskindex: corrupt entry %q", it.Key())
				return
			}
			// The ID and the value, escaped: range values (buckets) hold no
			// zero byte, so it is the value.
			entry := it.Key()[1 : len(it.Key())-len(key)-2]
			v := string(entry[1:])
			if !yield(v) {
				return
			}
			ok = it.SeekGE(index.PrefixEnd(index.AppendEntryPrefix([]byte{kindEntry}, p.Range.ID, v)))
		}
	}
	lookups, ok := index.RangeLookups(*p.Range, values)
	if err := errors.Join(corrupt, it.Error()); err != nil {
		return p, fmt.Errorf("diskindex: %w", err)
	}
	switch {
	case !ok:
		return p, fmt.Errorf("diskindex: %d buckets at most: %w", index.MaxRangeLookups, index.ErrRangeTooWide)
	case lookups == nil:
		p.Lookups = []index.Lookup{}
	default:
		p.Lookups = lookups
	}
	return p, nil
}

// indexedValue reports whether an o record's value is of an indexed key.
func (d *Index) indexedValue(v []byte) bool {
	c := decoder{b: v}
	c.uvarint()
	c.uvarint()
	c.varint()
	c.str()
	return c.byte1() == 1 && c.err == nil
}

// removedSince returns, sorted and without duplicates, the keys after
// after that left the plan's candidates (were removed or changed values)
// at a revision in (at, rev]; none when at is 0 or rev.
func (d *Index) removedSince(snap *pebble.Snapshot, p index.Plan, poss []int, at, rev int64, after string) ([]string, error) {
	if at <= 0 || at >= rev {
		return nil, nil
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: removedKey(at+1, ""), UpperBound: removedKey(rev+1, "")})
	if err != nil {
		return nil, fmt.Errorf("diskindex: %w", err)
	}
	defer it.Close()
	var out []string
	for it.First(); it.Valid(); it.Next() {
		key := string(it.Key()[9:])
		ns, name, _ := strings.Cut(key, "/")
		if key <= after || p.Namespace != "" && ns != p.Namespace || !p.Clusters.Contains(ns) || p.Name != "" && name != p.Name {
			continue
		}
		ok := p.Lookups == nil && p.Range == nil
		if !ok {
			vals, err := d.decodeValues(it.Value())
			if err != nil {
				return nil, err
			}
			if p.Range != nil {
				// The bucket it had may hold no key now: not a lookup.
				ok = p.Range.Contains(vals[d.pos[p.Range.ID]])
			}
			for j, lk := range p.Lookups {
				ok = ok || vals[poss[j]] == lk.Value
			}
		}
		if ok {
			out = append(out, key)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("diskindex: %w", err)
	}
	sort.Strings(out)
	return compact(out), nil
}

func compact(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// pebbleLogger routes pebble's logs to slog: informational ones at debug
// level, errors at error level.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("diskindex: pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("diskindex: pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("diskindex: pebble: "+format, args...))
}
