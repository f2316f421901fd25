package pleg

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
)

// SetResult says what Cache.Set did.
type SetResult int

const (
	// Rejected: the cache holds something newer; nothing changed.
	Rejected SetResult = iota
	// Unchanged: the cache already held this status at this time.
	Unchanged
	// Stored: the status replaced the cached one.
	Stored
)

// entry is what the cache knows of one pod.
type entry struct {
	status   *PodStatus // nil when the last inspection failed
	err      error
	modified time.Time
	// deleted marks a tombstone: the pod is gone as of modified, and
	// anything older about it is refused.
	deleted bool
	// transient marks a snapshot taken at a container's CREATED event: the
	// container is about to start, so the snapshot is not handed to a
	// waiter as fresh.
	transient bool
}

// waiter is a GetNewerThan call blocked on a pod.
type waiter struct {
	ch chan struct{}
}

// Cache is the pod status cache shared by the generic and evented PLEGs.
//
// Every entry carries the runtime time its status was observed at; a Set
// older than the cached entry is refused, so a late event cannot undo a
// newer one, and Delete leaves a timestamped tombstone, so a late event
// cannot resurrect a removed pod. Freshness for GetNewerThan comes from the
// entry itself or from one of two watermarks: the start of the last
// complete relist, and the time up to which a live event stream is known
// to have delivered everything.
type Cache struct {
	mu       sync.Mutex
	pods     map[types.UID]*entry
	relistWM time.Time
	streamWM time.Time
	waiters  map[types.UID][]*waiter
	// onTransient is called when a waiter would be released but for a
	// transient entry: the evented PLEG relists, so that a container stuck
	// in CREATED (its STARTED event lost, or StartContainer failed) does
	// not keep the waiter until the next periodic relist.
	onTransient func(types.UID)
}

// NewCache returns an empty cache. Its times are the runtime's, given with
// each Set, Delete and watermark update.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]*entry{}, waiters: map[types.UID][]*waiter{}}
}

// Get returns the cached status of a pod, or an empty status with its ID
// when the cache knows nothing of it or it was deleted.
func (c *Cache) Get(id types.UID) (*PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pods[id]
	if e == nil || e.deleted {
		return &PodStatus{ID: id}, nil
	}
	return e.status, e.err
}

// peek returns the live entry of a pod (nil when none or deleted).
func (c *Cache) peek(id types.UID) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pods[id]
	if e == nil || e.deleted {
		return nil
	}
	cp := *e
	return &cp
}

// Set stores a pod's status (or the error of inspecting it) observed at ts,
// unless the cache holds something newer. Equal timestamps overwrite, as
// upstream, except that an identical status is a no-op (Unchanged), so a
// duplicated event does not count as news. transient marks a snapshot
// taken at a CREATED event.
func (c *Cache) Set(id types.UID, status *PodStatus, err error, ts time.Time, transient bool) SetResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.pods[id]; e != nil {
		if e.modified.After(ts) {
			return Rejected
		}
		if e.modified.Equal(ts) && !e.deleted && e.transient == transient && sameStatus(e.status, status) && sameErr(e.err, err) {
			return Unchanged
		}
	}
	c.pods[id] = &entry{status: status, err: err, modified: ts, transient: transient}
	c.notifyLocked(id)
	return Stored
}

// Delete records that a pod was gone at ts, unless the cache holds
// something newer. It reports whether the tombstone was stored.
func (c *Cache) Delete(id types.UID, ts time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.pods[id]; e != nil && e.modified.After(ts) {
		return false
	}
	c.pods[id] = &entry{modified: ts, deleted: true}
	c.notifyLocked(id)
	return true
}

// UpdateTime advances the relist watermark: a relist that started at ts
// has completed, so every pod's entry is at least as fresh as ts.
func (c *Cache) UpdateTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.After(c.relistWM) {
		c.relistWM = ts
		c.notifyAllLocked()
	}
}

// UpdateStreamTime advances the stream watermark: a live event stream has
// delivered, and the PLEG has applied, every event stamped up to ts.
func (c *Cache) UpdateStreamTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.After(c.streamWM) {
		c.streamWM = ts
		c.notifyAllLocked()
	}
}

// Watermarks returns the relist and stream watermarks.
func (c *Cache) Watermarks() (relist, stream time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relistWM, c.streamWM
}

// GetNewerThan blocks until the cache can vouch that what it holds for the
// pod reflects the runtime after minTime, then returns it. An entry is
// fresh when it was observed after minTime, or when a watermark is after
// minTime; a transient (CREATED) snapshot is never fresh, whatever the
// watermarks say: it waits for the next event or relist. It returns
// ctx.Err() if ctx ends first.
func (c *Cache) GetNewerThan(ctx context.Context, id types.UID, minTime time.Time) (*PodStatus, error) {
	asked := false
	for {
		c.mu.Lock()
		st, err, fresh, transient := c.freshLocked(id, minTime)
		if fresh {
			c.mu.Unlock()
			return st, err
		}
		w := &waiter{ch: make(chan struct{})}
		c.waiters[id] = append(c.waiters[id], w)
		hook := c.onTransient
		c.mu.Unlock()
		if transient && !asked && hook != nil {
			asked = true
			hook(id)
		}
		select {
		case <-w.ch:
		case <-ctx.Done():
			c.removeWaiter(id, w)
			return nil, ctx.Err()
		}
	}
}

// freshLocked applies GetNewerThan's rule; held reports an entry that
// would be fresh but is transient.
func (c *Cache) freshLocked(id types.UID, minTime time.Time) (st *PodStatus, err error, fresh, held bool) {
	e := c.pods[id]
	if !c.relistWM.After(minTime) && !c.streamWM.After(minTime) && (e == nil || !e.modified.After(minTime)) {
		return nil, nil, false, false
	}
	switch {
	case e == nil || e.deleted:
		return &PodStatus{ID: id}, nil, true, false
	case e.transient:
		return nil, nil, false, true
	}
	return e.status, e.err, true, false
}

func (c *Cache) notifyLocked(id types.UID) {
	ws := c.waiters[id]
	if len(ws) == 0 {
		return
	}
	delete(c.waiters, id)
	for _, w := range ws {
		close(w.ch) // the waiter re-checks freshness itself
	}
}

func (c *Cache) notifyAllLocked() {
	for id := range c.waiters {
		c.notifyLocked(id)
	}
}

func (c *Cache) removeWaiter(id types.UID, w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.waiters[id]
	for i, x := range ws {
		if x == w {
			c.waiters[id] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(c.waiters[id]) == 0 {
		delete(c.waiters, id)
	}
}

// waiting returns the number of blocked GetNewerThan calls (for tests).
func (c *Cache) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ws := range c.waiters {
		n += len(ws)
	}
	return n
}

// forgetTombstones drops tombstones older than before, bounding memory:
// by then any event about the pod is too old to matter.
func (c *Cache) forgetTombstones(before time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.pods {
		if e.deleted && e.modified.Before(before) {
			delete(c.pods, id)
		}
	}
}

// sweep tombstones, at ts, every live entry observed before ts of a pod
// that is not in listed: a relist that started at ts found no such pod (a
// stale event replayed after a reconnect can describe a pod that is long
// gone). It returns the pods it tombstoned.
func (c *Cache) sweep(listed func(types.UID) bool, ts time.Time) []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []types.UID
	for id, e := range c.pods {
		if e.deleted || !e.modified.Before(ts) || listed(id) {
			continue
		}
		c.pods[id] = &entry{modified: ts, deleted: true}
		c.notifyLocked(id)
		gone = append(gone, id)
	}
	return gone
}

// transient reports whether a pod's entry is a transient snapshot.
func (c *Cache) transient(id types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pods[id]
	return e != nil && e.transient
}

// has reports whether the cache holds a live entry for a pod.
func (c *Cache) has(id types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.pods[id]
	return e != nil && !e.deleted
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// sameStatus compares two statuses by content.
func sameStatus(a, b *PodStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.ID != b.ID || a.Name != b.Name || a.Namespace != b.Namespace || !a.TimeStamp.Equal(b.TimeStamp) ||
		len(a.IPs) != len(b.IPs) || len(a.SandboxStatuses) != len(b.SandboxStatuses) ||
		len(a.ContainerStatuses) != len(b.ContainerStatuses) {
		return false
	}
	for i := range a.IPs {
		if a.IPs[i] != b.IPs[i] {
			return false
		}
	}
	for i := range a.SandboxStatuses {
		if !proto.Equal(a.SandboxStatuses[i], b.SandboxStatuses[i]) {
			return false
		}
	}
	for i := range a.ContainerStatuses {
		if !proto.Equal(a.ContainerStatuses[i], b.ContainerStatuses[i]) {
			return false
		}
	}
	return true
}
