package index

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// nameBlock is the size of a block of a nameArena: big enough that the
// blocks are few (about 700 for a million 42-byte names), small enough
// that the room left in the block being filled, and a block kept for a
// few surviving names, cost little.
const nameBlock = 64 << 10

// maxNameBlocks is how many blocks a nameArena can address: the block
// number is the high 16 bits of a name's reference. At 64 KiB a block
// that is 4 GiB of names, some 80M event names.
const maxNameBlocks = 1 << 16

// nameArena holds the objects' names, each once, as its length (a uvarint)
// followed by its bytes, in blocks of nameBlock bytes (a longer name gets
// a block of its own), and refers to a name by a uint32: its block number
// in the high 16 bits, its offset in the block in the low 16. A name costs
// its length plus one byte and a 4-byte reference (47 bytes for a 42-byte
// name), where a Go string costs a 16-byte header and a heap object
// rounded up to its size class (64 bytes); and the blocks hold no
// pointers, so the GC does not scan them.
//
// Bytes once written are never changed, so the strings name returns (which
// point into the blocks) stay valid whatever happens to the arena after.
// A freed name leaves a hole; a block whose names are all freed is
// dropped and its number reused for a new block; when the holes exceed
// half the live bytes the owner copies the live names to a new arena
// (see objects.compact), so that the arena holds at most 1.5 times its
// live names (plus a block).
type nameArena struct {
	blocks [][]byte
	live   []int    // bytes of live names, by block
	free   []uint16 // numbers of dropped blocks
	cur    int      // the block being filled; -1 for none
	size   int      // bytes of the blocks held (their capacity)
	inUse  int      // bytes of live names
}

func newNameArena() nameArena { return nameArena{cur: -1} }

// uvarintLen returns the length of the uvarint encoding of n.
func uvarintLen(n int) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// add copies s into the arena and returns its reference.
func (a *nameArena) add(s string) uint32 {
	need := uvarintLen(len(s)) + len(s)
	if a.cur < 0 || len(a.blocks[a.cur])+need > cap(a.blocks[a.cur]) {
		old := a.cur
		a.cur = a.newBlock(max(nameBlock, need))
		if old >= 0 && a.live[old] == 0 { // emptied while being filled
			a.drop(old)
		}
	}
	b := a.blocks[a.cur]
	off := len(b)
	b = binary.AppendUvarint(b, uint64(len(s)))
	a.blocks[a.cur] = append(b, s...)
	a.live[a.cur] += need
	a.inUse += need
	// off < nameBlock: a block longer than nameBlock holds one name, at 0.
	return uint32(a.cur)<<16 | uint32(off)
}

// newBlock returns the number of a new, empty block of capacity c.
func (a *nameArena) newBlock(c int) int {
	a.size += c
	if k := len(a.free); k > 0 {
		n := int(a.free[k-1])
		a.free = a.free[:k-1]
		a.blocks[n] = make([]byte, 0, c)
		return n
	}
	if len(a.blocks) == maxNameBlocks {
		// 4 GiB of names: the index would be well over 16 GB.
		panic(fmt.Sprintf("index: more than %d blocks of names", maxNameBlocks))
	}
	a.blocks = append(a.blocks, make([]byte, 0, c))
	a.live = append(a.live, 0)
	return len(a.blocks) - 1
}

// entry returns the bytes of the name at ref and the length of its entry.
func (a *nameArena) entry(ref uint32) ([]byte, int) {
	b := a.blocks[ref>>16][ref&0xffff:]
	if n := int(b[0]); n < 0x80 { // names under 128 bytes: all real ones
		return b[1 : 1+n], 1 + n
	}
	n, k := binary.Uvarint(b)
	return b[k : k+int(n)], k + int(n)
}

// name returns the name at ref. The string shares the arena's bytes, which
// are never changed: it stays valid, and keeps its block alive, as long as
// it is referenced.
func (a *nameArena) name(ref uint32) string {
	b, _ := a.entry(ref)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// remove frees the name at ref, dropping its block when it was the
// block's last one.
func (a *nameArena) remove(ref uint32) {
	_, n := a.entry(ref)
	blk := int(ref >> 16)
	a.live[blk] -= n
	a.inUse -= n
	if a.live[blk] == 0 && blk != a.cur {
		a.drop(blk)
	}
}

// drop releases block blk, which holds no live name.
func (a *nameArena) drop(blk int) {
	a.size -= cap(a.blocks[blk])
	a.blocks[blk] = nil
	a.free = append(a.free, uint16(blk))
}

// wasteful reports whether the holes left by removed names exceed half the
// live bytes (and a few blocks, so that a small arena is not copied over
// and over).
func (a *nameArena) wasteful() bool {
	holes := a.size - a.inUse
	return holes > a.inUse/2 && holes > 4*nameBlock
}
