package pebblestore

import (
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// presence is an in-memory set of the hashes of stored object keys, owned
// by the committer. A key whose hash is absent is certainly not stored, so
// creating it (the overwhelmingly common write) needs no read of the
// database; a present hash only means "maybe" and the committer reads the
// key. Counts keep the set right when two keys share a hash; a count that
// saturates is never decremented, which only costs reads.
//
// Memory is about 16-24 bytes per stored event (a Go map of 8-byte keys and
// 1-byte counts), against a point read that misses the block cache and
// reads sstable index blocks from disk on every create.
type presence struct {
	seed   maphash.Seed
	counts map[uint64]uint8
	// unknown: the set could not be built; every key may be present.
	unknown bool
}

func newPresence() *presence {
	return &presence{seed: maphash.MakeSeed(), counts: map[uint64]uint8{}}
}

func (p *presence) hash(key []byte) uint64 { return maphash.Bytes(p.seed, key) }

func (p *presence) mayContain(key []byte) bool { return p.unknown || p.counts[p.hash(key)] > 0 }

func (p *presence) add(key []byte) {
	if p.unknown {
		return
	}
	h := p.hash(key)
	if c := p.counts[h]; c < 255 {
		p.counts[h] = c + 1
	}
}

func (p *presence) remove(key []byte) {
	if p.unknown {
		return
	}
	h := p.hash(key)
	switch c := p.counts[h]; c {
	case 0, 255:
	case 1:
		delete(p.counts, h)
	default:
		p.counts[h] = c - 1
	}
}

// loadPresence fills the set from the TTL queue, which holds exactly one
// small entry per stored object, so no object value is read.
func loadPresence(db *pebble.DB) (*presence, error) {
	p := newPresence()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: []byte{prefixExpiry + 1}})
	if err != nil {
		return nil, err
	}
	key := make([]byte, 0, 128)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) <= 9 {
			continue
		}
		key = append(append(key[:0], prefixObject), k[9:]...)
		p.add(key)
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return p, it.Close()
}
