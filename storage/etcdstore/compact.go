package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// compactRevKey is the key kube-apiserver's compactors coordinate on:
// its Version is a logical clock of compactions, its value the revision
// last compacted to. Using the same key lets eventsd replicas and
// kube-apiservers sharing an etcd compact once per interval between them.
const compactRevKey = "compact_rev_key"

// compactLoop compacts every interval. Each round claims the interval with
// Txn(If Version(compact_rev_key)=version, Then Put(compact_rev_key,
// target)); the winner compacts to the revision seen one round earlier (so
// one interval of history is kept), the losers only learn the new version
// and revision.
func (s *Store) compactLoop(ticker clock.Ticker, version int64) {
	defer s.wg.Done()
	defer ticker.Stop()
	var prevRev int64 // etcd's revision one round ago; 0: none yet
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ticker.C():
		}
		ctx, cancel := context.WithTimeout(s.ctx, DefaultRequestTimeout)
		var err error
		version, prevRev, err = s.compact(ctx, version, prevRev)
		cancel()
		if err != nil && s.ctx.Err() == nil {
			s.log.Warn("etcdstore: compaction failed", "err", err)
		}
	}
}

// compact runs one round: it returns the compaction clock and the
// revision to compact to next round.
func (s *Store) compact(ctx context.Context, version, prevRev int64) (int64, int64, error) {
	target := prevRev
	if n := s.opts.HistoryMaxRevisions; n > 0 && s.Revision()-n > target {
		target = s.Revision() - n
	}
	target, err := s.heldTarget(ctx, target) // hold.go
	if err != nil {
		return version, prevRev, err
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(compactRevKey), "=", version),
	).Then(
		clientv3.OpPut(compactRevKey, strconv.FormatInt(target, 10)),
	).Else(
		clientv3.OpGet(compactRevKey),
	).Commit()
	if err != nil {
		return version, prevRev, fmt.Errorf("claim compaction: %w", err)
	}
	cur := resp.Header.Revision
	if !resp.Succeeded {
		// Another writer compacted this interval.
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			if r, err := strconv.ParseInt(string(kvs[0].Value), 10, 64); err == nil && r > s.oldest.Load() {
				s.oldest.Store(r)
				s.forgetIndex(r)
			}
			return kvs[0].Version, cur, nil
		}
		return 0, cur, nil
	}
	if target <= 0 {
		return version + 1, cur, nil // the first round only records a revision
	}
	if _, err := s.cli.Compact(ctx, target); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return version + 1, cur, fmt.Errorf("compact to %d: %w", target, err)
	}
	if target > s.oldest.Load() {
		s.oldest.Store(target)
		s.forgetIndex(target)
	}
	s.log.Info("etcdstore: compacted", "revision", target)
	return version + 1, cur, nil
}
