package pebblestore

import (
	"bytes"
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// presence is an in-memory multiset of 32-bit fingerprints of the stored
// object keys, owned by the committer. A key whose fingerprint is absent is
// certainly not stored, so creating it (the overwhelmingly common write)
// needs no read of the database; a present fingerprint only means "maybe"
// (a 32-bit fingerprint of a new key matches one of a million stored ones
// about once in 4,000 creates) and the committer reads the key.
//
// It is an open-addressing table with linear probing and backward-shift
// deletion, holding one uint32 per stored key at most 3/4 full: about 8 MiB
// for a million events, where a Go map of 64-bit hashes cost several times
// that in RSS. A key stored twice under one fingerprint is held twice, so
// removing one keeps the other.
type presence struct {
	seed  maphash.Seed
	slots []uint32 // 0: empty
	n     int
	// unknown: the set could not be built; every key may be present.
	unknown bool
}

const presenceMinSlots = 1024

func newPresence(expected int) *presence {
	size := presenceMinSlots
	for size*3/4 < expected {
		size *= 2
	}
	return &presence{seed: maphash.MakeSeed(), slots: make([]uint32, size)}
}

func (p *presence) fingerprint(key []byte) uint32 {
	f := uint32(maphash.Bytes(p.seed, key))
	if f == 0 {
		f = 1
	}
	return f
}

func (p *presence) mask() uint32 { return uint32(len(p.slots) - 1) }

func (p *presence) mayContain(key []byte) bool {
	if p.unknown {
		return true
	}
	f, m := p.fingerprint(key), p.mask()
	for i := f & m; p.slots[i] != 0; i = (i + 1) & m {
		if p.slots[i] == f {
			return true
		}
	}
	return false
}

func (p *presence) add(key []byte) {
	if p.unknown {
		return
	}
	if (p.n+1)*4 > len(p.slots)*3 {
		p.grow()
	}
	p.insert(p.fingerprint(key))
}

func (p *presence) insert(f uint32) {
	m := p.mask()
	i := f & m
	for p.slots[i] != 0 {
		i = (i + 1) & m
	}
	p.slots[i] = f
	p.n++
}

func (p *presence) grow() {
	old := p.slots
	p.slots, p.n = make([]uint32, 2*len(old)), 0
	for _, f := range old {
		if f != 0 {
			p.insert(f)
		}
	}
}

func (p *presence) remove(key []byte) {
	if p.unknown {
		return
	}
	f, m := p.fingerprint(key), p.mask()
	i := f & m
	for ; p.slots[i] != f; i = (i + 1) & m {
		if p.slots[i] == 0 {
			return // not held: nothing to do
		}
	}
	// Backward-shift deletion: move later entries of the cluster into the
	// hole unless that would put them before their home slot.
	for j := i; ; {
		j = (j + 1) & m
		g := p.slots[j]
		if g == 0 {
			break
		}
		home := g & m
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			p.slots[i], i = g, j
		}
	}
	p.slots[i] = 0
	p.n--
}

// loadPresence fills the set from the TTL queue, which holds exactly one
// small entry per stored object, so no object value is read; it counts
// the objects of each namespace on the way.
func loadPresence(db *pebble.DB, expected int64) (*presence, map[string]int64, error) {
	p := newPresence(int(expected))
	namespaces := map[string]int64{}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: []byte{prefixExpiry + 1}})
	if err != nil {
		return nil, nil, err
	}
	key := make([]byte, 0, 128)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) <= 9 {
			continue
		}
		key = append(append(key[:0], prefixObject), k[9:]...)
		p.add(key)
		if i := bytes.IndexByte(k[9:], '/'); i >= 0 {
			namespaces[string(k[9:9+i])]++
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, nil, err
	}
	return p, namespaces, it.Close()
}
