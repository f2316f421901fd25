package etcdstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// leaseReusePercent caps a lease's reuse window at this share of the TTL,
// as kube-apiserver's lease manager does, so that an object never outlives
// its TTL by more than 5%.
const leaseReusePercent = 0.05

// maxCurrentLeases bounds how many TTLs keep a current lease at once:
// eventsd's retention rules give a handful of distinct TTLs; beyond this,
// leases no write can reuse any more are forgotten.
const maxCurrentLeases = 16

// leaseManager hands out leases as kube-apiserver's does: a lease granted
// for TTL + reuse window serves every write with that TTL during the
// window, up to maxObjects writes. Every create and update attaches the
// current lease, so every write restarts the TTL. Unlike kube-apiserver's,
// which has one TTL, it keeps a current lease per TTL, so that writes
// whose retention rules give different TTLs, interleaved, do not each
// grant a lease.
type leaseManager struct {
	grant      func(ctx context.Context, seconds int64) (clientv3.LeaseID, error)
	clock      clock.PassiveClock
	reuse      time.Duration
	maxObjects int

	mu     sync.Mutex
	byTTL  map[int64]*currentLease // by TTL in seconds
	grants int64
}

// currentLease is the lease writes with one TTL attach to.
type currentLease struct {
	id       clientv3.LeaseID
	expires  time.Time
	attached int
}

// ttlSeconds rounds ttl up to etcd's whole seconds, at least one.
func ttlSeconds(ttl time.Duration) int64 {
	s := int64((ttl + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// reuseSeconds is the reuse window of a lease for ttl seconds.
func (m *leaseManager) reuseSeconds(ttl int64) int64 {
	r := int64(leaseReusePercent * float64(ttl))
	if max := int64(m.reuse / time.Second); r > max {
		r = max
	}
	return r
}

// lease returns a lease that keeps an object written now alive for at
// least ttl and at most ttl plus the reuse window.
func (m *leaseManager) lease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	secs := ttlSeconds(ttl)
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	reuse := m.reuseSeconds(secs)
	cur := m.byTTL[secs]
	if cur != nil {
		longEnough := now.Add(time.Duration(secs) * time.Second).Before(cur.expires)
		// At most the reuse window longer than needed (a write at the very
		// instant of the grant reuses it too).
		shortEnough := !now.Add(time.Duration(secs+reuse) * time.Second).Before(cur.expires)
		cur.attached++
		if longEnough && shortEnough && cur.attached <= m.maxObjects {
			return cur.id, nil
		}
	}
	id, err := m.grant(ctx, secs+reuse)
	if err != nil {
		return clientv3.NoLease, fmt.Errorf("etcdstore: grant a lease of %ds: %w", secs+reuse, err)
	}
	if m.byTTL == nil {
		m.byTTL = map[int64]*currentLease{}
	}
	if _, ok := m.byTTL[secs]; !ok && len(m.byTTL) >= maxCurrentLeases {
		m.forgetUnusable(now)
	}
	m.byTTL[secs] = &currentLease{id: id, expires: now.Add(time.Duration(secs+reuse) * time.Second), attached: 1}
	m.grants++
	return id, nil
}

// forgetUnusable drops the current leases no write can reuse any more (a
// write now would outlive them), or all of them if every one still can.
func (m *leaseManager) forgetUnusable(now time.Time) {
	for secs, l := range m.byTTL {
		if !now.Add(time.Duration(secs) * time.Second).Before(l.expires) {
			delete(m.byTTL, secs)
		}
	}
	if len(m.byTTL) >= maxCurrentLeases {
		clear(m.byTTL)
	}
}
