package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"

	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

func ourEventsPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
}

// ourEventsStored lists the events about pod in events.k8s.io/v1.
func ourEventsStored(t *testing.T, cs kubernetes.Interface, pod string) []eventsv1.Event {
	t.Helper()
	l, err := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestOurEventsCrashloop: a crashlooping container's 600 back-offs become
// one event whose series count is exactly 600 once the recorder shuts
// down, written with client-go's own sink, through a handful of writes.
func TestOurEventsCrashloop(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	b := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, events.WithHostname("node-1"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(scheme.Scheme, "kubelet")
	for i := 0; i < 600; i++ {
		r.Eventf(ourEventsPod("crash"), nil, corev1.EventTypeWarning, "BackOff", "Restart", "Back-off restarting failed container app")
	}
	b.Shutdown()
	evs := ourEventsStored(t, cs, "crash")
	if len(evs) != 1 || evs[0].Series == nil || evs[0].Series.Count != 600 || evs[0].ReportingInstance != "kubelet-node-1" {
		t.Fatalf("stored %+v", evs)
	}
	writes := 0.0
	for _, verb := range []string{"create", "patch"} {
		writes += ourEventsMetric(b, verb)
	}
	if writes > 4 {
		t.Fatalf("%v writes, want at most 4", writes)
	}
}

func ourEventsMetric(b *events.Broadcaster, verb string) float64 {
	return testutil.ToFloat64(b.Metrics().Writes.WithLabelValues(verb, "success"))
}

// TestOurEventsResume: a recorder that restarts (a new broadcaster, same
// controller and host) continues its ongoing series on the server instead
// of starting a second object; eventsd answers its list with the
// reportingInstance field selector. Shutdown leaves the series unknown
// (nobody counts it), the restarted recorder sets it back to ongoing, and
// evctl shows the state.
func TestOurEventsResume(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	state := func() (int32, string) {
		t.Helper()
		evs := ourEventsStored(t, cs, "web")
		if len(evs) != 1 || evs[0].Series == nil {
			t.Fatalf("%d objects, %+v", len(evs), evs)
		}
		return evs[0].Series.Count, evs[0].Annotations[events.SeriesStateAnnotation]
	}
	run := func(n int, whileRunning func()) {
		b := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, events.WithHostname("node-1"))
		if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(scheme.Scheme, "kubelet")
		for i := 0; i < n; i++ {
			r.Eventf(ourEventsPod("web"), nil, corev1.EventTypeWarning, "Unhealthy", "Probe", "Readiness probe failed")
		}
		whileRunning()
		b.Shutdown()
	}
	run(5, func() {})
	if n, st := state(); n != 5 || st != events.SeriesUnknown {
		t.Fatalf("after Shutdown: count %d, state %q; want 5, unknown", n, st)
	}
	out, _ := evctlRun(t, p.URL, "get", "--for", "pod/web")
	if l := evctlLines(out, "Unhealthy"); len(l) != 1 || !strings.Contains(l[0], "(x5 over") || !strings.Contains(l[0], ", unknown)") {
		t.Fatalf("evctl get: %q\n%s", l, out)
	}
	run(7, func() { // the restarted recorder
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, st := state()
			if st == events.SeriesOngoing {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the resumed series stayed %q (count %d)", st, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	if n, st := state(); n != 12 || st != events.SeriesUnknown {
		t.Fatalf("after the restarted recorder's Shutdown: count %d, state %q; want 12, unknown", n, st)
	}
}

// TestOurEventsReadBackThroughCore: what the recorder writes reads back
// through core/v1 as a new-style event with the series count, which is
// what kubectl get events shows.
func TestOurEventsReadBackThroughCore(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	b := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, events.WithHostname("h"))
	if err := b.StartRecordingToSinkWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(scheme.Scheme, "example.com/ctrl")
	related := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "n1"}}
	for i := 0; i < 3; i++ {
		r.Eventf(ourEventsPod("db"), related, corev1.EventTypeNormal, "Scheduled", "Binding", "assigned %s to n1", "db")
	}
	b.Shutdown()
	l, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "related.name=n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("%d events", len(l.Items))
	}
	ev := l.Items[0]
	if ev.ReportingController != "example.com/ctrl" || ev.Series == nil || ev.Series.Count != 3 || ev.Message != "assigned db to n1" ||
		ev.InvolvedObject.Name != "db" || ev.EventTime.IsZero() || ev.Action != "Binding" {
		t.Fatalf("through core/v1: %+v", ev)
	}
}
