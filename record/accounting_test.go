package record

import (
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubevents/kubevents/internal/recordermetrics"
)

// storedTotal sums the occurrences the sink stores (count, 1 when unset).
func (s *fakeSink) storedTotal() int {
	n := 0
	for _, ev := range s.stored() {
		n += max(int(ev.Count), 1)
	}
	return n
}

// Issue 10.7: across a long outage (every write fails until the retries
// are exhausted, then the server is back), every emitted occurrence is
// either in the stored count or counted as dropped, never both: the
// occurrences a failed write carried are not carried by the event's later
// patches. The outage starts before the event's create or after it;
// Shutdown comes after the outage, or during it.
func TestAccountingAcrossOutage(t *testing.T) {
	for _, c := range []struct {
		name                        string
		outageBeforeCreate, stopMid bool
	}{
		{"outage after the create", false, false},
		{"outage from the create", true, false},
		{"shutdown during the outage", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var down atomic.Bool
			e := newEnv(t, WithRetryPolicy(RetryPolicy{MaxAttempts: 4, Initial: time.Second, Max: 4 * time.Second, Jitter: -1}))
			e.sink.setFail(func(string, *corev1.Event) error {
				if down.Load() {
					return errTransport()
				}
				return nil
			})
			emitted := 0
			emit := func() {
				e.rec.Event(pod("ns", "crash", "u"), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
				emitted++
			}
			if !c.outageBeforeCreate {
				emit()
				e.waitCalls(1)
				e.sync()
			}
			down.Store(true)
			exhausted := func() float64 { return e.dropped(recordermetrics.DropRetriesExhausted) }
			// Occurrences keep coming during the outage, while a write
			// is retried, until its retries are exhausted.
			for i := 0; exhausted() == 0; i++ {
				if i > 2000 {
					t.Fatal("the retries were never exhausted")
				}
				emit()
				e.clk.Step(500 * time.Millisecond)
				time.Sleep(time.Millisecond)
			}
			emit()
			if !c.stopMid {
				down.Store(false)
				for i := 0; i < 100; i++ {
					emit()
					e.clk.Step(500 * time.Millisecond)
					time.Sleep(time.Millisecond)
				}
			}
			e.b.Shutdown()
			emit() // after Shutdown: dropped
			var dropped float64
			for _, cause := range recordermetrics.Causes {
				dropped += e.dropped(cause)
			}
			stored := e.sink.storedTotal()
			if got := int(counterValue(t, e.b.metrics.Emitted)); got != emitted {
				t.Fatalf("emitted metric %d, want %d", got, emitted)
			}
			t.Logf("emitted %d = stored %d + dropped %v (retries exhausted %v)", emitted, stored, dropped, exhausted())
			if stored+int(dropped) != emitted {
				t.Fatalf("emitted %d, stored %d + dropped %v = %v", emitted, stored, dropped, stored+int(dropped))
			}
		})
	}
}
