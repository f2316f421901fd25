package pebblestore

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// DefaultDecodedCacheEvents is how many decoded events a store keeps for
// its index-driven lists (Options.DecodedCacheEvents): about 25 MiB of
// events of 1.5 KiB, ten times a Deployment's family of 3 rollouts x 100
// Pods (1,805 events), so that the questions users repeat (a timeline
// refreshed, a family asked again, a web page's live view relisting) are
// answered without decoding again, as kube-apiserver answers lists from
// the decoded objects of its watch cache.
const DefaultDecodedCacheEvents = 16384

// decodedShards spreads the cache over locks: lists run concurrently.
const decodedShards = 16

// decodedCache keeps decoded events by key and revision: a key's entry
// serves only the revision it was decoded at (the object at a key and a
// revision never changes), so an update or a recreation is never served
// stale. Events are shared, read-only, by every list that reads them, as
// the storage interface allows. Each shard evicts in insertion order
// (FIFO) past its share of the capacity. A nil cache keeps nothing.
type decodedCache struct {
	shards [decodedShards]decodedShard
}

type decodedShard struct {
	mu sync.Mutex
	m  map[string]decodedEntry
	// ring is the keys in insertion order; next the slot the next new
	// key takes, evicting the key there.
	ring []string
	next int
}

type decodedEntry struct {
	rev int64
	ev  *corev1.Event
	// encoded is ev's protobuf, once asked for (encodedCached).
	encoded []byte
}

// newDecodedCache returns a cache of about n events, or nil for n <= 0.
func newDecodedCache(n int) *decodedCache {
	if n <= 0 {
		return nil
	}
	per := max(n/decodedShards, 1)
	c := &decodedCache{}
	for i := range c.shards {
		c.shards[i] = decodedShard{m: make(map[string]decodedEntry, per), ring: make([]string, per)}
	}
	return c
}

// shard returns the shard of key (FNV-1a).
func (c *decodedCache) shard(key []byte) *decodedShard {
	h := uint32(2166136261)
	for _, b := range key {
		h ^= uint32(b)
		h *= 16777619
	}
	return &c.shards[h%decodedShards]
}

// get returns the event decoded at key and rev, if kept.
func (c *decodedCache) get(key []byte, rev int64) (*corev1.Event, bool) {
	if c == nil {
		return nil, false
	}
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[string(key)]
	s.mu.Unlock()
	if !ok || e.rev != rev {
		return nil, false
	}
	return e.ev, true
}

// put keeps ev, decoded at key and rev.
func (c *decodedCache) put(key []byte, rev int64, ev *corev1.Event) {
	if c == nil {
		return
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[string(key)]; ok {
		if rev > e.rev {
			s.m[string(key)] = decodedEntry{rev: rev, ev: ev}
		}
		return
	}
	k := string(key)
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = k
	s.next = (s.next + 1) % len(s.ring)
	s.m[k] = decodedEntry{rev: rev, ev: ev}
}

// len returns how many events the cache keeps.
func (c *decodedCache) len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// decodeCached decodes the object value v at key ("<ns>/<name>"),
// through the cache.
func (c *decodedCache) decodeCached(key, v []byte) (*corev1.Event, error) {
	rev, _, proto, err := objectHeaderOf(v)
	if err != nil {
		return nil, err
	}
	if ev, ok := c.get(key, rev); ok {
		return ev, nil
	}
	ev, err := decodeEvent(proto, rev)
	if err != nil {
		return nil, err
	}
	c.put(key, rev, ev)
	return ev, nil
}

// encodedCached returns the core/v1 protobuf of the object value v at
// key, with its resourceVersion (withResourceVersion), kept beside the
// event decoded at the same revision when the cache holds it.
func (c *decodedCache) encodedCached(key, v []byte) ([]byte, error) {
	rev, _, proto, err := objectHeaderOf(v)
	if err != nil {
		return nil, err
	}
	var s *decodedShard
	if c != nil {
		s = c.shard(key)
		s.mu.Lock()
		e, ok := s.m[string(key)]
		s.mu.Unlock()
		if ok && e.rev == rev && e.encoded != nil {
			return e.encoded, nil
		}
	}
	b, err := withResourceVersion(proto, rev)
	if err != nil || s == nil {
		return b, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[string(key)]; ok && e.rev == rev {
		e.encoded = b
		s.m[string(key)] = e
	}
	return b, nil
}
