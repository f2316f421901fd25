package events

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kubevents/kubevents/internal/recordermetrics"
)

// droppedTotal sums the broadcaster's drops over every cause.
func droppedTotal(b *Broadcaster) int {
	var n float64
	for _, cause := range recordermetrics.Causes {
		n += testutil.ToFloat64(b.Metrics().Dropped.WithLabelValues(cause))
	}
	return int(n)
}

// storedTotal sums the occurrences the sink stores.
func storedTotal(sink *FakeSink) int {
	n := 0
	for _, ev := range sink.Events() {
		if ev.Series != nil {
			n += int(ev.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// Issue 10.7: across a long outage (every write fails until the retries
// are exhausted, then the server is back), every emitted occurrence is
// either in the stored count or counted as dropped, never both: an
// occurrence dropped with a failed write is not carried by the series'
// later patches. The outage starts before the event's create, or after
// it; Shutdown comes after the outage, or during it (its timeout runs out).
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
			e := newEnv(t, WithRetryPolicy(RetryPolicy{MaxAttempts: 4, Initial: time.Second, Max: 4 * time.Second, Jitter: -1}),
				WithShutdownTimeout(10*time.Second))
			e.sink.SetFail(func(c SinkCall) error {
				if c.Verb != "list" && down.Load() {
					return errors.New("connection refused")
				}
				return nil
			})
			emitted := 0
			emit := func() {
				e.r.Eventf(pod("ns", "crash"), nil, "Warning", "BackOff", "Restart", "back-off")
				emitted++
			}
			if !c.outageBeforeCreate {
				emit()
				e.waitCalls(1, 0)
				e.settle()
			}
			down.Store(true)
			exhausted := func() float64 {
				return testutil.ToFloat64(e.b.Metrics().Dropped.WithLabelValues(recordermetrics.DropRetriesExhausted))
			}
			// Occurrences keep coming during the outage, while a write
			// is retried, until its retries are exhausted.
			for i := 0; exhausted() == 0; i++ {
				if i > 2000 {
					t.Fatal("the retries were never exhausted")
				}
				emit()
				e.clock.Step(500 * time.Millisecond)
				time.Sleep(time.Millisecond)
			}
			emit()
			if c.stopMid {
				done := make(chan struct{})
				go func() { e.b.Shutdown(); close(done) }()
				for stopped := false; !stopped; {
					select {
					case <-done:
						stopped = true
					case <-time.After(time.Millisecond):
						e.clock.Step(time.Second)
					}
				}
			} else {
				down.Store(false)
				for i := 0; i < 100; i++ {
					emit()
					e.clock.Step(500 * time.Millisecond)
					time.Sleep(time.Millisecond)
				}
				e.b.Shutdown()
			}
			emitted++ // after Shutdown: dropped
			e.r.Eventf(pod("ns", "crash"), nil, "Warning", "BackOff", "Restart", "back-off")
			stored, dropped := storedTotal(e.sink), droppedTotal(e.b)
			if got := int(testutil.ToFloat64(e.b.Metrics().Emitted)); got != emitted {
				t.Fatalf("emitted metric %d, want %d", got, emitted)
			}
			t.Logf("emitted %d = stored %d + dropped %d (retries exhausted %v)", emitted, stored, dropped, exhausted())
			if stored+dropped != emitted {
				t.Fatalf("emitted %d, stored %d + dropped %d = %d", emitted, stored, dropped, stored+dropped)
			}
		})
	}
}
