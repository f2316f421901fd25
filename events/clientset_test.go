package events

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestClientGoSink: client-go's own sink over its fake clientset works
// unchanged: one object per series, with the full count after Shutdown.
func TestClientGoSink(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	b := NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, WithClock(clk), WithHostname("vm"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(scheme.Scheme, "my-ctrl")
	for i := 0; i < 25; i++ {
		r.Eventf(pod("ns", "p1"), nil, "Warning", "BackOff", "Restart", "back-off")
		clk.Step(time.Second)
	}
	r.Eventf(pod("ns", "p2"), nil, "Normal", "Started", "Start", "started")
	b.Shutdown()
	l, err := cs.EventsV1().Events("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int32{}
	for _, ev := range l.Items {
		n := int32(1)
		if ev.Series != nil {
			n = ev.Series.Count
		}
		counts[ev.Regarding.Name] = n
	}
	if len(l.Items) != 2 || counts["p1"] != 25 || counts["p2"] != 1 {
		t.Fatalf("stored %v (%d objects)", counts, len(l.Items))
	}
}
