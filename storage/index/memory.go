package index

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
)

// Memory is an in-memory secondary index of events by key, for a backend
// whose store cannot index (etcd): for each index of its Set, the keys of
// the events holding each value, in key order. Keys are "<namespace>/<name>",
// whose byte order is etcd's and kube-apiserver's list order.
//
// It holds no objects: each key once, a value id per index per event, and
// each distinct value once (interned). Ids are kept in sorted chunks (see
// list) rather than in a B-tree such as github.com/google/btree: a chunk
// costs about 5 bytes per id where a B-tree of uint32 items leaves its
// nodes a third empty and adds a node header per few dozen items, and no
// dependency is needed. With 1M realistic events (All(), see
// BenchmarkMemoryBytesPerEvent) it holds about 190 bytes per event: the
// key (about 80 of them for a 50-byte key), 40 for the value ids, about
// 45 for the list entries and about 25 for interned uids and names.
//
// One goroutine (the watch feed) writes with Put and Delete; any number
// read concurrently. Every write records the revision it brings the index
// to, and reads return the revision they saw, so that a backend fetches
// the candidates at that revision.
type Memory struct {
	set Set
	mu  sync.RWMutex

	obj   objects
	free  []uint32 // ids of free objects
	byKey list     // every object, by key
	lists []list   // per index position: the objects with a value, by (value id, key)

	// Interned values, by id (0 is no value): the string, and how many
	// index entries refer to it.
	strs     []string
	refs     []uint32
	ids      map[string]uint32
	freeStrs []uint32

	// removed are the keys that left the index or changed values, by
	// revision, with the values they had (removedVals, set.Len() per
	// removal), so that Keys can answer for older revisions; since is
	// the oldest revision Keys can answer for.
	removed     []removal
	removedVals []uint32
	since       int64

	rev     int64
	changed chan struct{} // closed, and replaced, when rev advances
}

// valueOf returns the value ev has for index id ("" for none).
func valueOf(ev *corev1.Event, id ID) string { return eventapi.Value(ev, id.Field()) }

// NewMemory returns an empty index keeping the indexes of set (for the etcd
// backend, All()).
func NewMemory(set Set) *Memory {
	return &Memory{
		set:     set,
		obj:     objects{stride: set.Len()},
		lists:   make([]list, set.Len()),
		strs:    []string{""},
		refs:    []uint32{0},
		ids:     map[string]uint32{},
		changed: make(chan struct{}),
	}
}

// Set returns the indexes m keeps; plan lookups for m with its Plan.
func (m *Memory) Set() Set { return m.set }

// Len returns the number of indexed events.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byKey.n
}

// Revision returns the revision of the last write (or SetRevision).
func (m *Memory) Revision() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev
}

// keyBefore returns the predicate of list.search for the first object whose
// key is >= key (or > key when after is set).
func (m *Memory) keyBefore(key string, after bool) func(uint32) bool {
	if after {
		return func(o uint32) bool { return m.obj.key(o) <= key }
	}
	return func(o uint32) bool { return m.obj.key(o) < key }
}

// valBefore is keyBefore within the list of index position p, for value
// id v.
func (m *Memory) valBefore(p int, v uint32, key string, after bool) func(uint32) bool {
	return func(o uint32) bool {
		ov := m.obj.val(o, p)
		if ov != v {
			return ov < v
		}
		if after {
			return m.obj.key(o) <= key
		}
		return m.obj.key(o) < key
	}
}

// find returns the object holding key and its position in byKey.
func (m *Memory) find(key string) (uint32, pos, bool) {
	p := m.byKey.search(m.keyBefore(key, false))
	o, ok := m.byKey.at(p)
	return o, p, ok && m.obj.key(o) == key
}

// Put indexes ev under key, replacing what key had, and records rev as the
// index's revision (it never goes back). The index keeps copies of key and
// of ev's values, never ev.
func (m *Memory) Put(key string, ev *corev1.Event, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.advance(rev)
	o, at, ok := m.find(key)
	if ok && m.changes(o, ev) {
		m.logRemoval(o, rev)
	}
	if !ok {
		key = strings.Clone(key)
		if k := len(m.free); k > 0 {
			o, m.free = m.free[k-1], m.free[:k-1]
		} else {
			o = m.obj.add()
		}
		m.obj.setKey(o, key)
		m.byKey.insert(at, o)
	}
	for p, id := range m.set.ids {
		v := valueOf(ev, id)
		old := m.obj.val(o, p)
		if old != 0 && m.strs[old] == v {
			continue
		}
		if old != 0 {
			m.unindex(p, o, old)
		}
		if v != "" {
			nv := m.intern(v)
			m.lists[p].insert(m.lists[p].search(m.valBefore(p, nv, m.obj.key(o), false)), o)
			m.obj.setVal(o, p, nv)
		}
	}
}

// changes reports whether ev has other values than object o.
func (m *Memory) changes(o uint32, ev *corev1.Event) bool {
	for p, id := range m.set.ids {
		if v := m.obj.val(o, p); m.strs[v] != valueOf(ev, id) {
			return true
		}
	}
	return false
}

// Delete removes key from the index, if it is there, and records rev as
// the index's revision.
func (m *Memory) Delete(key string, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.advance(rev)
	o, at, ok := m.find(key)
	if !ok {
		return
	}
	m.logRemoval(o, rev)
	for p := range m.set.ids {
		if v := m.obj.val(o, p); v != 0 {
			m.unindex(p, o, v)
		}
	}
	m.byKey.remove(at)
	m.obj.setKey(o, "")
	m.free = append(m.free, o)
}

// SetRevision records that the index reflects rev (a progress
// notification from the watch feed) without a change.
func (m *Memory) SetRevision(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(rev)
}

// Wait returns once the index has reached rev, or with ctx's error.
func (m *Memory) Wait(ctx context.Context, rev int64) error {
	for {
		m.mu.RLock()
		cur, ch := m.rev, m.changed
		m.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("index at revision %d, waiting for %d: %w", cur, rev, ctx.Err())
		}
	}
}

// advance records rev and wakes waiters; m.mu is held.
func (m *Memory) advance(rev int64) {
	if rev > m.rev {
		if m.rev == 0 {
			m.since = rev // the index was built at rev: nothing older is known
		}
		m.rev = rev
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// unindex removes object o, holding value id v, from the list at position p.
func (m *Memory) unindex(p int, o, v uint32) {
	l := &m.lists[p]
	at := l.search(m.valBefore(p, v, m.obj.key(o), false))
	l.remove(at)
	m.obj.setVal(o, p, 0)
	m.unref(v)
}

// unref drops a reference to value id v, freeing it with the last one.
func (m *Memory) unref(v uint32) {
	if m.refs[v]--; m.refs[v] == 0 {
		delete(m.ids, m.strs[v])
		m.strs[v] = ""
		m.freeStrs = append(m.freeStrs, v)
	}
}

// intern returns the id of value s, taking a reference to it.
func (m *Memory) intern(s string) uint32 {
	if v, ok := m.ids[s]; ok {
		m.refs[v]++
		return v
	}
	s = strings.Clone(s)
	var v uint32
	if k := len(m.freeStrs); k > 0 {
		v, m.freeStrs = m.freeStrs[k-1], m.freeStrs[:k-1]
		m.strs[v], m.refs[v] = s, 1
	} else {
		v = uint32(len(m.strs))
		m.strs = append(m.strs, s)
		m.refs = append(m.refs, 1)
	}
	m.ids[s] = v
	return v
}

// Keys returns, in key order, up to limit (0: no limit) keys after the
// key after ("" for the first page) that can hold events matching, at
// revision at (0: the index's current revision), the selector p was
// planned from (with m.Set().Plan): those of its lookups' union, or every
// key when it has none, within its namespace. It also returns the
// revision the index was at.
//
// The backend fetches the keys' objects at the list's revision and keeps
// those Selector.Matches accepts. The keys are a superset of the matches
// at every revision from at to the index's: for an older at they include
// the keys removed, or whose values changed, since (see Forget), and keys
// created since, which the fetch at the older revision does not find.
// When fewer than limit keys come back, there are no more. An at older
// than the removals kept gives an error wrapping storage.ErrCompacted.
func (m *Memory) Keys(p Plan, at int64, after string, limit int) (keys []string, rev int64, err error) {
	type stream struct {
		l  *list
		at pos
		in func(uint32) bool // still within the stream
	}
	lower := ""
	if p.Namespace != "" {
		lower = p.Namespace + "/"
	}
	exclusive := after != "" && after >= lower
	start := lower
	if exclusive {
		start = after
	}
	inNS := func(o uint32) bool { return strings.HasPrefix(m.obj.key(o), lower) }

	m.mu.RLock()
	defer m.mu.RUnlock()
	rev = m.rev
	if at > 0 && at < m.since {
		return nil, rev, fmt.Errorf("revision %d: removals are kept from %d: %w", at, m.since, storage.ErrCompacted)
	}
	vids := make([]uint32, len(p.Lookups)) // value ids; 0 for values the index has never seen
	poss := make([]int, len(p.Lookups))
	for i, lk := range p.Lookups {
		if poss[i] = m.set.pos(lk.ID); poss[i] < 0 {
			return nil, rev, fmt.Errorf("index %v is not kept by this index: plan with its Set", lk.ID)
		}
		vids[i] = m.ids[lk.Value]
	}
	// removed are the keys that left the plan's candidates after at.
	var removed []string
	if at > 0 && at < m.rev {
		for i := sort.Search(len(m.removed), func(i int) bool { return m.removed[i].rev > at }); i < len(m.removed); i++ {
			r := m.removed[i]
			if r.key <= after || !strings.HasPrefix(r.key, lower) || p.Name != "" && r.key != p.Namespace+"/"+p.Name {
				continue
			}
			ok := p.Lookups == nil
			for j := range p.Lookups {
				ok = ok || vids[j] != 0 && m.removedVals[i*m.set.Len()+poss[j]] == vids[j]
			}
			if ok {
				removed = append(removed, r.key)
			}
		}
		slices.Sort(removed)
		removed = slices.Compact(removed)
	}
	var streams []stream
	switch {
	case p.None:
		return nil, rev, nil
	case p.Name != "":
		key := p.Namespace + "/" + p.Name
		if _, _, ok := m.find(key); ok && key > after || len(removed) > 0 {
			return []string{key}, rev, nil
		}
		return nil, rev, nil
	case p.Lookups == nil:
		streams = append(streams, stream{l: &m.byKey, at: m.byKey.search(m.keyBefore(start, exclusive)), in: inNS})
	}
	for i, v := range vids {
		if v == 0 {
			continue
		}
		l, p := &m.lists[poss[i]], poss[i]
		streams = append(streams, stream{l: l, at: l.search(m.valBefore(p, v, start, exclusive)),
			in: func(o uint32) bool { return m.obj.val(o, p) == v && inNS(o) }})
	}
	for limit <= 0 || len(keys) < limit {
		// The smallest key at the head of a stream; equal heads are one key.
		best := ""
		found := len(removed) > 0
		if found {
			best = removed[0]
		}
		for _, s := range streams {
			if o, ok := s.l.at(s.at); ok && s.in(o) && (!found || m.obj.key(o) < best) {
				best, found = m.obj.key(o), true
			}
		}
		if !found {
			break
		}
		keys = append(keys, best)
		if len(removed) > 0 && removed[0] == best {
			removed = removed[1:]
		}
		for i := range streams {
			s := &streams[i]
			if o, ok := s.l.at(s.at); ok && m.obj.key(o) == best {
				s.at = s.l.next(s.at)
			}
		}
	}
	return keys, rev, nil
}

// removal records that key left the index, or changed values, at rev; the
// values it had are in removedVals, referenced.
type removal struct {
	rev int64
	key string
}

// maxRemoved bounds the removals kept when the backend does not Forget
// them: about 64 MB (64 bytes each), a 5-minute etcd compaction window at
// 3,000 deletions and updates a second.
const maxRemoved = 1 << 20

// logRemoval records that object o leaves its values at rev (it is deleted
// or its values change), keeping references to them; m.mu is held.
func (m *Memory) logRemoval(o uint32, rev int64) {
	if len(m.removed) >= maxRemoved {
		m.forget(m.removed[len(m.removed)/4].rev)
	}
	m.removed = append(m.removed, removal{rev: rev, key: m.obj.key(o)})
	for p := range m.set.ids {
		v := m.obj.val(o, p)
		if v != 0 {
			m.refs[v]++
		}
		m.removedVals = append(m.removedVals, v)
	}
}

// Forget drops the removals of revisions up to rev, so that Keys at a
// revision older than rev fail. The backend calls it with the revision its
// store is compacted to (lists older than that cannot be served anyway).
// Until it does, at most 1M removals (about 64 MB) are kept.
func (m *Memory) Forget(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forget(rev)
}

// forget is Forget with m.mu held.
func (m *Memory) forget(rev int64) {
	n := sort.Search(len(m.removed), func(i int) bool { return m.removed[i].rev > rev })
	stride := m.set.Len()
	for _, v := range m.removedVals[:n*stride] {
		if v != 0 {
			m.unref(v)
		}
	}
	clear(m.removed[:n])
	m.removed = m.removed[n:]
	m.removedVals = m.removedVals[n*stride:]
	if len(m.removed) < cap(m.removed)/2 { // give back the dropped front
		m.removed = slices.Clone(m.removed)
		m.removedVals = slices.Clone(m.removedVals)
	}
	m.since = max(m.since, rev)
}

// objBlock is how many objects a block of the object tables holds. The
// tables grow a block at a time, so they never hold more than a block of
// spare room, nor copy themselves as a slice grown by append does (which
// at a million events briefly doubles 60 MB).
const objBlock = 4096

// objects are the object tables, by object id: each object's key ("" when
// the id is free) and, for each index position p of the set, the id of
// the value the object has in that index (0 for none).
type objects struct {
	n      int // ids handed out
	stride int // index positions
	keys   [][]string
	vals   [][]uint32
}

// add returns a new object id.
func (t *objects) add() uint32 {
	if t.n%objBlock == 0 {
		t.keys = append(t.keys, make([]string, objBlock))
		t.vals = append(t.vals, make([]uint32, objBlock*t.stride))
	}
	t.n++
	return uint32(t.n - 1)
}

// key returns the key of object o.
func (t *objects) key(o uint32) string { return t.keys[o/objBlock][o%objBlock] }

// setKey sets the key of object o.
func (t *objects) setKey(o uint32, k string) { t.keys[o/objBlock][o%objBlock] = k }

// val returns the value id of object o at index position p.
func (t *objects) val(o uint32, p int) uint32 {
	return t.vals[o/objBlock][int(o%objBlock)*t.stride+p]
}

// setVal sets the value id of object o at index position p.
func (t *objects) setVal(o uint32, p int, v uint32) {
	t.vals[o/objBlock][int(o%objBlock)*t.stride+p] = v
}
