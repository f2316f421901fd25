package index

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
)

// Memory is an in-memory secondary index of events by key, for a backend
// whose store cannot index (etcd): for each index of its Set, the keys of
// the events holding each value, in key order. Keys are "<namespace>/<name>",
// whose byte order is etcd's and kube-apiserver's list order.
//
// It holds no objects: each name once, a namespace id and a value id per
// index per event, and each distinct namespace and value once (interned).
// Object ids are kept in sorted chunks (see list) rather than in a B-tree
// such as github.com/google/btree: a chunk costs about 5 bytes per id
// where a B-tree of uint32 items leaves its nodes a third empty and adds a
// node header per few dozen items, and no dependency is needed. With 1M
// realistic events (All(), see BenchmarkMemoryBytesPerEvent) it holds
// about 160 bytes of heap per event: the name (47 for a 42-byte name: its
// bytes and length in a pointer-free arena, and a 4-byte reference), 44
// for the namespace and value ids, about 45 for the list entries and about
// 22 for interned uids and names (their bytes in an arena too). Names and
// values live in arenas rather than as Go strings to save the string
// header and size-class rounding, to give the GC nothing to scan, and
// because long-lived small objects allocated among the garbage of the
// decoded events pin that garbage's heap spans: the process's resident
// memory per event is about 180 bytes once the build's garbage is
// returned to the OS (RSS-B/event). (Measured before the LastObserved
// index, which adds a value id and a list entry, about 9 bytes, per
// event, and a 16-byte bucket string per minute present.)
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

	// Interned namespaces and values, by id (0 is none): the string, and
	// how many objects, index entries and removals refer to it. The
	// strings' bytes are in strArena (at strRefs), as the names are in
	// theirs: the strings of strs and the keys of ids point there.
	// Cloned one by one, they would be small objects allocated among the
	// garbage of the decoded events, each keeping a heap span of that
	// garbage from being reused or returned (25 to 35 bytes per event at
	// 1M: more than the strings).
	strs     []string
	strRefs  []uint32
	strArena nameArena
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

	// timePos is the position of LastObserved in set (-1: not kept);
	// buckets counts the objects of each of its values, so that a time
	// range becomes a lookup per bucket present (RangeLookups).
	timePos int
	buckets map[string]int
}

// valueOf returns the value ev has for index id ("" for none).
func valueOf(ev *corev1.Event, id ID) string { return Value(ev, id) }

// NewMemory returns an empty index keeping the indexes of set (for the etcd
// backend, All()).
func NewMemory(set Set) *Memory {
	return &Memory{
		set:      set,
		obj:      newObjects(set.Len()),
		lists:    make([]list, set.Len()),
		strs:     []string{""},
		strRefs:  []uint32{0},
		strArena: newNameArena(),
		refs:     []uint32{0},
		ids:      map[string]uint32{},
		changed:  make(chan struct{}),
		timePos:  set.pos(LastObserved),
		buckets:  map[string]int{},
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

// compareKey compares the key ns+"/"+name with t, as strings, without
// building the key.
func compareKey(ns, name, t string) int {
	n := min(len(ns), len(t))
	if c := strings.Compare(ns[:n], t[:n]); c != 0 {
		return c
	}
	switch {
	case len(t) == n: // t is a prefix of ns: the key is longer
		return 1
	case t[n] != '/':
		return compareByte('/', t[n])
	}
	return strings.Compare(name, t[n+1:])
}

// key returns the key of object o.
func (m *Memory) key(o uint32) string { return m.strs[m.obj.ns(o)] + "/" + m.obj.name(o) }

// cmp compares the key of object o with t.
func (m *Memory) cmp(o uint32, t string) int {
	return compareKey(m.strs[m.obj.ns(o)], m.obj.name(o), t)
}

// cmpObj compares the keys of objects a and b.
func (m *Memory) cmpObj(a, b uint32) int {
	na, nb := m.obj.ns(a), m.obj.ns(b)
	if na == nb {
		return strings.Compare(m.obj.name(a), m.obj.name(b))
	}
	return compareNS(m.strs[na], m.strs[nb])
}

// compareNS compares a+"/" with b+"/": the order of keys in namespaces a
// and b.
func compareNS(a, b string) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	switch {
	case len(a) == len(b):
		return 0
	case len(a) < len(b):
		return compareByte('/', b[n])
	}
	return compareByte(a[n], '/')
}

// compareByte compares two bytes.
func compareByte(a, b byte) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keyBefore returns the predicate of list.search for the first object whose
// key is >= t (or > t when after is set).
func (m *Memory) keyBefore(t string, after bool) func(uint32) bool {
	if after {
		return func(o uint32) bool { return m.cmp(o, t) <= 0 }
	}
	return func(o uint32) bool { return m.cmp(o, t) < 0 }
}

// valBefore is keyBefore within the list of index position p, for value
// id v.
func (m *Memory) valBefore(p int, v uint32, t string, after bool) func(uint32) bool {
	return func(o uint32) bool {
		if ov := m.obj.val(o, p); ov != v {
			return ov < v
		}
		if after {
			return m.cmp(o, t) <= 0
		}
		return m.cmp(o, t) < 0
	}
}

// objBefore is valBefore for the key of object o.
func (m *Memory) objBefore(p int, v, o uint32) func(uint32) bool {
	return func(x uint32) bool {
		if xv := m.obj.val(x, p); xv != v {
			return xv < v
		}
		return m.cmpObj(x, o) < 0
	}
}

// find returns the object holding namespace/name and its position in
// byKey.
func (m *Memory) find(namespace, name string) (uint32, pos, bool) {
	ns := m.ids[namespace]
	p := m.byKey.search(func(o uint32) bool {
		if on := m.obj.ns(o); on != ns {
			return compareNS(m.strs[on], namespace) < 0
		}
		return m.obj.name(o) < name
	})
	o, ok := m.byKey.at(p)
	return o, p, ok && ns != 0 && m.obj.ns(o) == ns && m.obj.name(o) == name
}

// Put indexes ev under its namespace and name, replacing what that key
// had, and records rev as the index's revision (it never goes back). The
// index keeps copies of ev's name and values, never ev.
func (m *Memory) Put(ev *corev1.Event, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.advance(rev)
	o, at, ok := m.find(ev.Namespace, ev.Name)
	if ok && m.changes(o, ev) {
		m.logRemoval(o, rev)
	}
	if !ok {
		if k := len(m.free); k > 0 {
			o, m.free = m.free[k-1], m.free[:k-1]
		} else {
			o = m.obj.add()
		}
		m.obj.set(o, m.intern(ev.Namespace), ev.Name)
		// Interning a new namespace does not move at: ids order nothing.
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
			m.lists[p].insert(m.lists[p].search(m.objBefore(p, nv, o)), o)
			m.obj.setVal(o, p, nv)
			if p == m.timePos {
				m.buckets[v]++
			}
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

// Delete removes namespace/name from the index, if it is there, and
// records rev as the index's revision.
func (m *Memory) Delete(namespace, name string, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.advance(rev)
	o, at, ok := m.find(namespace, name)
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
	m.unref(m.obj.ns(o))
	m.obj.release(o)
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
	return WaitRevision(ctx, rev, func() (int64, <-chan struct{}) {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.rev, m.changed
	})
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
	if p == m.timePos {
		if b := m.strs[v]; m.buckets[b] <= 1 {
			delete(m.buckets, b)
		} else {
			m.buckets[b]--
		}
	}
	l := &m.lists[p]
	l.remove(l.search(m.objBefore(p, v, o)))
	m.obj.setVal(o, p, 0)
	m.unref(v)
}

// unref drops a reference to id v, freeing it with the last one.
func (m *Memory) unref(v uint32) {
	if m.refs[v]--; m.refs[v] == 0 {
		delete(m.ids, m.strs[v])
		m.strs[v] = ""
		m.strArena.remove(m.strRefs[v])
		m.freeStrs = append(m.freeStrs, v)
		if m.strArena.wasteful() {
			m.compactStrs()
		}
	}
}

// intern returns the id of s, taking a reference to it.
func (m *Memory) intern(s string) uint32 {
	if v, ok := m.ids[s]; ok {
		m.refs[v]++
		return v
	}
	ref := m.strArena.add(s)
	s = m.strArena.name(ref)
	var v uint32
	if k := len(m.freeStrs); k > 0 {
		v, m.freeStrs = m.freeStrs[k-1], m.freeStrs[:k-1]
		m.strs[v], m.strRefs[v], m.refs[v] = s, ref, 1
	} else {
		v = uint32(len(m.strs))
		m.strs = append(m.strs, s)
		m.strRefs = append(m.strRefs, ref)
		m.refs = append(m.refs, 1)
	}
	m.ids[s] = v
	return v
}

// compactStrs copies the interned strings in use to a new arena (see
// objects.compact), and rebuilds ids, whose keys point into the old one.
func (m *Memory) compactStrs() {
	a := newNameArena()
	m.ids = make(map[string]uint32, len(m.ids))
	for v := 1; v < len(m.strs); v++ {
		if m.refs[v] > 0 {
			m.strRefs[v] = a.add(m.strs[v])
			m.strs[v] = a.name(m.strRefs[v])
			m.ids[m.strs[v]] = uint32(v)
		}
	}
	m.strArena = a
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
// than the removals kept gives an error wrapping storage.ErrCompacted; an
// at newer than the index, one wrapping storage.ErrFutureRevision (Wait
// for it first).
func (m *Memory) Keys(p Plan, at int64, after string, limit int) (keys []string, rev int64, err error) {
	type stream struct {
		l  *list
		at pos
		in func(uint32) bool // still within the stream
	}
	lower, _ := p.KeyRange()
	exclusive := after != "" && after >= lower
	start := lower
	if exclusive {
		start = after
	}

	m.mu.RLock()
	defer m.mu.RUnlock()
	rev = m.rev
	switch {
	case at > 0 && at < m.since:
		return nil, rev, fmt.Errorf("revision %d: removals are kept from %d: %w", at, m.since, storage.ErrCompacted)
	case at > rev:
		return nil, rev, fmt.Errorf("revision %d, index at %d: %w", at, rev, storage.ErrFutureRevision)
	}
	if p.Range != nil {
		// A lookup per bucket present in the range; a range of more
		// than MaxRangeLookups buckets is ErrRangeTooWide.
		if m.set.pos(p.Range.ID) < 0 {
			return nil, rev, fmt.Errorf("index %v is not kept by this index: plan with its Set", p.Range.ID)
		}
		lookups, ok := RangeLookups(*p.Range, maps.Keys(m.buckets))
		switch {
		case !ok:
			return nil, rev, fmt.Errorf("%d buckets at most: %w", MaxRangeLookups, ErrRangeTooWide)
		case lookups == nil:
			p.Lookups = []Lookup{}
		default:
			p.Lookups = lookups
		}
	}
	nsID := m.ids[p.Namespace]
	inNS := func(o uint32) bool { return p.Namespace == "" || m.obj.ns(o) == nsID }
	if p.Namespace == "" && !p.Clusters.IsAny() {
		inNS = func(o uint32) bool { return p.Clusters.Contains(m.strs[m.obj.ns(o)]) }
	}
	vids := make([]uint32, len(p.Lookups)) // value ids; 0 for values the index does not hold
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
			ns := m.strs[r.ns]
			if compareKey(ns, r.name, after) <= 0 || p.Namespace != "" && ns != p.Namespace || !p.Clusters.Contains(ns) || p.Name != "" && r.name != p.Name {
				continue
			}
			ok := p.Lookups == nil
			if p.Range != nil {
				// The bucket it had may hold no object now: not a lookup.
				ok = p.Range.Contains(m.strs[m.removedVals[i*m.set.Len()+m.timePos]])
			}
			for j := range p.Lookups {
				ok = ok || vids[j] != 0 && m.removedVals[i*m.set.Len()+poss[j]] == vids[j]
			}
			if ok {
				removed = append(removed, ns+"/"+r.name)
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
		if _, _, ok := m.find(p.Namespace, p.Name); ok && key > after || len(removed) > 0 {
			return []string{key}, rev, nil
		}
		return nil, rev, nil
	case p.Namespace != "" && nsID == 0 && len(removed) == 0:
		return nil, rev, nil // no key in that namespace
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
	head := func(i int) (string, bool) {
		if o, ok := streams[i].l.at(streams[i].at); ok && streams[i].in(o) {
			return m.key(o), true
		}
		return "", false
	}
	next := func(i int) { streams[i].at = streams[i].l.next(streams[i].at) }
	keys = MergeKeys(len(streams), head, next, removed, limit, keys)
	return keys, rev, nil
}

// removal records that key ns/name left the index, or changed values, at
// rev; the values it had are in removedVals. It holds references to its
// namespace and values.
type removal struct {
	rev  int64
	ns   uint32
	name string
}

// maxRemoved bounds the removals kept when the backend does not Forget
// them: about 80 MB (about 80 bytes each with the name), a 5-minute etcd
// compaction window at 3,000 deletions and updates a second.
const maxRemoved = 1 << 20

// logRemoval records that object o leaves its values at rev (it is deleted
// or its values change), keeping references to them; m.mu is held.
func (m *Memory) logRemoval(o uint32, rev int64) {
	if len(m.removed) >= maxRemoved {
		m.forget(m.removed[len(m.removed)/4].rev)
	}
	ns := m.obj.ns(o)
	m.refs[ns]++
	m.removed = append(m.removed, removal{rev: rev, ns: ns, name: strings.Clone(m.obj.name(o))})
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
// Until it does, at most 1M removals (about 80 MB) are kept.
func (m *Memory) Forget(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forget(rev)
}

// forget is Forget with m.mu held.
func (m *Memory) forget(rev int64) {
	n := sort.Search(len(m.removed), func(i int) bool { return m.removed[i].rev > rev })
	stride := m.set.Len()
	for _, r := range m.removed[:n] {
		m.unref(r.ns)
	}
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

// objects are the object tables, by object id: the id of each object's
// namespace (0 when the id is free), the reference of its name in the
// name arena and, for each index position p of the set, the id of the
// value the object has in that index (0 for none).
type objects struct {
	n      int // ids handed out
	stride int // index positions
	nss    [][]uint32
	refs   [][]uint32 // name references in names
	vals   [][]uint32
	names  nameArena
}

func newObjects(stride int) objects { return objects{stride: stride, names: newNameArena()} }

// add returns a new object id.
func (t *objects) add() uint32 {
	if t.n%objBlock == 0 {
		t.nss = append(t.nss, make([]uint32, objBlock))
		t.refs = append(t.refs, make([]uint32, objBlock))
		t.vals = append(t.vals, make([]uint32, objBlock*t.stride))
	}
	t.n++
	return uint32(t.n - 1)
}

// live reports whether object o is in use.
func (t *objects) live(o uint32) bool { return t.ns(o) != 0 }

// name returns the name of object o, in use. The string shares the name
// arena's bytes: whoever keeps it beyond the call clones it, or the whole
// block stays alive with it.
func (t *objects) name(o uint32) string { return t.names.name(t.refs[o/objBlock][o%objBlock]) }

// ns returns the namespace id of object o.
func (t *objects) ns(o uint32) uint32 { return t.nss[o/objBlock][o%objBlock] }

// set gives object o, free, namespace id ns (not 0) and a copy of name.
func (t *objects) set(o, ns uint32, name string) {
	t.nss[o/objBlock][o%objBlock], t.refs[o/objBlock][o%objBlock] = ns, t.names.add(name)
}

// release frees object o's namespace and name; its values are already 0.
func (t *objects) release(o uint32) {
	t.nss[o/objBlock][o%objBlock] = 0
	t.names.remove(t.refs[o/objBlock][o%objBlock])
	if t.names.wasteful() {
		t.compact()
	}
}

// compact copies the live names to a new arena, leaving the holes of the
// removed ones behind: O(objects), once the holes exceed half the live
// names, so about two copies per name removed.
func (t *objects) compact() {
	names := newNameArena()
	for o := range uint32(t.n) {
		if t.live(o) {
			r := &t.refs[o/objBlock][o%objBlock]
			*r = names.add(t.names.name(*r))
		}
	}
	t.names = names
}

// val returns the value id of object o at index position p.
func (t *objects) val(o uint32, p int) uint32 {
	return t.vals[o/objBlock][int(o%objBlock)*t.stride+p]
}

// setVal sets the value id of object o at index position p.
func (t *objects) setVal(o uint32, p int, v uint32) {
	t.vals[o/objBlock][int(o%objBlock)*t.stride+p] = v
}
