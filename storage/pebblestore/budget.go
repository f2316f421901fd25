package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/index"
)

// The storage budget (Options.MaxBytes).
//
// What is counted: the stored events' own keys and values, each event's
// object key and value (its protobuf plus the 16-byte header), its
// TTL-queue entry and its index entries, kept exactly by the committer as
// it writes (storedBytes) and persisted with every commit (metaBytes), so
// the figure responds at once to every write and delete. Not counted:
// the change log, which --watch-history and HistoryMaxEvents bound on
// their own and which early expiry could not shrink (every deletion logs
// a change), and pebble's own overhead (deleted versions awaiting
// compaction, the write-ahead log, space amplification), which lags
// deletes by minutes: a budget on pebble's disk usage would make early
// expiry overshoot while compactions catch up.

// budgetVictimsMax bounds one round of early expiry, as expireBatch does
// for TTL expiry: rounds repeat until the low-water mark is reached.
const budgetVictimsMax = expireBatch

// storedBytes is what one event counts against the budget: its object
// key and value (protoLen bytes of protobuf plus the header), its TTL
// queue entry (key and revision) and its index entries.
func storedBytes(key []byte, protoLen int, idx [][]byte) int64 {
	sfx := len(key) - 1
	n := len(key) + objectHeader + protoLen + 9 + sfx + 8
	for _, k := range idx {
		n += len(k)
	}
	return int64(n)
}

// loadStoredBytes reads the stored events' bytes from metaBytes, or, for
// a database written before the budget existed (no metaBytes yet, events
// stored), counts them once from the objects.
func (s *Store) loadStoredBytes() (int64, error) {
	n, err := s.readMeta(metaBytes)
	if err != nil || n > 0 || s.count == 0 {
		return n, err
	}
	return countStoredBytes(s.db, s.indexes)
}

// countStoredBytes counts the stored events' bytes from their objects.
func countStoredBytes(db pebble.Reader, set index.Set) (int64, error) {
	var n int64
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixObject}, UpperBound: []byte{prefixObject + 1}})
	if err != nil {
		return 0, fmt.Errorf("pebblestore: counting stored bytes: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			return 0, fmt.Errorf("pebblestore: counting stored bytes: %w", err)
		}
		ev, _, err := decodeObject(val)
		if err != nil {
			return 0, err
		}
		n += storedBytes(it.Key(), len(val)-objectHeader, indexKeys(set, ev, it.Key()[1:]))
	}
	return n, it.Error()
}

// StoredBytes is the stored events' bytes as the budget counts them (see
// Options.MaxBytes), as of the last commit.
func (s *Store) StoredBytes() int64 { return s.storedBytes.Load() }

// BudgetExpirations is the number of events expired early to keep within
// Options.MaxBytes since the store opened.
func (s *Store) BudgetExpirations() int64 {
	if s.budget == nil {
		return 0
	}
	return s.budget.Expirations()
}

// BudgetBusy reports whether a round of early expiry is under way.
func (s *Store) BudgetBusy() bool { return s.budget != nil && s.budget.Busy() }

// budgetCheck wakes the budget loop when the last commit took the stored
// bytes over the budget. Called by the committer.
func (s *Store) budgetCheck() {
	if s.budget == nil || s.liveBytes <= s.budget.Max() {
		return
	}
	select {
	case s.budgetWake <- struct{}{}:
	default: // a round is already due
	}
}

// budgetLoop expires events early whenever the stored bytes exceed the
// budget: woken by the committer, and once per ExpiryInterval in case a
// round was cut short (the store could not write).
func (s *Store) budgetLoop() {
	defer s.wg.Done()
	t := s.clock.NewTicker(s.opts.ExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C():
		case <-s.budgetWake:
		}
		s.enforceBudget()
	}
}

// enforceBudget, when the stored bytes exceed the budget, deletes the
// events closest to their expiry (the TTL queue's order) until the bytes
// are down to the low-water mark. Each is an ordinary delete on the
// condition that the event was not written since it was chosen: watchers
// get DELETED with its last state, the revision advances, and a write
// racing the round wins.
func (s *Store) enforceBudget() {
	before := s.storedBytes.Load()
	if !s.budget.Over(before) {
		return
	}
	s.budget.Begin()
	defer s.budget.End()
	expired := 0
	for {
		excess := s.budget.Excess(s.storedBytes.Load())
		if excess == 0 {
			break
		}
		ops := s.budgetVictims(excess)
		if len(ops) == 0 {
			break
		}
		pending := s.enqueueAll(ops)
		unavailable := false
		for _, o := range pending {
			<-o.done
			switch {
			case o.err == nil:
				expired++
				s.budget.Expired(o.result)
			case errors.Is(o.err, storage.ErrUnavailable):
				unavailable = true
			}
		}
		if unavailable || len(pending) < len(ops) {
			break // the next tick tries again
		}
	}
	s.budget.Logged(expired, before, s.storedBytes.Load())
}

// budgetVictims returns deletes of the events closest to their expiry
// whose bytes add up to at least excess (at most budgetVictimsMax), each
// conditional on the revision it was chosen at.
func (s *Store) budgetVictims(excess int64) []*op {
	v, err := s.acquire()
	if err != nil {
		return nil
	}
	defer s.release(v)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: []byte{prefixExpiry + 1}})
	if err != nil {
		s.log.Error("storage budget: scanning the TTL queue failed", "err", err)
		return nil
	}
	defer it.Close()
	var ops []*op
	var freed int64
	for ok := it.First(); ok && freed < excess && len(ops) < budgetVictimsMax; ok = it.Next() {
		ns, name, ok := splitSuffix(it.Key()[9:])
		val, err := it.ValueAndErr()
		if !ok || err != nil || len(val) != 8 {
			s.log.Error("corrupt expiry entry", "key", it.Key(), "err", err)
			continue
		}
		key := objectKey(ns, name)
		obj, closer, err := v.snap.Get(key)
		if err != nil {
			continue // gone meanwhile, or unreadable: TTL expiry's concern
		}
		if ev, _, err := decodeObject(obj); err == nil {
			freed += storedBytes(key, len(obj)-objectHeader, indexKeys(s.indexes, ev, key[1:]))
		}
		closer.Close()
		ops = append(ops, &op{kind: opDelete, ns: ns, name: name,
			pre: storage.Preconditions{Revision: int64(binary.BigEndian.Uint64(val))}})
	}
	return ops
}
