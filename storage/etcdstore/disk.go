package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/diskindex"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
)

// The on-disk index (Options.IndexDir; storage/diskindex): kept in a
// local pebble across restarts, fed by the shared watch like the
// in-memory one, and brought up to date with etcd by a reconciliation
// (compare keys and mod revisions, fetch only what changed) instead of a
// build that decodes every event.

// reconcileScan is how many local records one step of a reconciliation
// reads.
const reconcileScan = 1024

// freeOSMemoryAfter is how many fetched keys make a reconciliation end
// with debug.FreeOSMemory.
const freeOSMemoryAfter = 100000

// openDiskIndex opens the index in Options.IndexDir and makes it current
// with etcd, whose revision is cur and compacted revision compacted: an
// index of this cluster and prefix whose revision etcd still has resumes
// as it is (the shared watch replays the changes since, and lists wait
// for them); any other (new, foreign, left mid-reconciliation, behind
// the compaction, or ahead of etcd) is reconciled at etcd's current
// revision. It returns the index and the revision the shared watch
// follows from.
func (s *Store) openDiskIndex(ctx context.Context, id diskindex.Identity, cur, compacted int64) (*diskindex.Index, int64, error) {
	d, err := diskindex.Open(diskindex.Options{Dir: s.opts.IndexDir, CacheBytes: s.opts.IndexCacheBytes, Logger: s.log})
	if err != nil {
		return nil, 0, fmt.Errorf("etcdstore: the on-disk index: %w", err)
	}
	rev := d.Revision()
	if d.Identity() == id && rev > 0 && rev <= cur && rev >= compacted {
		// etcd still has rev (a watch from rev+1 will not be refused as
		// compacted) when a read at rev succeeds: compact_rev_key does
		// not know of every compaction (etcdctl's, another tool's).
		_, err := s.get(ctx, s.root, clientv3.WithRev(rev), clientv3.WithCountOnly())
		switch {
		case err == nil:
			s.log.Info("etcdstore: resuming the on-disk index", "dir", s.opts.IndexDir, "revision", rev, "etcdRevision", cur, "keys", d.Len())
			return d, rev, nil
		case errors.Is(mapErr(err), storage.ErrCompacted):
			compacted = rev + 1
		default:
			d.Close()
			return nil, 0, fmt.Errorf("etcdstore: read %s at the on-disk index's revision %d: %w", s.root, rev, mapErr(err))
		}
	}
	switch {
	case d.Identity() == id && rev > cur:
		s.log.Warn("etcdstore: the on-disk index is ahead of etcd (etcd restored from a backup?); reconciling", "dir", s.opts.IndexDir, "revision", rev, "etcdRevision", cur)
	case d.Identity() == id && rev > 0:
		s.log.Info("etcdstore: etcd compacted past the on-disk index; reconciling", "dir", s.opts.IndexDir, "revision", rev, "compactedTo", compacted)
	}
	if rev, err = s.reconcile(ctx, d, id); err != nil {
		d.Close()
		return nil, 0, err
	}
	return d, rev, nil
}

// IndexReconciliations is the number of times the store reconciled its
// on-disk index with etcd (Options.IndexDir) since it opened: at Open
// when the index was new, of another cluster or prefix, or compacted
// past, and after each break in the shared watch.
func (s *Store) IndexReconciliations() int64 { return s.reconciles.Load() }

// IndexKeysFetched is the number of keys those reconciliations fetched
// (and decoded) from etcd: the keys new or changed since the index's
// revision.
func (s *Store) IndexKeysFetched() int64 { return s.reconFetched.Load() }

// identity is what the on-disk index must have been built for.
func (s *Store) identity(clusterID uint64) diskindex.Identity {
	return diskindex.Identity{ClusterID: clusterID, Prefix: s.root}
}

// reconcileStalls is how many reconciliations in a row etcd may compact
// past, each before it fetched anything, before the store gives up. A
// reconciliation cut short by a compaction past its revision (kube-apiserver
// compacts a shared etcd every 5 minutes; the first reconciliation of 10M
// events takes longer) is tried again at the current revision, keeping
// every record the ones before it wrote: one that fetched something made
// progress, so only one that fetched nothing counts as a stall.
const reconcileStalls = 3

// reconcile is reconcileOnce, tried again while etcd compacts past its
// revision and the tries make progress.
func (s *Store) reconcile(ctx context.Context, d *diskindex.Index, id diskindex.Identity) (int64, error) {
	stalls := 0
	for {
		rev, fetched, err := s.reconcileOnce(ctx, d, id)
		if !errors.Is(err, storage.ErrCompacted) {
			return rev, err
		}
		s.reconFetched.Add(fetched)
		if fetched > 0 {
			stalls = 0
		} else if stalls++; stalls == reconcileStalls {
			return 0, fmt.Errorf("%w (%d reconciliations in a row found etcd compacted past their revision before they fetched anything: "+
				"etcd is compacted more often than the prefix's keys can be read)", err, stalls)
		}
		s.log.Warn("etcdstore: etcd compacted past the revision the on-disk index was being reconciled at; "+
			"reconciling again at the current revision, keeping what was fetched", "revision", rev, "fetched", fetched, "err", err)
	}
}

// reconcileOnce brings d up to date with etcd at its current revision R: a
// keys-only range read of the prefix at R (keys and mod revisions, no
// values) is compared with d's records; the keys that are new or whose
// mod revision differs are fetched at R (transactions of fetchBatch gets)
// and decoded, and d's keys absent at R are removed. It returns R, from
// which the shared watch follows on, and the number of keys it fetched
// (also when it fails: what it fetched is kept in d).
func (s *Store) reconcileOnce(ctx context.Context, d *diskindex.Index, id diskindex.Identity) (rev, fetched int64, err error) {
	if err := d.BeginReconcile(id); err != nil {
		return 0, 0, fmt.Errorf("etcdstore: %w", err)
	}
	var removed, kept int64
	local := &localRecords{d: d}
	// A linearizable read: R is at least every revision acknowledged
	// before the reconciliation began.
	cur, err := s.get(ctx, s.root)
	if err != nil {
		return 0, 0, fmt.Errorf("etcdstore: reconcile the on-disk index: %w", mapErr(err))
	}
	rev = cur.Header.Revision
	s.observe(rev)
	err = s.keyPages(ctx, rev, func(kvs []*mvccpb.KeyValue, start string, last bool) error {
		var fetch []string
		var changes []diskindex.Change
		absent := map[string]bool{} // fetched keys the index has no record of
		for _, kv := range kvs {
			rel := strings.TrimPrefix(string(kv.Key), s.root)
			if !strings.Contains(rel, "/") {
				continue
			}
			for {
				l, ok, err := local.peek()
				if err != nil {
					return err
				}
				if !ok || l.Key >= rel {
					break
				}
				changes = append(changes, deleteChange(l.Key))
				local.pop()
			}
			l, ok, err := local.peek()
			if err != nil {
				return err
			}
			if ok && l.Key == rel {
				local.pop()
				if l.ModRevision == kv.ModRevision {
					kept++
					continue
				}
			} else {
				absent[rel] = true
			}
			fetch = append(fetch, rel)
		}
		if last {
			for {
				l, ok, err := local.peek()
				if err != nil {
					return err
				}
				if !ok {
					break
				}
				changes = append(changes, deleteChange(l.Key))
				local.pop()
			}
		}
		removed += int64(len(changes))
		if err := d.Apply(0, changes); err != nil {
			return err
		}
		if len(fetch) > 0 && 2*len(fetch) > len(kvs) {
			// Most of the page changed (a new index): one range read of
			// the page's values at R costs etcd far less than
			// transactions of gets.
			cs, err := s.fetchRange(ctx, start, string(kvs[len(kvs)-1].Key), fetch, rev)
			if err != nil {
				return err
			}
			markNew(cs, absent)
			if err := d.Apply(0, cs); err != nil {
				return err
			}
			fetched += int64(len(fetch))
			fetch = nil
		}
		for len(fetch) > 0 {
			chunk := fetch[:min(len(fetch), fetchBatch)]
			fetch = fetch[len(chunk):]
			cs, err := s.fetchChanges(ctx, chunk, rev)
			if err != nil {
				return err
			}
			markNew(cs, absent)
			if err := d.Apply(0, cs); err != nil {
				return err
			}
			fetched += int64(len(chunk))
		}
		return nil
	})
	if err != nil {
		return rev, fetched, fmt.Errorf("etcdstore: reconcile the on-disk index: %w", mapErr(err))
	}
	if err := d.EndReconcile(rev); err != nil {
		return rev, fetched, fmt.Errorf("etcdstore: %w", err)
	}
	s.reconciles.Add(1)
	s.reconFetched.Add(fetched)
	if fetched >= freeOSMemoryAfter {
		// The fetched values' garbage: as after an in-memory build, give
		// it back to the OS once rather than keep it mapped.
		debug.FreeOSMemory()
	}
	s.log.Info("etcdstore: the on-disk index is reconciled with etcd", "revision", rev,
		"unchanged", kept, "fetched", fetched, "removed", removed, "keys", d.Len())
	return rev, fetched, nil
}

// markNew marks the puts of keys the index has no record of as New, so
// that writing them reads nothing.
func markNew(cs []diskindex.Change, absent map[string]bool) {
	for i := range cs {
		cs[i].New = !cs[i].Delete && absent[cs[i].Namespace+"/"+cs[i].Name]
	}
}

func deleteChange(key string) diskindex.Change {
	ns, name, _ := strings.Cut(key, "/")
	return diskindex.Change{Namespace: ns, Name: name, Delete: true}
}

// fetchChanges gets keys (relative to root) from etcd at rev in one
// transaction and returns them as the index's changes; a key gone at rev
// is removed.
func (s *Store) fetchChanges(ctx context.Context, keys []string, rev int64) ([]diskindex.Change, error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(s.root+k, clientv3.WithRev(rev))
	}
	resp, err := s.txn(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("fetch %d keys at %d: %w", len(keys), rev, mapErr(err))
	}
	out := make([]diskindex.Change, 0, len(keys))
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			out = append(out, deleteChange(keys[i]))
			continue
		}
		out = append(out, s.putChange(keys[i], kvs[0], nil, false))
	}
	return out, nil
}

// fetchRange reads the keys from start through last (etcd keys) at rev
// with their values and returns as the index's changes those of keys
// (relative to root, in key order), decoding only them; a key gone at
// rev is removed.
func (s *Store) fetchRange(ctx context.Context, start, last string, keys []string, rev int64) ([]diskindex.Change, error) {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := make([]diskindex.Change, 0, len(keys))
	for {
		resp, err := s.get(ctx, start, clientv3.WithRange(last+"\x00"), clientv3.WithRev(rev), clientv3.WithLimit(indexBuildBatch))
		if err != nil {
			return nil, fmt.Errorf("read %s..%s at %d: %w", start, last, rev, mapErr(err))
		}
		for _, kv := range resp.Kvs {
			rel := strings.TrimPrefix(string(kv.Key), s.root)
			if want[rel] {
				delete(want, rel)
				out = append(out, s.putChange(rel, kv, nil, false))
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	for _, k := range keys { // none at rev: cannot be, the keys were read at rev
		if want[k] {
			out = append(out, deleteChange(k))
		}
	}
	return out, nil
}

// putChange is the index's change for kv (relative key rel): decoded
// here unless decoded is set (ev, nil when undecodable).
func (s *Store) putChange(rel string, kv *mvccpb.KeyValue, ev *corev1.Event, decoded bool) diskindex.Change {
	ns, name, _ := strings.Cut(rel, "/")
	c := diskindex.Change{Namespace: ns, Name: name, Revision: kv.ModRevision,
		Size: int64(len(kv.Key) + len(kv.Value)), Lease: kv.Lease}
	if decoded {
		c.Event = ev
	} else if e, err := s.decodeKV(kv, kv.ModRevision); err == nil {
		c.Event = e
	}
	if s.budget != nil {
		c.Rule = s.ruleOf(c.Event)
	}
	return c
}

// feedDisk writes one batch of the shared watch's events to the on-disk
// index as one pebble batch at rev.
func (s *Store) feedDisk(h *indexHolder, events []*clientv3.Event, cs []change, rev int64) error {
	changes := make([]diskindex.Change, 0, len(events))
	for i, e := range events {
		rel := strings.TrimPrefix(string(e.Kv.Key), s.root)
		ns, name, ok := strings.Cut(rel, "/")
		if !ok {
			continue
		}
		if e.Type == clientv3.EventTypeDelete {
			changes = append(changes, diskindex.Change{Namespace: ns, Name: name, Delete: true, Revision: cs[i].rev})
			continue
		}
		c := s.putChange(rel, e.Kv, cs[i].cur, true)
		// A create: the key did not exist at the index's revision, so
		// the index has no record of it (a record left by an
		// inconsistency would only add a candidate lists filter out).
		c.New = e.IsCreate()
		changes = append(changes, c)
	}
	if err := h.disk.Apply(rev, changes); err != nil {
		return err
	}
	s.budgetCheck(h.usage)
	return nil
}

// localRecords walks the on-disk index's records in key order, a page at
// a time, for a reconciliation.
type localRecords struct {
	d    *diskindex.Index
	buf  []diskindex.KeyRevision
	next string
	done bool
}

func (l *localRecords) peek() (diskindex.KeyRevision, bool, error) {
	if len(l.buf) == 0 && !l.done {
		page, err := l.d.Scan(l.next, reconcileScan)
		if err != nil {
			return diskindex.KeyRevision{}, false, err
		}
		l.buf, l.done = page, len(page) < reconcileScan
		if len(page) > 0 {
			l.next = page[len(page)-1].Key + "\x00"
		}
	}
	if len(l.buf) == 0 {
		return diskindex.KeyRevision{}, false, nil
	}
	return l.buf[0], true, nil
}

func (l *localRecords) pop() { l.buf = l.buf[1:] }

// diskUsage is the storage budget's view of the on-disk index: per-key
// sizes, leases and rules live in its records, only the totals by lease
// in memory.
type diskUsage struct{ d *diskindex.Index }

func (u diskUsage) bytes() int64                { return u.d.Bytes() }
func (u diskUsage) leaseBytes() map[int64]int64 { return u.d.LeaseBytes() }

// keysOf returns the keys of leases: at most victimsPerLease of each, in
// key order.
func (u diskUsage) keysOf(leases []int64) ([]victim, error) {
	us, err := u.d.VictimsOf(leases, victimsPerLease)
	if err != nil {
		return nil, err
	}
	out := make([]victim, len(us))
	for i, x := range us {
		out[i] = victim{rel: x.Key, modRev: x.ModRevision, rule: x.Rule, size: x.Size, lease: x.Lease}
	}
	return out, nil
}

// expired does nothing: the index learns of the deletion from the shared
// watch, its only writer.
func (u diskUsage) expired(string, int64) {}

// settle waits for the index to reach rev (the store's own deletions).
func (u diskUsage) settle(ctx context.Context, rev int64) error { return u.d.Wait(ctx, rev) }
