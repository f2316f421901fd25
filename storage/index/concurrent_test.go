package index

import (
	"slices"
	"sync"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMemoryConcurrent has one writer and several readers (run it with
// -race): readers see sorted, distinct keys and a revision that never goes
// back, and the writer's final state is what it wrote.
func TestMemoryConcurrent(t *testing.T) {
	const writes = 10_000
	m := NewMemory(All())
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := range writes {
			key, ev := realisticEvent(i % 4000)
			if i%5 == 4 {
				deleteKey(m, key, int64(i+1))
			} else {
				m.Put(ev, int64(i+1))
			}
		}
	})
	sels := []storage.Selector{
		{},
		{Namespace: "team-07"},
		{Fields: eventapi.FieldSelector{{Field: eventapi.FieldType, Value: "Warning"}}},
		{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvesName, Value: "checkout-0000000000-00000"}}},
		{Namespace: "team-01", Fields: eventapi.FieldSelector{{Field: eventapi.FieldReportingInstance, Value: "ip-10-0-0-1.ec2.internal"}}},
	}
	for r := range 4 {
		wg.Go(func() {
			var last int64
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				keys, rev, err := m.Keys(m.Set().Plan(sels[(r+i)%len(sels)]), 0, "", 100)
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
					t.Errorf("keys not sorted and distinct: %q", keys)
					return
				}
				if rev < last {
					t.Errorf("revision went back from %d to %d", last, rev)
					return
				}
				last = rev
			}
		})
	}
	wg.Wait()
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	if r := m.Revision(); r != writes {
		t.Errorf("revision %d, want %d", r, writes)
	}
}
