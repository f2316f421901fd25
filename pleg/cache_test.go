package pleg

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// base is the fake clocks' start: a realistic time, so that nanosecond
// stamps look like a real runtime's.
var base = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// rt returns the runtime time sec seconds after base.
func rt(sec float64) time.Time {
	return base.Add(time.Duration(math.Round(sec * float64(time.Second))))
}

func podStatus(uid types.UID, states map[string]runtimeapi.ContainerState) *PodStatus {
	st := &PodStatus{ID: uid, SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "s-" + string(uid)}}}
	for id, s := range states {
		st.ContainerStatuses = append(st.ContainerStatuses, &runtimeapi.ContainerStatus{Id: id, State: s})
	}
	sortContainers(st.ContainerStatuses)
	return st
}

func TestCacheNewerWins(t *testing.T) {
	c := NewCache()
	running := podStatus("p1", map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_RUNNING})
	exited := podStatus("p1", map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_EXITED})
	steps := []struct {
		name   string
		status *PodStatus
		ts     time.Time
		want   SetResult
	}{
		{"first", running, rt(10), Stored},
		{"identical at the same time", podStatus("p1", map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_RUNNING}), rt(10), Unchanged},
		{"newer", exited, rt(20), Stored},
		{"older", running, rt(15), Rejected},
		{"different at the same time overwrites", running, rt(20), Stored},
	}
	for _, s := range steps {
		if got := c.Set("p1", s.status, nil, s.ts, false); got != s.want {
			t.Fatalf("%s: Set = %v, want %v", s.name, got, s.want)
		}
	}
	if got, _ := c.Get("p1"); got != running {
		t.Fatalf("Get returned %v, want the last stored status", got)
	}
}

func TestCacheTombstoneRefusesLateEvents(t *testing.T) {
	c := NewCache()
	st := podStatus("p1", nil)
	c.Set("p1", st, nil, rt(10), false)
	if !c.Delete("p1", rt(20)) {
		t.Fatal("Delete refused")
	}
	if got := c.Set("p1", st, nil, rt(15), false); got != Rejected {
		t.Fatalf("a late event resurrected a deleted pod: %v", got)
	}
	if got, err := c.Get("p1"); err != nil || got.ID != "p1" || len(got.SandboxStatuses) != 0 {
		t.Fatalf("Get after delete = %+v, %v; want an empty status", got, err)
	}
	if c.Delete("p1", rt(5)) {
		t.Fatal("an older delete replaced a newer tombstone")
	}
	if got := c.Set("p1", st, nil, rt(25), false); got != Stored {
		t.Fatalf("a newer status after the tombstone: %v", got)
	}
	c.Delete("p2", rt(1))
	c.forgetTombstones(rt(2))
	if _, ok := c.pods["p2"]; ok {
		t.Fatal("old tombstone kept")
	}
	if _, ok := c.pods["p1"]; !ok {
		t.Fatal("live entry forgotten")
	}
}

func TestCacheErrorEntry(t *testing.T) {
	c := NewCache()
	boom := errors.New("boom")
	c.Set("p1", nil, boom, rt(1), false)
	if st, err := c.Get("p1"); st != nil || !errors.Is(err, boom) {
		t.Fatalf("Get = %v, %v", st, err)
	}
	if got := c.Set("p1", nil, errors.New("boom"), rt(1), false); got != Unchanged {
		t.Fatalf("same error again = %v", got)
	}
}

// getAsync runs GetNewerThan in the background.
func getAsync(c *Cache, id types.UID, min time.Time) (<-chan *PodStatus, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan *PodStatus, 1)
	go func() {
		st, _ := c.GetNewerThan(ctx, id, min)
		out <- st
	}()
	return out, cancel
}

func waitWaiting(t *testing.T, c *Cache, n int) {
	t.Helper()
	eventually(t, func() bool { return c.waiting() == n }, "%d waiters (have %d)", n, c.waiting())
}

func TestGetNewerThan(t *testing.T) {
	running := podStatus("p1", map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_RUNNING})
	created := podStatus("p1", map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_CREATED})

	t.Run("an older entry waits, a newer one releases", func(t *testing.T) {
		c := NewCache()
		out, cancel := getAsync(c, "p1", rt(10))
		defer cancel()
		waitWaiting(t, c, 1)
		c.Set("p1", created, nil, rt(5), false)
		waitWaiting(t, c, 1)
		c.Set("p1", running, nil, rt(11), false)
		if got := <-out; got != running {
			t.Fatalf("released with %v", got)
		}
	})
	t.Run("a transient snapshot is never handed out", func(t *testing.T) {
		c := NewCache()
		var asked []types.UID
		c.onTransient = func(id types.UID) { asked = append(asked, id) }
		c.Set("p1", created, nil, rt(11), true)
		out, cancel := getAsync(c, "p1", rt(10))
		defer cancel()
		waitWaiting(t, c, 1)
		c.UpdateTime(rt(12))
		c.UpdateStreamTime(rt(12))
		waitWaiting(t, c, 1)
		c.Set("p1", running, nil, rt(13), false)
		if got := <-out; got != running {
			t.Fatalf("released with %v", got)
		}
		if len(asked) != 1 {
			t.Fatalf("onTransient called %d times, want once", len(asked))
		}
	})
	t.Run("the relist watermark releases", func(t *testing.T) {
		c := NewCache()
		c.Set("p1", running, nil, rt(5), false)
		out, cancel := getAsync(c, "p1", rt(10))
		defer cancel()
		waitWaiting(t, c, 1)
		c.UpdateTime(rt(10)) // not after minTime
		waitWaiting(t, c, 1)
		c.UpdateTime(rt(10.5))
		if got := <-out; got != running {
			t.Fatalf("released with %v", got)
		}
	})
	t.Run("the stream watermark releases an unknown pod empty", func(t *testing.T) {
		c := NewCache()
		out, cancel := getAsync(c, "p9", rt(10))
		defer cancel()
		waitWaiting(t, c, 1)
		c.UpdateStreamTime(rt(11))
		if got := <-out; got == nil || got.ID != "p9" || len(got.SandboxStatuses) != 0 {
			t.Fatalf("released with %+v", got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		c := NewCache()
		out, cancel := getAsync(c, "p1", rt(10))
		waitWaiting(t, c, 1)
		cancel()
		if got := <-out; got != nil {
			t.Fatalf("canceled wait returned %v", got)
		}
		waitWaiting(t, c, 0)
	})
}

func TestRuntimeTime(t *testing.T) {
	now := rt(0)
	for _, tc := range []struct {
		name string
		v    int64
		want time.Time
	}{
		{"nanoseconds", rt(-1).UnixNano(), rt(-1)},
		{"seconds (old CRI-O)", rt(-3).Unix(), rt(-3)},
		{"a little ahead is kept", rt(5).UnixNano(), rt(5)},
		{"far future is clamped to now", rt(3600).UnixNano(), now},
	} {
		if got := runtimeTime(tc.v, now); !got.Equal(tc.want) {
			t.Errorf("%s: runtimeTime(%d) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}

func TestCacheSweep(t *testing.T) {
	c := NewCache()
	c.Set("listed", podStatus("listed", nil), nil, rt(1), false)
	c.Set("ghost", podStatus("ghost", nil), nil, rt(1), false)
	c.Set("young", podStatus("young", nil), nil, rt(3), false)
	gone := c.sweep(func(id types.UID) bool { return id == "listed" }, rt(2))
	if len(gone) != 1 || gone[0] != "ghost" {
		t.Fatalf("swept %v, want [ghost]", gone)
	}
	if c.has("ghost") || !c.has("listed") || !c.has("young") {
		t.Fatal("wrong entries left")
	}
}
