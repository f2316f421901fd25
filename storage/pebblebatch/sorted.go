// Package pebblebatch writes a group of pebble writes into a batch in key
// order, which pebble applies to its memtable far faster than in the
// order the writes were made.
package pebblebatch

import (
	"bytes"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Sorted stages a group's point writes and hands them to a pebble batch
// in key order. Pebble applies a batch to its memtable, a skiplist, one
// key after another in batch order, and each insertion starts its search
// from where the previous one ended when that brackets the new key: in
// key order, writes that share a prefix (a log's consecutive revisions,
// an index's entries of one value, an object's records) land next to one
// another, and most searches are short and in cache. In the order the
// writes were made (object by object) every insertion searched the
// skiplist from its head.
//
// The batch means the same: writes of one key keep their order (the
// sort is stable), and a range deletion first flushes what was staged
// before it, so it covers exactly the writes it followed. Staged writes
// cannot be read back through the batch before Flush; a caller that
// reads its own writes keeps them itself.
//
// The zero Sorted has no batch: Reset gives it one. A Sorted keeps its
// staging area across Reset, so a long-lived one allocates it once.
type Sorted struct {
	b      *pebble.Batch
	staged []write
}

// write is a point write not yet in the batch.
type write struct {
	key, value []byte
	del        bool
}

// New returns a Sorted writing into b.
func New(b *pebble.Batch) *Sorted { return &Sorted{b: b} }

// Reset drops what is staged and makes b the batch written into, keeping
// the staging area's memory.
func (s *Sorted) Reset(b *pebble.Batch) {
	clear(s.staged)
	s.staged = s.staged[:0]
	s.b = b
}

// Batch returns the batch written into; it holds the staged writes only
// after Flush.
func (s *Sorted) Batch() *pebble.Batch { return s.b }

// Set stages setting key to value. Neither may change until Flush.
func (s *Sorted) Set(key, value []byte) {
	s.staged = append(s.staged, write{key: key, value: value})
}

// Delete stages deleting key, which may not change until Flush.
func (s *Sorted) Delete(key []byte) {
	s.staged = append(s.staged, write{key: key, del: true})
}

// DeleteRange deletes [start, end) after the writes staged so far.
func (s *Sorted) DeleteRange(start, end []byte) {
	s.Flush()
	_ = s.b.DeleteRange(start, end, nil)
}

// Empty reports whether nothing was staged or written.
func (s *Sorted) Empty() bool { return len(s.staged) == 0 && s.b.Empty() }

// Staged returns the number of writes staged and not yet flushed.
func (s *Sorted) Staged() int { return len(s.staged) }

// Flush adds the staged writes to the batch in key order.
func (s *Sorted) Flush() {
	slices.SortStableFunc(s.staged, func(a, b write) int { return bytes.Compare(a.key, b.key) })
	for _, w := range s.staged {
		if w.del {
			_ = s.b.Delete(w.key, nil)
		} else {
			_ = s.b.Set(w.key, w.value, nil)
		}
	}
	clear(s.staged) // drop the references for the collector
	s.staged = s.staged[:0]
}

// Commit flushes the staged writes and commits the batch.
func (s *Sorted) Commit(o *pebble.WriteOptions) error {
	s.Flush()
	return s.b.Commit(o)
}

// Close drops what is staged and closes the batch; the Sorted may be
// Reset with another.
func (s *Sorted) Close() error {
	clear(s.staged)
	s.staged = s.staged[:0]
	b := s.b
	s.b = nil
	if b == nil {
		return nil
	}
	return b.Close()
}
