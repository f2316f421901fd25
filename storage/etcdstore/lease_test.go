package etcdstore

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestLeaseReuse: a lease is reused for min(5% of the TTL, the reuse
// duration) and for at most maxObjects writes, and is granted for TTL +
// that window, as kube-apiserver's lease manager does.
func TestLeaseReuse(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var granted []int64
	m := &leaseManager{
		clock: clk, reuse: DefaultLeaseReuseDuration, maxObjects: 3,
		grant: func(_ context.Context, secs int64) (clientv3.LeaseID, error) {
			granted = append(granted, secs)
			return clientv3.LeaseID(len(granted)), nil
		},
	}
	ctx := context.Background()
	lease := func(ttl time.Duration) clientv3.LeaseID {
		t.Helper()
		id, err := m.lease(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// 1h TTL: window min(180s, 60s) = 60s.
	first := lease(time.Hour)
	if id := lease(time.Hour); id != first {
		t.Fatalf("at the instant of the grant: lease %d, want %d reused", id, first)
	}
	clk.Step(30 * time.Second)
	if id := lease(time.Hour); id != first {
		t.Fatalf("within the window: lease %d, want %d reused", id, first)
	}
	if id := lease(time.Hour); id == first {
		t.Fatal("a fourth object went to a lease capped at three")
	}
	clk.Step(61 * time.Second)
	before := len(granted)
	lease(time.Hour)
	if len(granted) != before+1 {
		t.Fatal("the lease was reused past its window")
	}
	if granted[0] != 3660 {
		t.Fatalf("granted %ds for a 1h TTL, want 3660", granted[0])
	}
	// 100s TTL: window 5% = 5s, granted 105s.
	short := lease(100 * time.Second)
	if granted[len(granted)-1] != 105 {
		t.Fatalf("granted %ds for a 100s TTL, want 105", granted[len(granted)-1])
	}
	clk.Step(4 * time.Second)
	if id := lease(100 * time.Second); id != short {
		t.Fatal("not reused within the 5s window")
	}
	clk.Step(2 * time.Second)
	if id := lease(100 * time.Second); id == short {
		t.Fatal("reused past the 5s window: the object would outlive its TTL by more than 5%")
	}
	// A TTL shorter than the current lease's gets its own lease.
	if id := lease(10 * time.Minute); id == short {
		t.Fatal("a 10m TTL reused a lease of 105s")
	}
}

// TestLeasePerTTL: writes with different TTLs (retention rules), interleaved,
// each reuse the current lease of their own TTL instead of granting one per
// switch; past maxCurrentLeases TTLs, leases no write can reuse are
// forgotten.
func TestLeasePerTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var granted []int64
	m := &leaseManager{
		clock: clk, reuse: DefaultLeaseReuseDuration, maxObjects: 1000,
		grant: func(_ context.Context, secs int64) (clientv3.LeaseID, error) {
			granted = append(granted, secs)
			return clientv3.LeaseID(len(granted)), nil
		},
	}
	ctx := context.Background()
	lease := func(ttl time.Duration) clientv3.LeaseID {
		t.Helper()
		id, err := m.lease(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	hour, week := lease(time.Hour), lease(7*24*time.Hour)
	for range 10 {
		clk.Step(time.Second)
		if h, w := lease(time.Hour), lease(7*24*time.Hour); h != hour || w != week {
			t.Fatalf("interleaved writes got leases %d, %d, want %d, %d reused", h, w, hour, week)
		}
	}
	if len(granted) != 2 || granted[0] != 3660 || granted[1] != 7*24*3600+60 {
		t.Fatalf("granted %v, want [3660 604860]", granted)
	}
	// Many TTLs: the map stays bounded.
	for i := range 3 * maxCurrentLeases {
		lease(time.Duration(100+i) * time.Minute)
		if len(m.byTTL) > maxCurrentLeases {
			t.Fatalf("%d current leases, want at most %d", len(m.byTTL), maxCurrentLeases)
		}
	}
	// At the bound, a new TTL drops the leases whose windows have passed
	// and keeps those still reusable.
	clear(m.byTTL)
	for i := range maxCurrentLeases - 1 {
		lease(time.Duration(100+i) * time.Minute)
	}
	clk.Step(2 * time.Minute) // past those windows (60s)
	fresh := lease(time.Hour)
	lease(time.Minute)
	if len(m.byTTL) != 2 || lease(time.Hour) != fresh {
		t.Fatalf("%d current leases after the windows passed, want the 1h and 1m ones", len(m.byTTL))
	}
}
