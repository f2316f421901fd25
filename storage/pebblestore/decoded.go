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
	// encoded is ev's protobuf with its resourceVersion, once a list
	// asked for it (read with encode).
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

// put keeps e at key: a new key takes the ring's next slot (evicting
// the key there); a kept key is replaced by a later revision, and its
// encoded form added at the same revision. Under s.mu.
func (s *decodedShard) put(key []byte, e decodedEntry) {
	if cur, ok := s.m[string(key)]; ok {
		switch {
		case e.rev > cur.rev:
			s.m[string(key)] = e
		case e.rev == cur.rev && cur.encoded == nil && e.encoded != nil:
			cur.encoded = e.encoded
			s.m[string(key)] = cur
		}
		return
	}
	k := string(key)
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = k
	s.next = (s.next + 1) % len(s.ring)
	s.m[k] = e
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
	ev, _, err := c.read(key, v, false)
	return ev, err
}

// read decodes the object value v at key ("<ns>/<name>") through the
// cache, with one lookup; with encode it also returns the event's core/v1
// protobuf with its resourceVersion (withResourceVersion; nil when the
// stored form cannot be spliced), kept beside the decoded event.
func (c *decodedCache) read(key, v []byte, encode bool) (*corev1.Event, []byte, error) {
	rev, _, proto, err := objectHeaderOf(v)
	if err != nil {
		return nil, nil, err
	}
	var s *decodedShard
	var e decodedEntry
	kept := false
	if c != nil {
		s = c.shard(key)
		s.mu.Lock()
		e, kept = s.m[string(key)]
		s.mu.Unlock()
		kept = kept && e.rev == rev
		if kept && (!encode || e.encoded != nil) {
			if !encode {
				return e.ev, nil, nil
			}
			return e.ev, e.encoded, nil
		}
	}
	if !kept {
		e = decodedEntry{rev: rev}
		if e.ev, err = decodeEvent(proto, rev); err != nil {
			return nil, nil, err
		}
	}
	if encode {
		e.encoded, _ = withResourceVersion(proto, rev)
	}
	if s != nil {
		s.mu.Lock()
		s.put(key, e)
		s.mu.Unlock()
	}
	return e.ev, e.encoded, nil
}
