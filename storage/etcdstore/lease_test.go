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
