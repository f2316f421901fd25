package index

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
)

// Memory is an in-memory secondary index of events by key, for a backend
// whose store cannot index (etcd): for each index of its Set, the keys of
// the events holding each value, in key order. Keys are "<namespace>/<name>",
// whose byte order is etcd's and kube-apiserver's list order.
//
// It holds no objects: each key once, a value id per index per event, and
// each distinct value once (interned), so it costs about 200 bytes per
// event (see BenchmarkMemoryBytesPerEvent). Lists of ids are kept in sorted
// chunks (see list), which is leaner than a B-tree of pointers and needs
// no dependency.
//
// One goroutine (the watch feed) writes with Put and Delete; any number
// read concurrently. Every write records the revision it brings the index
// to, and reads return the revision they saw, so that a backend fetches
// the candidates at that revision.
type Memory struct {
	set Set
	mu  sync.RWMutex

	// Objects, by id: keys[o] is the key ("" when o is free), and
	// vals[o*set.Len()+p] the value id o has in the index at position p of
	// set (0 for none).
	keys  []string
	vals  []uint32
	free  []uint32
	byKey list   // every object, by key
	lists []list // per index position: the objects with a value, by (value id, key)

	// Interned values, by id (0 is no value): the string, and how many
	// index entries refer to it.
	strs     []string
	refs     []uint32
	ids      map[string]uint32
	freeStrs []uint32

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
		return func(o uint32) bool { return m.keys[o] <= key }
	}
	return func(o uint32) bool { return m.keys[o] < key }
}

// valBefore is keyBefore within the list of index position p, for value
// id v.
func (m *Memory) valBefore(p int, v uint32, key string, after bool) func(uint32) bool {
	n := uint32(m.set.Len())
	return func(o uint32) bool {
		ov := m.vals[o*n+uint32(p)]
		if ov != v {
			return ov < v
		}
		if after {
			return m.keys[o] <= key
		}
		return m.keys[o] < key
	}
}

// find returns the object holding key and its position in byKey.
func (m *Memory) find(key string) (uint32, pos, bool) {
	p := m.byKey.search(m.keyBefore(key, false))
	o, ok := m.byKey.at(p)
	return o, p, ok && m.keys[o] == key
}

// Put indexes ev under key, replacing what key had, and records rev as the
// index's revision (it never goes back). The index keeps copies of key and
// of ev's values, never ev.
func (m *Memory) Put(key string, ev *corev1.Event, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.advance(rev)
	o, at, ok := m.find(key)
	if !ok {
		key = strings.Clone(key)
		if k := len(m.free); k > 0 {
			o, m.free = m.free[k-1], m.free[:k-1]
			m.keys[o] = key
		} else {
			o = uint32(len(m.keys))
			m.keys = append(m.keys, key)
			m.vals = append(m.vals, make([]uint32, m.set.Len())...)
		}
		m.byKey.insert(at, o)
	}
	base := o * uint32(m.set.Len())
	for p, id := range m.set.ids {
		v := valueOf(ev, id)
		old := m.vals[base+uint32(p)]
		if old != 0 && m.strs[old] == v {
			continue
		}
		if old != 0 {
			m.unindex(p, o, old)
		}
		if v != "" {
			nv := m.intern(v)
			m.lists[p].insert(m.lists[p].search(m.valBefore(p, nv, m.keys[o], false)), o)
			m.vals[base+uint32(p)] = nv
		}
	}
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
	base := o * uint32(m.set.Len())
	for p := range m.set.ids {
		if v := m.vals[base+uint32(p)]; v != 0 {
			m.unindex(p, o, v)
		}
	}
	m.byKey.remove(at)
	m.keys[o] = ""
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
		m.rev = rev
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// unindex removes object o, holding value id v, from the list at position p.
func (m *Memory) unindex(p int, o, v uint32) {
	l := &m.lists[p]
	at := l.search(m.valBefore(p, v, m.keys[o], false))
	l.remove(at)
	m.vals[o*uint32(m.set.Len())+uint32(p)] = 0
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
// key after ("" for the first page) that can hold events matching the
// selector p was planned from (with m.Set().Plan): those of its lookups'
// union, or every key when it has none, within its namespace. It also
// returns the revision the index was at: the backend fetches the keys'
// objects at that revision and filters them with Selector.Matches. When
// fewer than limit keys come back, there are no more.
func (m *Memory) Keys(p Plan, after string, limit int) (keys []string, rev int64, err error) {
	n := m.set.Len()
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
	inNS := func(o uint32) bool { return strings.HasPrefix(m.keys[o], lower) }

	m.mu.RLock()
	defer m.mu.RUnlock()
	rev = m.rev
	switch {
	case p.None:
		return nil, rev, nil
	case p.Name != "":
		key := p.Namespace + "/" + p.Name
		if _, _, ok := m.find(key); ok && key > after {
			return []string{key}, rev, nil
		}
		return nil, rev, nil
	}
	var streams []stream
	if p.Lookups == nil {
		streams = append(streams, stream{l: &m.byKey, at: m.byKey.search(m.keyBefore(start, exclusive)), in: inNS})
	}
	for _, lk := range p.Lookups {
		i := m.set.pos(lk.ID)
		if i < 0 {
			return nil, rev, fmt.Errorf("index %v is not kept by this index: plan with its Set", lk.ID)
		}
		v, ok := m.ids[lk.Value]
		if !ok {
			continue
		}
		l := &m.lists[i]
		streams = append(streams, stream{l: l, at: l.search(m.valBefore(i, v, start, exclusive)),
			in: func(o uint32) bool { return m.vals[o*uint32(n)+uint32(i)] == v && inNS(o) }})
	}
	for limit <= 0 || len(keys) < limit {
		// The smallest key at the head of a stream; equal heads are one key.
		best := ""
		found := false
		for _, s := range streams {
			if o, ok := s.l.at(s.at); ok && s.in(o) && (!found || m.keys[o] < best) {
				best, found = m.keys[o], true
			}
		}
		if !found {
			break
		}
		keys = append(keys, best)
		for i := range streams {
			s := &streams[i]
			if o, ok := s.l.at(s.at); ok && m.keys[o] == best {
				s.at = s.l.next(s.at)
			}
		}
	}
	return keys, rev, nil
}
