package pebblestore

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/storage"
)

const (
	// holdCheckpointInterval is the spacing of the (time, revision)
	// checkpoints that bound a hold by time: a day of them at one a minute
	// is 1,440 small entries, and a change is trimmed at most a minute
	// later than MaxHistoryHold allows.
	holdCheckpointInterval = time.Minute
	// holdLimitLogInterval bounds how often the store logs that a hold
	// reached MaxHistoryHold: once per trim would be every tick.
	holdLimitLogInterval = 10 * time.Minute
)

var _ storage.HistoryHolder = (*Store)(nil)

// historyHold is the store's storage.HistoryHolder state.
type historyHold struct {
	// rev is the held revision: changes after it are kept; 0: no hold.
	rev atomic.Int64
	// Owned by the maintenance loop: checkpoints at most one per
	// holdCheckpointInterval, the oldest at or before now -
	// MaxHistoryHold, and the limiter of the line saying a hold was cut.
	cps      []checkpoint
	limitLog *ratelog.Limiter
}

// HoldHistory implements storage.HistoryHolder: the change log keeps
// every change after rev, whatever HistoryWindow and HistoryMaxEvents
// say, as long as the change is not older than MaxHistoryHold (on the
// store's clock, with a minute's granularity). It only stores rev; the
// maintenance loop reads it on its next trim.
//
// Until the first call, the store holds history after the oldest cursor
// saved (storage.CursorStore) when it opened, so that a restart does not
// trim what an exporter is about to resume from before it says so.
func (s *Store) HoldHistory(rev int64) {
	s.hold.rev.Store(max(rev, 0))
}

// heldKeepFrom lowers keepFrom, the oldest revision the change log would
// keep, to honour the hold, but not below the first change made within
// MaxHistoryHold. Called by the maintenance loop on each trim.
func (s *Store) heldKeepFrom(now time.Time, keepFrom int64) int64 {
	h := &s.hold
	if n := len(h.cps); n == 0 || now.Sub(h.cps[n-1].at) >= holdCheckpointInterval {
		h.cps = append(h.cps, checkpoint{at: now, rev: s.Revision()})
	}
	cutoff := now.Add(-s.opts.MaxHistoryHold)
	var floor int64 // changes before it are older than MaxHistoryHold
	i := 0
	for ; i < len(h.cps) && !h.cps[i].at.After(cutoff); i++ {
		floor = h.cps[i].rev + 1
	}
	if i > 1 {
		h.cps = h.cps[i-1:]
	}
	held := h.rev.Load()
	if held <= 0 || held+1 >= keepFrom {
		return keepFrom
	}
	if floor > held+1 && floor < keepFrom {
		if h.limitLog == nil {
			h.limitLog = ratelog.New(s.clock, holdLimitLogInterval)
		}
		if ok, suppressed := h.limitLog.Allow(); ok {
			s.log.Warn("pebblestore: history held for longer than MaxHistoryHold is trimmed; a consumer resuming from the held revision will find it compacted",
				"heldRevision", held, "keptFrom", floor, "maxHistoryHold", s.opts.MaxHistoryHold, "suppressed", suppressed)
		}
	}
	return min(keepFrom, max(held+1, floor))
}

// initialHold is the oldest cursor saved, or 0: HoldHistory's value
// until its first call.
func (s *Store) initialHold() (int64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCursor}, UpperBound: []byte{prefixCursor + 1}})
	if err != nil {
		return 0, fmt.Errorf("pebblestore: reading cursors: %w", err)
	}
	defer it.Close()
	var oldest int64
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, fmt.Errorf("pebblestore: reading cursor %q: %w", it.Key()[1:], err)
		}
		if len(v) != 8 {
			continue // Cursor reports it
		}
		if r := int64(binary.BigEndian.Uint64(v)); r > 0 && (oldest == 0 || r < oldest) {
			oldest = r
		}
	}
	return oldest, it.Error()
}

// logHoldCut logs, rate-limited, that the change-log cap with a storage
// budget trims history a hold would keep (from held to keptFrom).
func (s *Store) logHoldCut(held, keptFrom int64) {
	h := &s.hold
	if h.limitLog == nil {
		h.limitLog = ratelog.New(s.clock, holdLimitLogInterval)
	}
	if ok, suppressed := h.limitLog.Allow(); ok {
		s.log.Warn("pebblestore: with a storage budget the change log keeps at most HistoryMaxEvents changes, whatever a hold asks; a consumer resuming from the held revision will find it compacted",
			"heldFrom", held, "keptFrom", keptFrom, "historyMaxEvents", s.opts.HistoryMaxEvents, "suppressed", suppressed)
	}
}
