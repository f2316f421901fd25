package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblebatch"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

type opKind int

const (
	opCreate opKind = iota
	opUpdate
	opDelete
	opExpire  // delete if still at pre.Revision and expired
	opTrim    // drop change-log entries below trimTo
	opReopen  // reopen the database if a full disk left it unable to write
	opCursor  // save the cursor name at cursorRev (see cursor.go)
	opRecords // apply records to the record space name (see records.go)
)

// op is one write handed to the committer. The submitting goroutine fills
// the request fields (doing the expensive encoding itself, in parallel with
// other requests) and waits on done for the result fields.
type op struct {
	kind            opKind
	ns, name        string
	ev              *corev1.Event // new state; owned by the store once submitted
	proto           []byte        // ev as protobuf, without resourceVersion
	ttl             time.Duration
	pre             storage.Preconditions
	createIfMissing bool
	trimTo          int64
	cursorRev       int64
	records         []storage.RecordWrite

	result *corev1.Event
	prev   *corev1.Event // the state a create or update replaced, for Options.Written
	err    error
	done   chan struct{}
}

// submit hands o to the committer and waits for its outcome. Once queued, a
// write is carried out even if ctx is cancelled, so the wait is not
// cancellable: the caller learns the truth. A write whose ctx has ended
// before it is queued is not queued (a select would pick at random
// between a free queue and an ended ctx).
func (s *Store) submit(ctx context.Context, o *op) error {
	o.done = make(chan struct{})
	if err := ctx.Err(); err != nil {
		return err
	}
	s.submitMu.RLock()
	if s.stopped {
		s.submitMu.RUnlock()
		return storage.ErrClosed
	}
	select {
	case s.ops <- o:
	case <-ctx.Done():
		s.submitMu.RUnlock()
		return ctx.Err()
	}
	s.submitMu.RUnlock()
	<-o.done
	return o.err
}

func checkKey(ns, name string) error {
	if ns == "" || name == "" || bytes.ContainsRune([]byte(ns), '/') || bytes.ContainsRune([]byte(name), '/') {
		return fmt.Errorf("pebblestore: invalid key %q/%q", ns, name)
	}
	return nil
}

func (s *Store) prepareWrite(kind opKind, ev *corev1.Event, opts storage.WriteOptions) (*op, error) {
	if err := checkKey(ev.Namespace, ev.Name); err != nil {
		return nil, err
	}
	ev.ResourceVersion = ""
	proto, err := ev.Marshal()
	if err != nil {
		return nil, fmt.Errorf("pebblestore: encoding event: %w", err)
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = s.opts.DefaultTTL
	}
	return &op{kind: kind, ns: ev.Namespace, name: ev.Name, ev: ev, proto: proto, ttl: ttl,
		pre: opts.Precondition, createIfMissing: opts.CreateIfMissing}, nil
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	if ev.ResourceVersion != "" {
		return nil, errors.New("pebblestore: resourceVersion must not be set on create")
	}
	o, err := s.prepareWrite(opCreate, ev, opts)
	if err != nil {
		return nil, err
	}
	if err := s.submit(ctx, o); err != nil {
		return nil, err
	}
	s.reportWrite(o)
	return o.result, nil
}

// reportWrite tells Options.Written of o's durable create or update.
func (s *Store) reportWrite(o *op) {
	if s.opts.Written != nil {
		s.opts.Written(o.prev, o.result)
	}
}

// Update implements storage.Interface.
func (s *Store) Update(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	o, err := s.prepareWrite(opUpdate, ev, opts)
	if err != nil {
		return nil, err
	}
	if err := s.submit(ctx, o); err != nil {
		return nil, err
	}
	s.reportWrite(o)
	return o.result, nil
}

// Delete implements storage.Interface.
func (s *Store) Delete(ctx context.Context, namespace, name string, pre storage.Preconditions) (*corev1.Event, error) {
	if err := checkKey(namespace, name); err != nil {
		return nil, err
	}
	o := &op{kind: opDelete, ns: namespace, name: name, pre: pre}
	if err := s.submit(ctx, o); err != nil {
		return nil, err
	}
	return o.result, nil
}

// commitLoop is the single writer.
func (s *Store) commitLoop() {
	defer s.wg.Done()
	group := make([]*op, 0, s.opts.MaxGroup)
	for {
		select {
		case o := <-s.ops:
			group = s.gather(append(group[:0], o))
			s.commitGroup(group)
		case <-s.closing:
			// Close has stopped submissions; commit what was accepted.
			for {
				select {
				case o := <-s.ops:
					group = s.gather(append(group[:0], o))
					s.commitGroup(group)
				default:
					return
				}
			}
		}
	}
}

func (s *Store) gather(group []*op) []*op {
	for len(group) < s.opts.MaxGroup {
		select {
		case o := <-s.ops:
			group = append(group, o)
		default:
			return group
		}
	}
	return group
}

// objState is a key's state as the committer sees it: the database's, or
// the one an earlier op of the same group left.
type objState struct {
	exists bool
	rev    int64
	expiry int64
	proto  []byte
	ev     *corev1.Event // decoded lazily
	// logRef tells whether the change-log entry at rev is a reference to
	// this object's key (a create) rather than a copy of its state.
	logRef logRefState
}

// logRefState is objState.logRef.
type logRefState int

const (
	logRefUnknown logRefState = iota // read from the database: look it up
	logRefNo                         // the entry at rev holds the state
	logRefYes                        // the entry at rev refers to the key
)

func (st *objState) event() (*corev1.Event, error) {
	if st.ev == nil {
		ev, err := decodeEvent(st.proto, st.rev)
		if err != nil {
			return nil, err
		}
		st.ev = ev
	}
	return st.ev, nil
}

type group struct {
	batch   *pebblebatch.Sorted
	states  map[string]*objState
	entries []entry
	now     time.Time
	expired int64
	trimTo  int64
	// namespaces are the changes of the group to each namespace's count
	// of events, published with its view.
	namespaces map[string]int64
	// records says the group writes records, which a new view must show
	// once the group is durable, even if it has no events.
	records bool
}

// countIn records that the group changes namespace ns's count by d.
func (g *group) countIn(ns string, d int64) {
	if g.namespaces == nil {
		g.namespaces = map[string]int64{}
	}
	g.namespaces[ns] += d
}

func (s *Store) lookup(g *group, key []byte) (*objState, error) {
	if st, ok := g.states[string(key)]; ok {
		return st, nil
	}
	st := &objState{}
	if !s.presence.mayContain(key) {
		g.states[string(key)] = st
		return st, nil
	}
	val, closer, err := s.db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("pebblestore: reading %q: %w", key, err)
	default:
		rev, expiry, proto, herr := objectHeaderOf(val)
		if herr == nil {
			*st = objState{exists: true, rev: rev, expiry: expiry, proto: bytes.Clone(proto)}
		}
		closer.Close()
		if herr != nil {
			return nil, herr
		}
	}
	g.states[string(key)] = st
	return st, nil
}

func (s *Store) commitGroup(ops []*op) {
	for i, o := range ops {
		if o.kind == opReopen {
			o.err = s.reopen()
			close(o.done)
			ops = append(ops[:i:i], ops[i+1:]...)
			s.commitGroup(ops)
			return
		}
	}
	if len(ops) == 0 {
		return
	}
	// Writes that cannot be made durable are refused before pebble sees
	// them: pebble cannot recover from a failed log write. The check comes
	// before staging, which changes the committer's state.
	if err := s.writable(estimateBytes(ops)); err != nil {
		for _, o := range ops {
			o.err = err
			close(o.done)
		}
		return
	}
	g := &group{
		batch:  &s.staging,
		states: make(map[string]*objState, len(ops)),
		now:    s.clock.Now(),
	}
	s.staging.Reset(s.db.NewBatch())
	defer s.staging.Close() // its staging area is kept for the next group
	startRev, startCount, startBytes := s.rev, s.count, s.liveBytes
	for _, o := range ops {
		o.err = s.stage(g, o)
	}
	if !g.batch.Empty() {
		g.batch.Set(metaRevision, revBytes(s.rev))
		g.batch.Set(metaCount, revBytes(s.count))
		g.batch.Set(metaBytes, revBytes(s.liveBytes))
		if s.timeServed.Load() {
			g.batch.Set(metaTimeIndex, revBytes(s.rev))
		}
		wo := pebble.Sync
		if s.opts.NoSync {
			wo = pebble.NoSync
		}
		err := g.batch.Commit(wo)
		if err == nil && s.health.isBroken() {
			// Pebble's log write failed (see pebbleLogger.Fatalf) and it
			// returned all the same: the group is not durable.
			err = s.health.err()
		}
		if err != nil {
			if !errors.Is(err, storage.ErrUnavailable) {
				err = fmt.Errorf("pebblestore: commit: %w", err)
			}
			s.health.logError("commit failed; the group's writes are rejected", "err", err, "writes", len(ops))
			s.rev, s.count, s.liveBytes = startRev, startCount, startBytes
			s.presence, s.commitFailed = s.rebuildPresence(), true
			for _, o := range ops {
				if o.err == nil {
					o.err, o.result = err, nil
				}
			}
			g.entries, g.expired, g.trimTo, g.records = nil, 0, 0, false
		}
	}
	if g.trimTo > 0 {
		s.oldestRev.Store(g.trimTo)
	}
	if len(g.entries) > 0 {
		s.commits.Add(1)
		s.committed.Add(int64(len(g.entries)))
		s.durableRev.Store(s.rev)
		s.events.Store(s.count)
		s.storedBytes.Store(s.liveBytes)
		s.expired.Add(g.expired)
		s.publishView(s.rev, g.namespaces)
		s.hub.append(g.entries)
	} else if g.records {
		// Records take no revision: the view is one of the same
		// revision (the same events) that shows them.
		s.publishView(s.rev, nil)
	}
	for _, o := range ops {
		close(o.done)
	}
	s.budgetCheck()
}

// estimateBytes bounds what committing ops adds to pebble's log: each
// write's object, the previous state or index entries it may log beside
// it, and some keys.
func estimateBytes(ops []*op) int {
	n := 0
	for _, o := range ops {
		n += 2*len(o.proto) + 1024
		for _, w := range o.records {
			n += len(o.name) + len(w.Key) + len(w.Value) + 32
		}
	}
	return n
}

// stage adds o's writes to the group's batch.
func (s *Store) stage(g *group, o *op) error {
	if o.kind == opCursor {
		g.batch.Set(cursorKey(o.name), revBytes(o.cursorRev))
		return nil
	}
	if o.kind == opRecords {
		stageRecords(g, o.name, o.records)
		return nil
	}
	if o.kind == opTrim {
		g.batch.DeleteRange(logKey(0), logKey(o.trimTo))
		g.batch.Set(metaOldest, revBytes(o.trimTo))
		g.trimTo = o.trimTo
		return nil
	}
	key := objectKey(o.ns, o.name)
	cur, err := s.lookup(g, key)
	if err != nil {
		return err
	}
	switch o.kind {
	case opCreate:
		if cur.exists {
			return fmt.Errorf("event %s/%s: %w", o.ns, o.name, storage.ErrExists)
		}
		return s.put(g, o, key, cur)
	case opUpdate:
		if !cur.exists {
			if !o.createIfMissing {
				return fmt.Errorf("event %s/%s: %w", o.ns, o.name, storage.ErrNotFound)
			}
			return s.put(g, o, key, cur)
		}
		if err := s.checkPreconditions(o, cur); err != nil {
			return err
		}
		if bytes.Equal(cur.proto, o.proto) {
			// Nothing changed: like kube-apiserver, write nothing and keep
			// the revision and the TTL.
			ev, err := cur.event()
			o.result = ev
			return err
		}
		return s.put(g, o, key, cur)
	case opDelete, opExpire:
		if !cur.exists {
			return fmt.Errorf("event %s/%s: %w", o.ns, o.name, storage.ErrNotFound)
		}
		if o.kind == opExpire && (cur.rev != o.pre.Revision || cur.expiry > g.now.UnixNano()) {
			return storage.ErrConflict // written again since: not expired
		}
		if err := s.checkPreconditions(o, cur); err != nil {
			return err
		}
		return s.remove(g, o, key, cur)
	}
	return fmt.Errorf("pebblestore: unknown op %d", o.kind)
}

func (s *Store) checkPreconditions(o *op, cur *objState) error {
	if o.pre.Revision > 0 && o.pre.Revision != cur.rev {
		return fmt.Errorf("event %s/%s is at revision %d, not %d: %w", o.ns, o.name, cur.rev, o.pre.Revision, storage.ErrConflict)
	}
	if o.pre.UID != "" {
		ev, err := cur.event()
		if err != nil {
			return err
		}
		if string(ev.UID) != o.pre.UID {
			return fmt.Errorf("event %s/%s has UID %s, not %s: %w", o.ns, o.name, ev.UID, o.pre.UID, storage.ErrConflict)
		}
	}
	return nil
}

// revBytes encodes rev, or another of the store's int64 values, as 8
// big-endian bytes: the form of metadata values (see readMeta) and of
// expiry-queue values.
func revBytes(rev int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(rev))
	return b[:]
}

// put writes o's new state over cur (which may not exist).
func (s *Store) put(g *group, o *op, key []byte, cur *objState) error {
	b := g.batch
	sfx := key[1:]
	var prev *corev1.Event
	var oldIdx [][]byte
	if cur.exists {
		var err error
		if prev, err = cur.event(); err != nil {
			return err
		}
		if err := s.materializeCreate(g, cur); err != nil {
			return err
		}
		oldIdx = indexKeys(s.indexes, prev, sfx)
		s.liveBytes -= storedBytes(key, len(cur.proto), oldIdx)
	}
	rev := s.rev + 1
	expiry := g.now.Add(o.ttl).UnixNano()
	b.Set(key, encodeObject(rev, expiry, o.proto))
	b.Set(expiryKey(expiry, sfx), revBytes(rev))
	newIdx := indexKeys(s.indexes, o.ev, sfx)
	s.liveBytes += storedBytes(key, len(o.proto), newIdx)
	typ := watch.Added
	if cur.exists {
		typ = watch.Modified
		if cur.expiry != expiry {
			// Equal when a clock did not move (a fake one): the entry
			// just set is the one to keep.
			b.Delete(expiryKey(cur.expiry, sfx))
		}
		for _, k := range oldIdx {
			if !containsKey(newIdx, k) {
				b.Delete(k)
			}
		}
		for _, k := range newIdx {
			if !containsKey(oldIdx, k) {
				b.Set(k, nil)
			}
		}
		var prevProto []byte
		if !eventapi.SameSelection(prev, o.ev) {
			prevProto = cur.proto
		}
		b.Set(logKey(rev), encodeLog(logModified, o.proto, prevProto))
	} else {
		for _, k := range newIdx {
			b.Set(k, nil)
		}
		b.Set(logKey(rev), encodeLogRef(sfx))
		s.count++
		g.countIn(o.ev.Namespace, 1)
		s.presence.add(key)
	}
	s.rev = rev
	o.ev.ResourceVersion = strconv.FormatInt(rev, 10)
	o.result, o.prev = o.ev, prev
	ref := logRefNo
	if typ == watch.Added {
		ref = logRefYes
	}
	g.states[string(key)] = &objState{exists: true, rev: rev, expiry: expiry, proto: o.proto, ev: o.ev, logRef: ref}
	size := entrySize(len(o.proto))
	if prev != nil {
		size += entrySize(len(cur.proto))
	}
	g.entries = append(g.entries, entry{rev: rev, typ: typ, obj: o.ev, prev: prev, size: size})
	return nil
}

// remove deletes cur.
func (s *Store) remove(g *group, o *op, key []byte, cur *objState) error {
	b := g.batch
	sfx := key[1:]
	last, err := cur.event()
	if err != nil {
		return err
	}
	if err := s.materializeCreate(g, cur); err != nil {
		return err
	}
	rev := s.rev + 1
	b.Delete(key)
	b.Delete(expiryKey(cur.expiry, sfx))
	lastIdx := indexKeys(s.indexes, last, sfx)
	for _, k := range lastIdx {
		b.Delete(k)
	}
	s.liveBytes -= storedBytes(key, len(cur.proto), lastIdx)
	b.Set(logKey(rev), encodeLog(logDeleted, cur.proto, nil))
	s.rev = rev
	s.count--
	g.countIn(last.Namespace, -1)
	s.presence.remove(key)
	deleted := withRevision(last, rev)
	o.result = deleted
	g.states[string(key)] = &objState{}
	g.entries = append(g.entries, entry{rev: rev, typ: watch.Deleted, obj: deleted, size: entrySize(len(cur.proto))})
	if o.kind == opExpire {
		g.expired++
	}
	return nil
}

// materializeCreate is called before a write overwrites cur. If cur's
// state is logged only as a reference from its create's log entry (the
// object's revision is its create's), the reference is about to point at
// a later state, so the entry gets a full copy of cur's state in the same
// batch: the log then holds every change of the history window, including
// those of objects deleted since, for watches resuming from it. Creates,
// the common write, stay cheap; the cost is one read of a recent log entry
// per update or delete of an object not updated since its creation.
func (s *Store) materializeCreate(g *group, cur *objState) error {
	switch cur.logRef {
	case logRefNo:
		return nil
	case logRefUnknown:
		if cur.rev < s.oldestRev.Load() || cur.rev < g.trimTo {
			return nil // trimmed: no watch can ask for it
		}
		val, closer, err := s.db.Get(logKey(cur.rev))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pebblestore: reading the log at %d: %w", cur.rev, err)
		}
		isRef := len(val) > 0 && val[0] == logAddedRef
		closer.Close()
		if !isRef {
			cur.logRef = logRefNo
			return nil
		}
	}
	g.batch.Set(logKey(cur.rev), encodeLog(logAdded, cur.proto, nil))
	cur.logRef = logRefNo
	return nil
}

// withRevision returns a shallow copy of ev carrying rev.
func withRevision(ev *corev1.Event, rev int64) *corev1.Event {
	c := *ev
	c.ResourceVersion = strconv.FormatInt(rev, 10)
	return &c
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

// rebuildPresence reloads the presence set after a failed commit, whose
// staged adds and removes did not happen. If even that read fails, every
// key is treated as maybe present: correct, only slower.
func (s *Store) rebuildPresence() *presence {
	p, _, err := loadPresence(s.db, s.count)
	if err != nil {
		s.log.Error("rebuilding the key set after a failed commit; falling back to reads", "err", err)
		return &presence{unknown: true}
	}
	return p
}
