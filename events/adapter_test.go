package events

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// Scenario 30: the adapter records through events.k8s.io/v1 when
// discovery offers it, and through core/v1 (source component = name,
// without action and related) when it does not.
func TestAdapter(t *testing.T) {
	for _, served := range []bool{true, false} {
		cs := fake.NewClientset()
		if served {
			cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "events.k8s.io/v1"}}
		}
		stop := make(chan struct{})
		a := NewEventBroadcasterAdapter(cs, WithHostname("vm"))
		a.StartRecordingToSink(stop)
		r := a.NewRecorder("my-ctrl")
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		r.Eventf(pod("ns", "p1"), node, corev1.EventTypeNormal, "Started", "Start", "started %s", "c1")
		deadline := time.Now().Add(10 * time.Second)
		for {
			v1, _ := cs.EventsV1().Events("ns").List(t.Context(), metav1.ListOptions{})
			core, _ := cs.CoreV1().Events("ns").List(t.Context(), metav1.ListOptions{})
			if served && len(v1.Items) == 1 {
				ev := v1.Items[0]
				if ev.ReportingController != "my-ctrl" || ev.Action != "Start" || ev.Related == nil || ev.Note != "started c1" {
					t.Fatalf("events.k8s.io/v1 event %+v", ev)
				}
				break
			}
			if !served && len(core.Items) == 1 {
				ev := core.Items[0]
				if ev.Source.Component != "my-ctrl" || ev.Action != "" || ev.Related != nil || ev.Message != "started c1" {
					t.Fatalf("core/v1 event %+v", ev)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("served=%v: nothing recorded (v1 %d, core %d)", served, len(v1.Items), len(core.Items))
			}
			time.Sleep(10 * time.Millisecond)
		}
		a.Shutdown()
		close(stop)
	}
}
