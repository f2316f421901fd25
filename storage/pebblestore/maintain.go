package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
)

const (
	// expireBatch is how many expired events are deleted per round.
	expireBatch = 1024
	// trimMinEntries and trimMaxDelay decide when the change log is
	// trimmed: in chunks, to avoid a range tombstone per tick.
	trimMinEntries = 4096
	trimMaxDelay   = 30 * time.Second
)

type checkpoint struct {
	at  time.Time
	rev int64
}

// maintenanceLoop expires events, trims the change log and drops stale
// list snapshots, once per ExpiryInterval.
func (s *Store) maintenanceLoop() {
	defer s.wg.Done()
	t := s.clock.NewTicker(s.opts.ExpiryInterval)
	defer t.Stop()
	// Changes from before this start are treated as made now: they are
	// kept for a full window.
	cps := []checkpoint{{at: s.clock.Now(), rev: s.Revision()}}
	lastTrim := s.clock.Now()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C():
		}
		now := s.clock.Now()
		if s.health.err() != nil {
			// Notice free space coming back even when no write tries.
			if s.checkSpace(0) == nil && s.health.needsReopen() {
				o := &op{kind: opReopen}
				if s.enqueue(o) == nil {
					<-o.done
					if o.err != nil {
						s.health.logError("reopening the database after a full disk", "err", o.err)
					}
				}
			}
		}
		s.expire(now)
		cps = append(cps, checkpoint{at: now, rev: s.Revision()})
		cps, lastTrim = s.trim(now, cps, lastTrim)
		s.dropRetained(now)
	}
}

// expire deletes every event whose TTL has passed by now.
func (s *Store) expire(now time.Time) {
	for {
		ops := s.expiredOps(now)
		if len(ops) == 0 {
			return
		}
		pending := s.enqueueAll(ops)
		unavailable := false
		for _, o := range pending {
			<-o.done
			unavailable = unavailable || errors.Is(o.err, storage.ErrUnavailable)
		}
		if unavailable || len(pending) < len(ops) || len(ops) < expireBatch {
			return // next round; when the store cannot write, after the next tick
		}
	}
}

// enqueueAll queues ops without waiting for their outcomes, stopping at
// the first the store refuses (it is closing), and returns those queued.
func (s *Store) enqueueAll(ops []*op) []*op {
	pending := make([]*op, 0, len(ops))
	for _, o := range ops {
		if s.enqueue(o) != nil {
			break
		}
		pending = append(pending, o)
	}
	return pending
}

// enqueue queues o without waiting for its outcome.
func (s *Store) enqueue(o *op) error {
	o.done = make(chan struct{})
	s.submitMu.RLock()
	defer s.submitMu.RUnlock()
	if s.stopped {
		return context.Canceled
	}
	s.ops <- o
	return nil
}

func (s *Store) expiredOps(now time.Time) []*op {
	v, err := s.acquire()
	if err != nil {
		return nil
	}
	defer s.release(v)
	it, err := v.snap.NewIter(&pebble.IterOptions{
		LowerBound: []byte{prefixExpiry},
		UpperBound: expiryKey(now.UnixNano()+1, nil),
	})
	if err != nil {
		s.log.Error("expiry scan failed", "err", err)
		return nil
	}
	defer it.Close()
	var ops []*op
	for ok := it.First(); ok && len(ops) < expireBatch; ok = it.Next() {
		ns, name, ok := splitSuffix(it.Key()[9:])
		val, err := it.ValueAndErr()
		if !ok || err != nil || len(val) != 8 {
			s.log.Error("corrupt expiry entry", "key", it.Key(), "err", err)
			continue
		}
		ops = append(ops, &op{kind: opExpire, ns: ns, name: name,
			pre: storage.Preconditions{Revision: int64(binary.BigEndian.Uint64(val))}})
	}
	return ops
}

// trim drops change-log entries older than the history window, or beyond
// HistoryMaxEvents, but those a hold keeps (hold.go).
func (s *Store) trim(now time.Time, cps []checkpoint, lastTrim time.Time) ([]checkpoint, time.Time) {
	cutoff := now.Add(-s.opts.HistoryWindow)
	var keepFrom int64
	i := 0
	for ; i < len(cps) && !cps[i].at.After(cutoff); i++ {
		keepFrom = cps[i].rev + 1
	}
	if i > 0 {
		cps = cps[i-1:] // keep the newest checkpoint at or before the cutoff
	}
	capped := s.Revision() - s.opts.HistoryMaxEvents + 1
	if capped > keepFrom {
		keepFrom = capped
	}
	keepFrom = s.heldKeepFrom(now, keepFrom)
	if s.opts.MaxBytes > 0 && capped > keepFrom {
		// With a storage budget the change log stays within
		// HistoryMaxEvents even for a hold: the budget bounds the
		// events, the cap the log, so that the disk cannot fill while
		// an export sink is away. The sink finds the rest compacted.
		s.logHoldCut(keepFrom, capped)
		keepFrom = capped
	}
	oldest := s.oldestRev.Load()
	if keepFrom <= oldest {
		return cps, lastTrim
	}
	if keepFrom-oldest < trimMinEntries && now.Sub(lastTrim) < min(trimMaxDelay, s.opts.HistoryWindow) {
		return cps, lastTrim
	}
	o := &op{kind: opTrim, trimTo: keepFrom}
	if s.enqueue(o) == nil {
		<-o.done
	}
	return cps, now
}

func (s *Store) dropRetained(now time.Time) {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	for rev, v := range s.retained {
		if v.deadline <= now.UnixNano() {
			delete(s.retained, rev)
			s.unrefLocked(v)
		}
	}
}
