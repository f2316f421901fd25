package etcdstore

import (
	"context"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
)

// change is one etcd event under the prefix, decoded once for every
// watcher: cur is the new state (nil for a delete or an undecodable
// value), prev the previous one (nil when there was none or it cannot be
// decoded), both carrying the change's revision.
type change struct {
	rev       int64
	delete    bool
	create    bool
	cur, prev *corev1.Event
}

// hub is the store's one etcd watch on the whole prefix, fanned out to
// its watchers through a ring of recent changes. The ring holds every
// change with a revision in (from, covered].
type hub struct {
	size     int // the ring keeps at least the last size changes, at most twice as many
	mu       sync.Mutex
	ring     []change
	from     int64
	covered  int64
	progress int64         // progress notifications received
	wake     chan struct{} // closed and replaced at every update
}

func newHub(rev int64, size int) *hub {
	return &hub{size: size, from: rev, covered: rev, wake: make(chan struct{})}
}

// publish appends changes (in revision order) and raises covered to rev.
func (h *hub) publish(cs []change, rev int64, progress bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring = append(h.ring, cs...)
	// Trim to size once it has doubled: copying is amortized O(1) a
	// change, and watchers may keep reading the old array.
	if len(h.ring) >= 2*h.size {
		over := len(h.ring) - h.size
		h.from = h.ring[over-1].rev
		h.ring = append(make([]change, 0, 2*h.size), h.ring[over:]...)
	}
	if rev > h.covered {
		h.covered = rev
	}
	if progress {
		h.progress++
	}
	close(h.wake)
	h.wake = make(chan struct{})
}

// reset empties the ring after a break in the hub's watch: it holds
// nothing before rev.
func (h *hub) reset(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring, h.from, h.covered = nil, rev, rev
	close(h.wake)
	h.wake = make(chan struct{})
}

// hubView is what a watcher at pos reads from the hub at one moment.
type hubView struct {
	ok       bool     // pos is within the ring: changes are all after it
	changes  []change // the changes after pos
	covered  int64
	progress int64
	wake     <-chan struct{}
}

func (h *hub) after(pos int64) hubView {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := hubView{ok: pos >= h.from, covered: h.covered, progress: h.progress, wake: h.wake}
	if v.ok {
		i := sort.Search(len(h.ring), func(i int) bool { return h.ring[i].rev > pos })
		v.changes = h.ring[i:len(h.ring):len(h.ring)]
	}
	return v
}

// decodeChange decodes an etcd event once for all watchers.
func (s *Store) decodeChange(e *clientv3.Event) change {
	c := change{rev: e.Kv.ModRevision, delete: e.Type == clientv3.EventTypeDelete, create: e.IsCreate()}
	if e.PrevKv != nil {
		if p, err := s.decodeKV(e.PrevKv, c.rev); err == nil {
			c.prev = p
		}
	}
	if !c.delete {
		if cur, err := s.decodeKV(e.Kv, c.rev); err == nil {
			c.cur = cur
		}
	}
	return c
}

// runHub follows the prefix from rev on and publishes its changes; it
// also counts deletes (expiries) and keeps Revision current. When its
// watch breaks (compaction, a cancelled watch) it resets the ring at the
// current revision and starts again.
//
// created is closed once etcd has created the first watch: from then on
// it is synced unless it falls behind, and etcd answers progress requests
// only for synced watches.
func (s *Store) runHub(rev int64, created chan<- struct{}) {
	defer s.wg.Done()
	for s.ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(s.hubCtx)
		s.hubBreak.Store(&wcancel)
		wch := s.cli.Watch(wctx, s.root, clientv3.WithPrefix(), clientv3.WithRev(rev+1),
			clientv3.WithPrevKV(), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
		for resp := range wch {
			if resp.Created {
				if created != nil {
					close(created)
					created = nil
				}
				continue
			}
			if err := resp.Err(); err != nil || resp.CompactRevision != 0 {
				if s.ctx.Err() == nil {
					s.log.Warn("etcdstore: shared watch restarts", "err", err, "compactRevision", resp.CompactRevision)
				}
				break
			}
			if resp.IsProgressNotify() {
				if resp.Header.Revision > rev {
					rev = resp.Header.Revision
				}
				s.idx.Load().m.SetRevision(rev)
				s.hub.publish(nil, rev, true)
				continue
			}
			cs := make([]change, 0, len(resp.Events))
			for _, e := range resp.Events {
				if e.Type == clientv3.EventTypeDelete {
					s.deletesSeen.Add(1)
				}
				cs = append(cs, s.decodeChange(e))
				rev = e.Kv.ModRevision
			}
			s.observe(rev)
			if err := s.feedIndex(s.idx.Load(), resp.Events, cs, rev); err != nil {
				// The index did not take the batch: restart the watch,
				// which reconciles it, before anyone sees the batch.
				s.log.Error("etcdstore: the on-disk index failed to write a batch; reconciling it", "revision", rev, "err", err)
				break
			}
			s.hub.publish(cs, rev, false)
		}
		wcancel()
		if s.ctx.Err() != nil {
			return
		}
		// Rebuild (or, on disk, reconcile) the index at the current
		// revision and follow on from it.
		next, err := s.rebuildIndex()
		if err != nil {
			s.log.Warn("etcdstore: rebuilding the index after a break in the shared watch failed; trying again", "err", err)
			select {
			case <-s.ctx.Done():
			case <-s.opts.Clock.After(time.Second):
			}
			continue
		}
		rev = next
		s.observe(rev)
		s.indexBuilds.Add(1)
		s.hub.reset(rev)
	}
}

// rebuildIndex brings the index to etcd's current revision after a break
// in the shared watch and returns that revision: the in-memory index is
// built anew and swapped in; the on-disk one is reconciled in place.
func (s *Store) rebuildIndex() (int64, error) {
	if h := s.idx.Load(); h.disk != nil {
		return s.reconcile(s.ctx, h.disk, h.disk.Identity())
	}
	m, u, err := s.buildIndex(s.ctx, 0)
	if err != nil {
		return 0, err
	}
	s.swapIndex(newMemHolder(m, u))
	return m.Revision(), nil
}
