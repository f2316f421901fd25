package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage/index"
)

// The last-observed time index (index.LastObserved, issue 32) is one of
// the indexes every write maintains, in the same batch as the others. A
// store written before it existed (or by a build without it, or with
// Options.noTimeIndex) lacks its entries, or has stale ones: at open,
// unless metaTimeIndex says the entries are complete at the store's
// revision, they are rebuilt from the objects (rebuildTimeIndex), and
// only once that has committed do lists plan with the index.

// backfillBatchBytes bounds the memory of the rebuild: its batches are
// committed at about this size.
const backfillBatchBytes = 4 << 20

// planSet returns the indexes lists plan with: the store's, less
// LastObserved while its entries are not complete, with the store's clock
// for open-ended time ranges.
func (s *Store) planSet() index.Set {
	set := s.indexes
	if !s.timeServed.Load() {
		set = set.Without(index.LastObserved)
	}
	return set.WithClock(s.clock)
}

// timeIndexed reports whether writes maintain the time index.
func (s *Store) timeIndexed() bool { return s.indexes.Has(index.LastObserved) }

// loadTimeIndex decides, at open, whether the time index can be served,
// rebuilding it first when it is not complete at the store's revision.
// A store opened read-only cannot rebuild it: it serves time ranges by
// scans until reopened read-write.
func (s *Store) loadTimeIndex() error {
	s.timeServed.Store(false)
	if !s.timeIndexed() {
		return nil
	}
	at, found, err := s.readMetaFound(metaTimeIndex)
	if err != nil {
		return err
	}
	if found && at == s.rev {
		s.timeServed.Store(true)
		return nil
	}
	if s.popts.ReadOnly {
		s.log.Warn("pebblestore: the time index is not complete and the store is read-only; time ranges are served by scans until it reopens read-write")
		return nil
	}
	if err := s.rebuildTimeIndex(found); err != nil {
		return err
	}
	s.timeServed.Store(true)
	return nil
}

// readMetaFound is readMeta, telling an absent key from a zero.
func (s *Store) readMetaFound(key []byte) (int64, bool, error) {
	_, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pebblestore: reading %s: %w", key, err)
	}
	closer.Close()
	v, err := s.readMeta(key)
	return v, true, err
}

// rebuildTimeIndex writes the time index entries of every stored event,
// in batches of about backfillBatchBytes, then, in a last synced batch,
// the stored bytes (counted again in the same pass, now with the new
// entries) and metaTimeIndex at the store's revision. Entries left by
// an older build (stale) are deleted first, in the first batch. A crash
// before the last batch commits leaves no marker: the next open runs it
// again, and writing an entry twice is harmless.
func (s *Store) rebuildTimeIndex(stale bool) error {
	start := time.Now()
	s.log.Info("pebblestore: building the time index of the stored events", "events", s.count, "revision", s.rev, "staleEntries", stale)
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	if stale {
		lower := []byte{prefixIndex, byte(index.LastObserved)}
		if err := b.DeleteRange(lower, prefixEnd(lower), nil); err != nil {
			return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixObject}, UpperBound: []byte{prefixObject + 1}})
	if err != nil {
		return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
	}
	defer it.Close()
	var events, liveBytes int64
	batches := 0
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
		}
		ev, _, err := decodeObject(val)
		if err != nil {
			return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
		}
		sfx := it.Key()[1:]
		liveBytes += storedBytes(it.Key(), len(val)-objectHeader, indexKeys(s.indexes, ev, sfx))
		if err := b.Set(indexKey(index.LastObserved, index.Value(ev, index.LastObserved), sfx), nil, nil); err != nil {
			return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
		}
		events++
		if b.Len() >= backfillBatchBytes {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
			}
			batches++
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
	}
	if err := errors.Join(b.Set(metaBytes, revBytes(liveBytes), nil), b.Set(metaTimeIndex, revBytes(s.rev), nil)); err != nil {
		return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: rebuilding the time index: %w", err)
	}
	batches++
	s.log.Info("pebblestore: built the time index", "events", events, "batches", batches, "duration", time.Since(start))
	return nil
}

// maxRangeCandidates bounds the candidates a range read collects (about
// 64 MiB of keys): a wider range is served by a scan of the objects
// instead, which needs no memory per candidate and reads each object
// once in key order rather than seeking to it.
const maxRangeCandidates = 1 << 20

// rangeCap is the most candidates a list with limit reads from a range
// before it scans instead. A paginated list's candidates are kept for its
// later pages only up to maxUnionCacheKeys (unionKeys); past that, each
// page would read the whole range again (its entries are in time order,
// so a page cannot start at its first key), which costs more over the
// pages than one scan, resumed at each page's start, reading every object
// once.
// Options.rangeCandidates, when set, replaces both (for tests).
func (s *Store) rangeCap(limit int64) int {
	switch {
	case s.opts.rangeCandidates > 0:
		return s.opts.rangeCandidates
	case limit > 0:
		return maxUnionCacheKeys
	}
	return maxRangeCandidates
}

// errRangeTooWide is readRange's error for a range with more candidates
// than its cap.
var errRangeTooWide = errors.New("pebblestore: time range too wide for the index")

// readRange reads the candidates of a range lookup after the given key,
// within scope ns: one iterator over the range's entries,
// which come in value (time) order, then sorted into key order. It fails
// with errRangeTooWide past limit candidates.
func readRange(ctx context.Context, v *view, r index.Range, ns keyScope, after string, limit int) ([]string, error) {
	lo, hi := r.Bounds()
	lower, upper := append([]byte{prefixIndex}, lo...), append([]byte{prefixIndex}, hi...)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list: %w", err)
	}
	defer it.Close()
	var out []string
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		key, ok := index.EntryKey(it.Key()[1:])
		if !ok {
			return nil, fmt.Errorf("pebblestore: corrupt index entry %q", it.Key())
		}
		if !ns.contains(key) {
			continue
		}
		if after != "" && string(key) <= after {
			continue
		}
		if len(out) == limit {
			return nil, errRangeTooWide
		}
		out = append(out, string(key))
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: list: %w", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
