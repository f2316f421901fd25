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

// leaseManager hands out leases as kube-apiserver's does: a lease granted
// for TTL + reuse window serves every write with that TTL during the
// window, up to maxObjects writes. Every create and update attaches the
// current lease, so every write restarts the TTL.
type leaseManager struct {
	grant      func(ctx context.Context, seconds int64) (clientv3.LeaseID, error)
	clock      clock.PassiveClock
	reuse      time.Duration
	maxObjects int

	mu       sync.Mutex
	id       clientv3.LeaseID
	expires  time.Time
	attached int
	grants   int64
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
	longEnough := now.Add(time.Duration(secs) * time.Second).Before(m.expires)
	// At most the reuse window longer than needed (a write at the very
	// instant of the grant reuses it too).
	shortEnough := !now.Add(time.Duration(secs+reuse) * time.Second).Before(m.expires)
	m.attached++
	if m.id != clientv3.NoLease && longEnough && shortEnough && m.attached <= m.maxObjects {
		return m.id, nil
	}
	id, err := m.grant(ctx, secs+reuse)
	if err != nil {
		return clientv3.NoLease, fmt.Errorf("etcdstore: grant a lease of %ds: %w", secs+reuse, err)
	}
	m.id, m.expires, m.attached = id, now.Add(time.Duration(secs+reuse)*time.Second), 1
	m.grants++
	return id, nil
}
