package record

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// Against client-go's fake clientset through client-go's own
// typedcorev1.EventSinkImpl: repeats are one object with the right count,
// patches are strategic-merge patches, an expired event is re-created, and
// a restarted broadcaster with WithResume keeps counting.
func TestFakeClientset(t *testing.T) {
	cs := fake.NewClientset()
	sink := &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}
	clk := &timerClock{FakeClock: clocktesting.NewFakeClock(t0)}
	newBroadcaster := func(opts ...Option) (*Broadcaster, EventRecorderLogger) {
		b := NewBroadcaster(append([]Option{WithClock(clk)}, opts...)...)
		t.Cleanup(b.Shutdown)
		b.StartRecordingToSink(sink)
		return b, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node1"})
	}
	b, rec := newBroadcaster()
	p := pod("ns", "web-1", "u")
	list := func() map[string]corev1.Event {
		l, err := cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.Event{}
		for _, ev := range l.Items {
			out[ev.Reason] = ev
		}
		return out
	}
	for i := 0; i < 3; i++ {
		rec.Event(p, corev1.EventTypeNormal, "Pulled", "pulled image nginx")
		clk.Step(time.Second)
	}
	rec.Event(p, corev1.EventTypeWarning, "BackOff", "back-off")
	syncBroadcaster(t, b)
	got := list()
	if len(got) != 2 || got["Pulled"].Count != 3 || got["BackOff"].Count != 1 {
		t.Fatalf("stored %+v", got)
	}
	pulled := got["Pulled"]
	if !pulled.FirstTimestamp.Time.Equal(t0) || !pulled.LastTimestamp.Time.Equal(t0.Add(2*time.Second)) ||
		pulled.Source.Component != "kubelet" || pulled.InvolvedObject.UID != types.UID("u") {
		t.Errorf("Pulled %+v", pulled)
	}
	var kinds []string
	for _, a := range cs.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			kinds = append(kinds, "create")
		case clienttesting.PatchAction:
			if a.GetPatchType() != types.StrategicMergePatchType {
				t.Errorf("patch type %s", a.GetPatchType())
			}
			kinds = append(kinds, "patch")
		}
	}
	if !slices.Equal(kinds, []string{"create", "patch", "patch", "create"}) {
		t.Errorf("actions %v", kinds)
	}

	// The server expires the event: PATCH 404, then a create with count 4.
	if err := cs.CoreV1().Events("ns").Delete(context.Background(), pulled.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.Event(p, corev1.EventTypeNormal, "Pulled", "pulled image nginx")
	syncBroadcaster(t, b)
	if ev := list()["Pulled"]; ev.Name != pulled.Name || ev.Count != 4 || !ev.FirstTimestamp.Time.Equal(t0) {
		t.Errorf("re-created %s count %d first %v", ev.Name, ev.Count, ev.FirstTimestamp)
	}

	// A restart with WithResume continues on the stored objects.
	b.Shutdown()
	b2, rec2 := newBroadcaster(WithResume(true))
	rec2.Event(p, corev1.EventTypeNormal, "Pulled", "pulled image nginx")
	rec2.Event(p, corev1.EventTypeWarning, "BackOff", "back-off")
	syncBroadcaster(t, b2)
	got = list()
	if len(got) != 2 || got["Pulled"].Count != 5 || got["BackOff"].Count != 2 || got["Pulled"].Name != pulled.Name {
		t.Errorf("after restart: %d events, Pulled %d, BackOff %d", len(got), got["Pulled"].Count, got["BackOff"].Count)
	}
}
