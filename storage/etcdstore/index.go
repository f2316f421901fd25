package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/diskindex"
	"github.com/kubevents/kubevents/storage/index"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
)

// indexBuildBatch is how many keys one paged range read returns (an
// index build or reconciliation on etcd without RangeStream, a
// reconciliation's values): bounded, so that a large prefix is read in
// several requests.
const indexBuildBatch = 10000

// fetchBatch is how many keys one transaction of gets fetches: etcd
// refuses transactions of more than --max-txn-ops operations (128 by
// default).
const fetchBatch = 128

// keyIndex is what the store needs of its secondary index, for lists
// and for the shared watch's progress: index.Memory, or the on-disk
// diskindex.Index (Options.IndexDir).
type keyIndex interface {
	Set() index.Set
	Len() int
	Revision() int64
	Wait(ctx context.Context, rev int64) error
	Keys(p index.Plan, at int64, after string, limit int) ([]string, int64, error)
	SetRevision(rev int64)
}

var (
	_ keyIndex = (*index.Memory)(nil)
	_ keyIndex = (*diskindex.Index)(nil)
)

// indexHolder is the store's current index; done is closed when a new
// index replaces it (after a break in the shared watch), so that lists
// waiting on this one retry on the new one. The on-disk index is never
// replaced: it is reconciled in place.
type indexHolder struct {
	m        keyIndex
	mem      *index.Memory    // m, in memory; nil with the on-disk index
	disk     *diskindex.Index // m, on disk; nil with the in-memory index
	replaced context.Context
	replace  context.CancelFunc
	// usage is the events' bytes for the storage budget, built and fed
	// with m; nil without a budget.
	usage budgetUsage
}

func newMemHolder(m *index.Memory, u *usage) *indexHolder {
	ctx, cancel := context.WithCancel(context.Background())
	h := &indexHolder{m: m, mem: m, replaced: ctx, replace: cancel}
	if u != nil {
		h.usage = u
	}
	return h
}

func newDiskHolder(d *diskindex.Index, budget bool) *indexHolder {
	ctx, cancel := context.WithCancel(context.Background())
	h := &indexHolder{m: d, disk: d, replaced: ctx, replace: cancel}
	if budget {
		h.usage = diskUsage{d}
	}
	return h
}

// buildIndex lists the whole prefix at rev (0: the current revision) and
// returns an index of index.All() holding every decodable event in it, at
// that revision. Undecodable values are skipped, as lists skip them. With
// a storage budget it also returns the events' bytes (every value, as
// each takes room in etcd), nil otherwise.
//
// The build decodes every event once: its garbage is several times the
// index, and the GC lets the heap grow to twice what is live before it
// collects, so the process would keep that much more memory mapped long
// after the build. buildIndex ends with one forced collection that also
// returns the free memory to the OS (debug.FreeOSMemory): at 1M events
// it takes about 50 ms (BenchmarkMemoryBytesPerEvent's ms/FreeOSMemory),
// once per build, and brings the replica's RSS from about 1.5 times its
// live heap down to about its live heap.
func (s *Store) buildIndex(ctx context.Context, rev int64) (*index.Memory, *usage, error) {
	defer debug.FreeOSMemory()
	m := index.NewMemory(index.All())
	var u *usage
	if s.budget != nil {
		u = newUsage()
	}
	if rev == 0 {
		var err error
		if rev, err = s.currentRevision(ctx); err != nil {
			return nil, nil, fmt.Errorf("etcdstore: build the index: %w", err)
		}
	}
	// Streamed (keypages.go): pages of a range read would each have etcd
	// count the keys from the page to the prefix's end, O(events²) in all.
	err := s.valuePages(ctx, rev, func(kvs []*mvccpb.KeyValue, _ string, _ bool) error {
		for _, kv := range kvs {
			ev, err := s.decodeKV(kv, kv.ModRevision)
			if err == nil {
				m.Put(ev, rev)
			} else {
				ev = nil
			}
			if u != nil {
				u.put(strings.TrimPrefix(string(kv.Key), s.root), kv, s.ruleOf(ev))
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("etcdstore: build the index: %w", mapErr(err))
	}
	m.SetRevision(rev)
	return m, u, nil
}

// swapIndex makes h the store's index.
func (s *Store) swapIndex(h *indexHolder) {
	if old := s.idx.Swap(h); old != nil {
		old.replace()
	}
}

// feedIndex applies one batch of the shared watch's events to the index
// (and the budget's bytes). An error (the on-disk index failed to write)
// leaves the index where it was: the caller restarts the shared watch,
// which reconciles it.
func (s *Store) feedIndex(h *indexHolder, events []*clientv3.Event, cs []change, rev int64) error {
	if h.disk != nil {
		return s.feedDisk(h, events, cs, rev)
	}
	m := h.mem
	u, _ := h.usage.(*usage)
	for i, e := range events {
		rel := strings.TrimPrefix(string(e.Kv.Key), s.root)
		ns, name, ok := strings.Cut(rel, "/")
		if !ok {
			continue
		}
		if cs[i].cur != nil {
			m.Put(cs[i].cur, cs[i].rev)
		} else {
			// A delete, or a value that cannot be decoded: lists skip it.
			m.Delete(ns, name, cs[i].rev)
		}
		if u != nil {
			if e.Type == clientv3.EventTypeDelete {
				u.remove(rel, 0)
			} else {
				u.put(rel, e.Kv, s.ruleOf(cs[i].cur))
			}
		}
	}
	m.SetRevision(rev)
	s.budgetCheck(h.usage)
	return nil
}

// forgetIndex drops the index's history up to the compacted revision rev.
func (s *Store) forgetIndex(rev int64) {
	h := s.idx.Load()
	switch {
	case h == nil:
	case h.mem != nil:
		h.mem.Forget(rev)
	case h.disk != nil:
		if err := h.disk.Forget(rev); err != nil {
			s.log.Warn("etcdstore: the on-disk index could not drop its history", "revision", rev, "err", err)
		}
	}
}

// IndexedLists is the number of lists (pages) the store served through
// its index rather than a range read.
func (s *Store) IndexedLists() int64 { return s.indexedLists.Load() }

// ListKeysRead is the number of keys lists have read from etcd since the
// store opened: the keys of the range reads of unindexed lists, and the
// candidate keys indexed lists fetched.
func (s *Store) ListKeysRead() int64 { return s.listKeysRead.Load() }

// The values of eventsd_etcd_list_keys_read_total's path label.
const (
	listPathIndex = "index"
	listPathRange = "range"
)

// countListKeys counts n keys a list read from etcd by path.
func (s *Store) countListKeys(path string, n int) {
	s.listKeysRead.Add(int64(n))
	s.listKeysMetric.WithLabelValues(path).Add(float64(n))
}

// currentRevision reads etcd's current revision with a get of one key.
func (s *Store) currentRevision(ctx context.Context) (int64, error) {
	resp, err := s.get(ctx, s.root)
	if err != nil {
		return 0, fmt.Errorf("read the current revision: %w", mapErr(err))
	}
	s.observe(resp.Header.Revision)
	return resp.Header.Revision, nil
}

// waitIndex waits for the store's index to reach rev and returns it,
// moving to a new index when the one it waited on is replaced.
// The shared watch feeds the index: if it has not delivered rev within
// the request timeout, etcd is taken to be unavailable.
func (s *Store) waitIndex(parent context.Context, rev int64) (keyIndex, error) {
	ctx, cancel := context.WithTimeout(parent, s.opts.RequestTimeout)
	defer cancel()
	progressing := false
	for {
		h := s.idx.Load()
		if !progressing && h.m.Revision() < rev {
			// etcd's revision also moves with writes outside the prefix
			// (compact_rev_key, other resources in a shared etcd), which
			// the shared watch only learns from a progress notification.
			progressing = true
			s.requestProgressUntil(ctx)
		}
		wctx, wcancel := context.WithCancel(ctx)
		stop := context.AfterFunc(h.replaced, wcancel)
		err := h.m.Wait(wctx, rev)
		stop()
		wcancel()
		if err == nil {
			return h.m, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("etcdstore: list: the index did not reach revision %d: %w", rev, s.unavailable(parent, err))
		}
	}
}

// progressRetry is how often a list waiting for the index asks etcd for
// progress on the shared watch again: etcd drops a request while a watch
// on the stream is unsynced.
const progressRetry = 100 * time.Millisecond

// requestProgressUntil asks etcd for a progress notification on the
// shared watch's stream now, and again every progressRetry until ctx
// ends.
func (s *Store) requestProgressUntil(ctx context.Context) {
	request := func() {
		if err := s.cli.RequestProgress(s.hubCtx); err != nil && ctx.Err() == nil {
			s.log.Debug("etcdstore: progress request for a list failed", "err", err)
		}
	}
	request()
	ticker := s.opts.Clock.NewTicker(progressRetry)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.ctx.Done():
				return
			case <-ticker.C():
				request()
			}
		}
	}()
}

// errNotIndexed sends a list back to the range read.
var errNotIndexed = errors.New("not served by the index")

// indexedList serves a list whose plan has index lookups: the candidate
// keys from the index, fetched from etcd at the list's revision and
// filtered with the selector. at is the list's revision for a later page
// (0 for a first page), after the key (relative to root) to continue
// after. It returns errNotIndexed when the index cannot answer (its
// history does not reach back to at).
func (s *Store) indexedList(ctx context.Context, opts storage.ListOptions, plan index.Plan, at int64, after string) (*storage.ListResult, error) {
	wait, pinned := at, at != 0
	if at == 0 {
		cur, err := s.currentRevision(ctx)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: list: %w", err)
		}
		if opts.Revision > 0 {
			if opts.Revision > cur {
				return nil, fmt.Errorf("revision %d, current %d: %w", opts.Revision, cur, storage.ErrFutureRevision)
			}
			if opts.Exact {
				at, pinned = opts.Revision, true
			}
		}
		wait = cur
	}
	m, err := s.waitIndex(ctx, wait)
	if err != nil {
		return nil, err
	}
	res := &storage.ListResult{Items: []*corev1.Event{}, Revision: at}
	limit := int(opts.Limit)
	batch := limit
	for {
		n := 0
		if limit > 0 {
			n = max(batch, limit-len(res.Items))
		}
		keys, rev, err := m.Keys(plan, at, after, n)
		if err != nil {
			// A time range of more buckets than the index merges is
			// read from etcd too.
			if errors.Is(err, storage.ErrCompacted) || errors.Is(err, index.ErrRangeTooWide) {
				return nil, errNotIndexed
			}
			return nil, err
		}
		if at == 0 {
			at = rev
			res.Revision = rev
		}
		if len(keys) == 0 && pinned {
			// Nothing to fetch: check that etcd still serves the
			// revision asked for, as a range read at it would.
			if _, err := s.get(ctx, s.root, clientv3.WithRev(at)); err != nil {
				return nil, fmt.Errorf("etcdstore: list at %d: %w", at, mapErr(err))
			}
		}
		evs, err := s.fetch(ctx, keys, at)
		if err != nil {
			return nil, err
		}
		for i, ev := range evs {
			if ev == nil || !opts.Selector.Matches(ev) {
				continue
			}
			res.Items = append(res.Items, ev)
			if limit > 0 && len(res.Items) >= limit {
				if i < len(keys)-1 || len(keys) == n {
					res.Continue = s.continueAt(opts.Selector, at, s.root+keys[i]+"\x00")
				}
				s.indexedLists.Add(1)
				return res, nil
			}
		}
		if n == 0 || len(keys) < n {
			s.indexedLists.Add(1)
			return res, nil
		}
		// The selector's other terms filtered candidates out: read on
		// with bigger batches.
		after = keys[len(keys)-1]
		batch = min(2*n, maxListBatch)
	}
}

// fetch gets keys (relative to root) from etcd at rev, in transactions of
// gets; a key missing or undecodable at rev gives nil.
func (s *Store) fetch(ctx context.Context, keys []string, rev int64) ([]*corev1.Event, error) {
	out := make([]*corev1.Event, 0, len(keys))
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), fetchBatch)]
		keys = keys[len(chunk):]
		ops := make([]clientv3.Op, len(chunk))
		for i, k := range chunk {
			ops[i] = clientv3.OpGet(s.root+k, clientv3.WithRev(rev))
		}
		resp, err := s.txn(ctx, ops...)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: list: fetch %d keys at %d: %w", len(chunk), rev, mapErr(err))
		}
		s.observe(resp.Header.Revision)
		s.countListKeys(listPathIndex, len(chunk))
		for _, r := range resp.Responses {
			kvs := r.GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				out = append(out, nil)
				continue
			}
			ev, err := s.decodeKV(kvs[0], kvs[0].ModRevision)
			if err != nil {
				ev = nil
			}
			out = append(out, ev)
		}
	}
	return out, nil
}
