package index

import (
	"slices"
	"sort"
)

// Chunk sizes of a list. A list is kept in sorted chunks so that an insert
// or delete moves at most chunkMax ids (1 KiB) however long the list, and
// chunks grow by a quarter at a time, so that on average they are about
// 80% full: ids cost about 5 bytes each, not the 8 of a half-empty
// B-tree node or the 24+ of a map entry.
const (
	chunkMax = 256
	// chunkMin is the size below which a chunk is merged with its next one
	// when they fit together, so that deletions do not leave a trail of
	// tiny chunks.
	chunkMin = chunkMax / 4
)

// list is a sequence of object ids in an order its owner defines (the
// owner's search predicates must agree with it), held in non-empty chunks.
type list struct {
	chunks [][]uint32
	n      int
}

// pos is a position in a list: chunk ci, index i.
type pos struct{ ci, i int }

// search returns the position of the first id for which before is false.
// before must be true for a prefix of the list and false after it.
func (l *list) search(before func(uint32) bool) pos {
	ci := sort.Search(len(l.chunks), func(c int) bool {
		ch := l.chunks[c]
		return !before(ch[len(ch)-1])
	})
	if ci == len(l.chunks) {
		return pos{ci, 0}
	}
	ch := l.chunks[ci]
	return pos{ci, sort.Search(len(ch), func(j int) bool { return !before(ch[j]) })}
}

// at returns the id at p, if p is within the list.
func (l *list) at(p pos) (uint32, bool) {
	if p.ci >= len(l.chunks) {
		return 0, false
	}
	return l.chunks[p.ci][p.i], true
}

// next returns the position after p.
func (l *list) next(p pos) pos {
	if p.i++; p.i == len(l.chunks[p.ci]) {
		return pos{p.ci + 1, 0}
	}
	return p
}

// grown returns ch with room for one more id, growing it by a quarter.
func grown(ch []uint32) []uint32 {
	if len(ch) < cap(ch) {
		return ch
	}
	c := min(chunkMax, cap(ch)+cap(ch)/4+4)
	out := make([]uint32, len(ch), c)
	copy(out, ch)
	return out
}

// insert puts id at position p, as returned by search.
func (l *list) insert(p pos, id uint32) {
	l.n++
	if len(l.chunks) == 0 {
		l.chunks = [][]uint32{append(make([]uint32, 0, 4), id)}
		return
	}
	if p.ci == len(l.chunks) { // at the end: append to the last chunk
		p = pos{p.ci - 1, len(l.chunks[p.ci-1])}
	}
	ch := l.chunks[p.ci]
	if len(ch) == chunkMax {
		half := len(ch) / 2
		left := make([]uint32, half, half+half/4)
		right := make([]uint32, len(ch)-half, half+half/4)
		copy(left, ch[:half])
		copy(right, ch[half:])
		l.chunks = slices.Insert(l.chunks, p.ci+1, right)
		l.chunks[p.ci] = left
		if p.i > half {
			p = pos{p.ci + 1, p.i - half}
		}
		ch = l.chunks[p.ci]
	}
	l.chunks[p.ci] = slices.Insert(grown(ch), p.i, id)
}

// remove deletes the id at position p.
func (l *list) remove(p pos) {
	l.n--
	ch := slices.Delete(l.chunks[p.ci], p.i, p.i+1)
	switch {
	case len(ch) == 0:
		l.chunks[p.ci] = nil
		l.chunks = slices.Delete(l.chunks, p.ci, p.ci+1)
		return
	case len(ch) < chunkMin && p.ci+1 < len(l.chunks) && len(ch)+len(l.chunks[p.ci+1]) <= chunkMax/2:
		merged := make([]uint32, 0, len(ch)+len(l.chunks[p.ci+1])+4)
		merged = append(append(merged, ch...), l.chunks[p.ci+1]...)
		l.chunks[p.ci] = merged
		l.chunks = slices.Delete(l.chunks, p.ci+1, p.ci+2)
		return
	case cap(ch) > 2*len(ch)+8: // give back what deletions freed
		ch = append(make([]uint32, 0, len(ch)+len(ch)/4+4), ch...)
	}
	l.chunks[p.ci] = ch
}
