package events

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
)

// discardSink accepts every write at once.
type discardSink struct{}

func (discardSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}
func (discardSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}
func (discardSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return e, nil
}

// BenchmarkEventf compares the cost of one Eventf call with client-go's
// events recorder: for a repeated event (a crashloop) and for distinct
// events.
func BenchmarkEventf(b *testing.B) {
	p := pod("ns", "p1")
	for _, impl := range []string{"ours", "clientgo"} {
		setup := func(b *testing.B) (EventRecorder, func()) {
			switch impl {
			case "ours":
				br := NewBroadcaster(discardSink{}, WithResume(false), WithMaxSeries(1<<30), WithQueueSize(1<<30))
				if err := br.StartRecordingToSinkWithContext(context.Background()); err != nil {
					b.Fatal(err)
				}
				return br.NewRecorder(scheme.Scheme, "bench"), br.Shutdown
			default:
				br := clientevents.NewBroadcaster(discardSink{})
				ctx, cancel := context.WithCancel(context.Background())
				if err := br.StartRecordingToSinkWithContext(ctx); err != nil {
					b.Fatal(err)
				}
				return br.NewRecorder(scheme.Scheme, "bench"), func() { br.Shutdown(); cancel() }
			}
		}
		b.Run("impl="+impl+"/event=repeated", func(b *testing.B) {
			r, stop := setup(b)
			defer stop()
			r.Eventf(p, nil, "Warning", "BackOff", "Restart", "Back-off restarting failed container %s", "app")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Eventf(p, nil, "Warning", "BackOff", "Restart", "Back-off restarting failed container %s", "app")
			}
		})
		b.Run("impl="+impl+"/event=unique", func(b *testing.B) {
			r, stop := setup(b)
			defer stop()
			pods := make([]*corev1.Pod, 4096)
			for i := range pods {
				pods[i] = pod("ns", fmt.Sprintf("p%d", i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Eventf(pods[i%len(pods)], nil, "Normal", fmt.Sprintf("R%d", i/len(pods)), "Act", "event %d", i)
			}
		})
	}
}
