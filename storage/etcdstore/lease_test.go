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
	_, grants, lease := newTestLeases(t, clk, 3)
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
	before := len(*grants)
	lease(time.Hour)
	if len(*grants) != before+1 {
		t.Fatal("the lease was reused past its window")
	}
	if (*grants)[0] != 3660 {
		t.Fatalf("granted %ds for a 1h TTL, want 3660", (*grants)[0])
	}
	// 100s TTL: window 5% = 5s, granted 105s.
	short := lease(100 * time.Second)
	if (*grants)[len(*grants)-1] != 105 {
		t.Fatalf("granted %ds for a 100s TTL, want 105", (*grants)[len(*grants)-1])
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
	m, grants, lease := newTestLeases(t, clk, 1000)
	hour, week := lease(time.Hour), lease(7*24*time.Hour)
	for range 10 {
		clk.Step(time.Second)
		if h, w := lease(time.Hour), lease(7*24*time.Hour); h != hour || w != week {
			t.Fatalf("interleaved writes got leases %d, %d, want %d, %d reused", h, w, hour, week)
		}
	}
	if len(*grants) != 2 || (*grants)[0] != 3660 || (*grants)[1] != 7*24*3600+60 {
		t.Fatalf("granted %v, want [3660 604860]", (*grants))
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

// newTestLeases is a lease manager on clk whose grants are recorded (the
// TTLs granted, in order) and a function taking a lease from it.
func newTestLeases(t *testing.T, clk *clocktesting.FakeClock, maxObjects int) (*leaseManager, *[]int64, func(time.Duration) clientv3.LeaseID) {
	granted := new([]int64)
	m := &leaseManager{
		clock: clk, reuse: DefaultLeaseReuseDuration, maxObjects: maxObjects,
		grant: func(_ context.Context, secs int64) (clientv3.LeaseID, error) {
			*granted = append(*granted, secs)
			return clientv3.LeaseID(len(*granted)), nil
		},
	}
	lease := func(ttl time.Duration) clientv3.LeaseID {
		t.Helper()
		id, err := m.lease(context.Background(), ttl)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	return m, granted, lease
}
