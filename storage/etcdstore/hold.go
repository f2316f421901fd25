package etcdstore

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// holdLimitLogInterval bounds how often the store logs that a hold
// reached MaxHistoryHold.
const holdLimitLogInterval = 10 * time.Minute

var _ storage.HistoryHolder = (*Store)(nil)

// historyHold is the store's storage.HistoryHolder state.
type historyHold struct {
	// rev is the held revision: changes after it are kept; 0: no hold.
	rev atomic.Int64
	// wake tells holdLoop that rev changed.
	wake chan struct{}
	// Owned by the compaction loop: (time, revision) of its rounds, the
	// oldest at or before now - MaxHistoryHold, and the limiter of the
	// line saying a hold was cut.
	rounds   []roundMark
	limitLog *ratelog.Limiter
}

// roundMark says every change up to rev was made by at.
type roundMark struct {
	at  time.Time
	rev int64
}

// holdsPrefix is <prefix>/kubevents.io/historyholds/: each replica that
// holds history puts <that><its session lease id> = the held revision,
// attached to the lease, and every replica's compaction honours every
// hold under it. The exporter runs on one replica (Lead) but any replica
// may win a compaction round, and a replica that dies takes its hold
// with it when its lease expires.
func (s *Store) holdsPrefix() string { return s.opts.Prefix + ownPrefix + "historyholds/" }

// HoldHistory implements storage.HistoryHolder: the store's compactions
// (and those of every eventsd replica on the same etcd) keep the changes
// after rev, whatever CompactionInterval and HistoryMaxRevisions say, as
// long as they are not older than MaxHistoryHold (on the compacting
// store's clock, with a compaction interval's granularity). It stores
// rev and wakes a background writer that publishes the hold to the other
// replicas; until that write lands (one etcd request) another replica's
// compaction does not see it.
//
// Only eventsd's compactions can be held back: a kube-apiserver sharing
// the etcd compacts it by itself every --etcd-compaction-interval (5
// minutes by default) to the revision it saw one interval earlier,
// whatever eventsd holds, and an export sink further behind than that
// then finds its cursor compacted. Point kube-apiserver's events at an
// etcd of their own (--etcd-servers-overrides), as large clusters do, or
// set its --etcd-compaction-interval=0 and let eventsd compact.
func (s *Store) HoldHistory(rev int64) {
	s.hold.rev.Store(max(rev, 0))
	select {
	case s.hold.wake <- struct{}{}:
	default:
	}
}

// holdLoop publishes this store's hold under holdsPrefix, in a session
// of its own whose lease (ElectionTTL) it keeps alive while the hold
// lasts; releasing the hold, or closing the store, revokes it.
func (s *Store) holdLoop() {
	defer s.wg.Done()
	var (
		sess    *concurrency.Session
		written int64 // the hold etcd has; 0: none
		retry   <-chan time.Time
	)
	defer func() {
		if sess != nil {
			s.endSession(sess)
		}
	}()
	for {
		var lost <-chan struct{}
		if sess != nil {
			lost = sess.Done()
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.hold.wake:
		case <-lost:
			// The lease expired (etcd was unreachable for its TTL):
			// the hold is gone from etcd; publish it again.
			s.endSession(sess)
			sess, written = nil, 0
		case <-retry:
		}
		retry = nil
		want := s.hold.rev.Load()
		if want == written {
			continue
		}
		if want == 0 {
			s.endSession(sess)
			sess, written = nil, 0
			continue
		}
		if err := s.writeHold(&sess, want); err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("etcdstore: publishing the history hold failed; retrying", "revision", want, "err", err)
			t := s.opts.Clock.NewTimer(electionRetryInterval)
			retry = t.C()
			continue
		}
		written = want
	}
}

// writeHold puts the hold want under this store's session's key,
// starting the session if needed.
func (s *Store) writeHold(sess **concurrency.Session, want int64) error {
	if *sess == nil {
		ns, err := s.newSession(s.ctx)
		if err != nil {
			return err
		}
		*sess = ns
	}
	id := (*sess).Lease()
	rctx, cancel := s.requestCtx(s.ctx)
	defer cancel()
	_, err := s.cli.Put(rctx, s.holdsPrefix()+fmt.Sprintf("%x", int64(id)), strconv.FormatInt(want, 10), clientv3.WithLease(id))
	if err != nil {
		return fmt.Errorf("etcdstore: put the history hold: %w", mapErr(s.unavailable(s.ctx, err)))
	}
	return nil
}

// heldTarget lowers a compaction round's target so that it keeps what
// the holds ask for, this store's and those other replicas published,
// but not the changes made more than MaxHistoryHold ago. Called by the
// compaction loop at the start of each round; an error (the holds could
// not be read) skips the round.
func (s *Store) heldTarget(ctx context.Context, target int64) (int64, error) {
	h := &s.hold
	now := s.opts.Clock.Now()
	// Every change up to the revision observed now was made by now.
	h.rounds = append(h.rounds, roundMark{at: now, rev: s.Revision()})
	cutoff := now.Add(-s.opts.MaxHistoryHold)
	var floor int64 // changes before it are older than MaxHistoryHold
	i := 0
	for ; i < len(h.rounds) && !h.rounds[i].at.After(cutoff); i++ {
		floor = h.rounds[i].rev + 1
	}
	if i > 1 {
		h.rounds = h.rounds[i-1:]
	}
	if target <= 0 {
		return target, nil
	}
	held := h.rev.Load()
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.holdsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read history holds: %w", mapErr(s.unavailable(ctx, err)))
	}
	for _, kv := range resp.Kvs {
		if r, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil && r > 0 && (held <= 0 || r < held) {
			held = r
		}
	}
	if held <= 0 || held+1 >= target {
		return target, nil
	}
	if floor > held+1 && floor < target {
		if h.limitLog == nil {
			h.limitLog = ratelog.New(s.opts.Clock, holdLimitLogInterval)
		}
		if ok, suppressed := h.limitLog.Allow(); ok {
			s.log.Warn("etcdstore: history held for longer than MaxHistoryHold is compacted; a consumer resuming from the held revision will find it compacted",
				"heldRevision", held, "compactTo", min(target, floor), "maxHistoryHold", s.opts.MaxHistoryHold, "suppressed", suppressed)
		}
	}
	return min(target, max(held+1, floor)), nil
}
