package pebblestore

import (
	"bytes"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// sortedBatch stages a group's point writes and hands them to a pebble
// batch in key order. Pebble applies a batch to its memtable, a skiplist,
// one key after another in batch order, and each insertion starts its
// search from where the previous one ended when that brackets the new
// key: in key order, a group's log entries (consecutive revisions), TTL
// entries (about the same expiry), metadata keys and the index entries
// of each index (one value shared by many events) land next to one
// another, and most searches are short and in cache. In staging order
// (object by object) every insertion searched the skiplist from its
// head, the committer's largest cost under load.
//
// The batch means the same: writes of one key keep their order (the
// sort is stable), and a range deletion first flushes what was staged
// before it, so it covers exactly the writes it followed.
type sortedBatch struct {
	b      *pebble.Batch
	staged []stagedWrite
}

// stagedWrite is a point write not yet in the batch.
type stagedWrite struct {
	key, value []byte
	del        bool
}

// Set stages setting key to value. Neither may change until flush.
func (s *sortedBatch) Set(key, value []byte) {
	s.staged = append(s.staged, stagedWrite{key: key, value: value})
}

// Delete stages deleting key, which may not change until flush.
func (s *sortedBatch) Delete(key []byte) {
	s.staged = append(s.staged, stagedWrite{key: key, del: true})
}

// DeleteRange deletes [start, end) after the writes staged so far.
func (s *sortedBatch) DeleteRange(start, end []byte) {
	s.flush()
	_ = s.b.DeleteRange(start, end, nil)
}

// Empty reports whether nothing was staged or written.
func (s *sortedBatch) Empty() bool { return len(s.staged) == 0 && s.b.Empty() }

// flush adds the staged writes to the batch in key order.
func (s *sortedBatch) flush() {
	slices.SortStableFunc(s.staged, func(a, b stagedWrite) int { return bytes.Compare(a.key, b.key) })
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
func (s *sortedBatch) Commit(o *pebble.WriteOptions) error {
	s.flush()
	return s.b.Commit(o)
}
