package record

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clientgorecord "k8s.io/client-go/tools/record"
)

// discardSink accepts every write and counts them; wait blocks until it
// has seen n.
type discardSink struct {
	n, target atomic.Int64
	reached   chan struct{}
}

func newDiscardSink() *discardSink { return &discardSink{reached: make(chan struct{}, 1)} }

func (s *discardSink) count() {
	if s.n.Add(1) == s.target.Load() {
		select {
		case s.reached <- struct{}{}:
		default:
		}
	}
}

func (s *discardSink) wait(n int64) {
	s.target.Store(n)
	for s.n.Load() < n {
		<-s.reached
	}
}

func (s *discardSink) Create(e *corev1.Event) (*corev1.Event, error) { s.count(); return e, nil }
func (s *discardSink) Update(e *corev1.Event) (*corev1.Event, error) { s.count(); return e, nil }
func (s *discardSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.count()
	return e, nil
}

// BenchmarkEventf measures one Eventf end to end (emission, correlation,
// the write to a sink that discards) for this package and for client-go's
// tools/record, on the same event stream:
//
//   - repeated: the same event about the same pod (a PATCH each time);
//   - unique: events about 8192 pods in turn, more than the 4096-entry
//     caches hold (a POST each time).
//
// The spam filter is opened wide for both (burst and QPS of 1e9), so that
// every event reaches the sink and the benchmark can wait for it; events
// are emitted in batches smaller than the queues so that neither drops.
// ns/op and allocs/op cover the whole pipeline, background goroutines
// included; emit-ns/op is the time spent in the Eventf call itself.
func BenchmarkEventf(b *testing.B) {
	opts := CorrelatorOptions{BurstSize: 1e9, QPS: 1e9}
	pods := make([]*corev1.Pod, 8192)
	for i := range pods {
		pods[i] = pod("bench", fmt.Sprintf("pod-%d", i), fmt.Sprintf("uid-%d", i))
	}
	type impl struct {
		name  string
		start func(sink EventSink) (EventRecorder, func())
	}
	impls := []impl{
		{"ours", func(sink EventSink) (EventRecorder, func()) {
			bc := NewBroadcaster(WithCorrelatorOptions(opts))
			bc.StartRecordingToSink(sink)
			return bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "bench", Host: "node1"}), bc.Shutdown
		}},
		{"clientgo", func(sink EventSink) (EventRecorder, func()) {
			bc := clientgorecord.NewBroadcaster(clientgorecord.WithCorrelatorOptions(opts))
			bc.StartRecordingToSink(sink)
			return bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "bench", Host: "node1"}), bc.Shutdown
		}},
	}
	modes := []struct {
		name string
		obj  func(i int) *corev1.Pod
	}{
		{"repeated", func(int) *corev1.Pod { return pods[0] }},
		{"unique", func(i int) *corev1.Pod { return pods[i%len(pods)] }},
	}
	const batch = 256
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			for _, m := range modes {
				b.Run("event="+m.name, func(b *testing.B) {
					sink := newDiscardSink()
					rec, stop := im.start(sink)
					defer stop()
					b.ReportAllocs()
					b.ResetTimer()
					var emit time.Duration
					for i := 0; i < b.N; {
						n := min(batch, b.N-i)
						start := time.Now()
						for j := 0; j < n; j++ {
							rec.Eventf(m.obj(i+j), corev1.EventTypeNormal, "Started", "Started container %s", "web")
						}
						emit += time.Since(start)
						i += n
						sink.wait(int64(i))
					}
					b.StopTimer()
					b.ReportMetric(float64(emit.Nanoseconds())/float64(b.N), "emit-ns/op")
				})
			}
		})
	}
}
