package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// cgRecorderWait bounds how long a recorder may take to write through.
const cgRecorderWait = 20 * time.Second

func cgPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
}

// cgCoreEventsFor lists the core/v1 events about a pod.
func cgCoreEventsFor(t *testing.T, cs kubernetes.Interface, ns, pod string) []corev1.Event {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(cgCtx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return l.Items
}

func cgNewEventsFor(t *testing.T, cs kubernetes.Interface, ns, pod string) []eventsv1.Event {
	t.Helper()
	l, err := cs.EventsV1().Events(ns).List(cgCtx(t), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	if err != nil {
		t.Fatalf("events.k8s.io list: %v", err)
	}
	return l.Items
}

func TestRecorderLegacy(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "rec-legacy"

	b := record.NewBroadcaster()
	t.Cleanup(b.Shutdown)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})

	t.Run("repeats are counted on one event", func(t *testing.T) {
		pod := cgPod(ns, "web-1")
		start := time.Now().Truncate(time.Second)
		for i := 0; i < 5; i++ {
			rec.Event(pod, corev1.EventTypeNormal, "Pulled", "pulled image nginx")
		}
		var items []corev1.Event
		cgPoll(t, cgRecorderWait, "one event with count 5", func() (bool, string) {
			items = cgCoreEventsFor(t, cs, ns, "web-1")
			return len(items) == 1 && items[0].Count == 5, fmt.Sprintf("%d events %+v", len(items), items)
		})
		ev := items[0]
		if !regexp.MustCompile(`^web-1\.[0-9a-f]+$`).MatchString(ev.Name) {
			t.Errorf("name %q, want web-1.<hex>", ev.Name)
		}
		if ev.Reason != "Pulled" || ev.Message != "pulled image nginx" || ev.Type != "Normal" ||
			ev.Source.Component != "test" || ev.ReportingController != "test" || !ev.EventTime.IsZero() || ev.Series != nil ||
			ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.APIVersion != "v1" || ev.InvolvedObject.Name != "web-1" ||
			ev.InvolvedObject.Namespace != ns || ev.InvolvedObject.UID != "uid-web-1" {
			t.Errorf("stored event %+v", ev)
		}
		if ev.FirstTimestamp.IsZero() || ev.LastTimestamp.Before(&ev.FirstTimestamp) || ev.FirstTimestamp.Time.Before(start) {
			t.Errorf("firstTimestamp %v lastTimestamp %v (test start %v)", ev.FirstTimestamp, ev.LastTimestamp, start)
		}
		// The same object through events.k8s.io.
		n, err := cs.EventsV1().Events(ns).Get(cgCtx(t), ev.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.DeprecatedCount != 5 || n.ReportingController != "test" || n.DeprecatedSource.Component != "test" || n.Note != ev.Message || n.Regarding != ev.InvolvedObject {
			t.Errorf("events.k8s.io view %+v", n)
		}
		m := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events/"+ev.Name)
		cgJSONNull(t, m, "eventTime")
		cgJSONString(t, m, "reportingComponent", "test")
		cgJSONString(t, m, "reportingInstance", "")
	})

	t.Run("similar events are aggregated after 10", func(t *testing.T) {
		pod := cgPod(ns, "web-2")
		for i := 1; i <= 12; i++ {
			rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "back-off %d restarting container", i)
		}
		const prefix = "(combined from similar events): "
		var items []corev1.Event
		cgPoll(t, cgRecorderWait, "an aggregated event with count 3", func() (bool, string) {
			items = cgCoreEventsFor(t, cs, ns, "web-2")
			for _, ev := range items {
				if strings.HasPrefix(ev.Message, prefix) && ev.Count == 3 {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events", len(items))
		})
		if len(items) != 10 {
			t.Errorf("%d events stored, want 9 individual ones and 1 aggregate", len(items))
		}
		individual := map[string]bool{}
		for _, ev := range items {
			if strings.HasPrefix(ev.Message, prefix) {
				if ev.Message != prefix+"back-off 12 restarting container" || ev.Reason != "BackOff" || ev.Type != "Warning" ||
					ev.Source.Component != "test" || ev.LastTimestamp.Before(&ev.FirstTimestamp) {
					t.Errorf("aggregate event %+v", ev)
				}
				continue
			}
			if ev.Count != 1 || ev.Type != "Warning" {
				t.Errorf("individual event %+v", ev)
			}
			individual[ev.Message] = true
		}
		for i := 1; i <= 9; i++ {
			if !individual[fmt.Sprintf("back-off %d restarting container", i)] {
				t.Errorf("no individual event for message %d (have %v)", i, individual)
			}
		}
	})
}

func TestRecorderEventsV1(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "rec-new"
	host, _ := os.Hostname()

	ctx, cancel := context.WithCancel(context.Background())
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	t.Cleanup(func() {
		b.Shutdown()
		cancel()
	})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(scheme.Scheme, "test-controller")
	pod := cgPod(ns, "api-1")

	before := time.Now().UTC().Truncate(time.Microsecond)
	rec.Eventf(pod, nil, corev1.EventTypeNormal, "Started", "StartContainer", "started container %s", "c1")
	var items []eventsv1.Event
	cgPoll(t, cgRecorderWait, "one events.k8s.io event", func() (bool, string) {
		items = cgNewEventsFor(t, cs, ns, "api-1")
		return len(items) == 1, fmt.Sprintf("%d events", len(items))
	})
	ev := items[0]
	if ev.Series != nil || ev.ReportingController != "test-controller" || ev.ReportingInstance != "test-controller-"+host ||
		ev.Action != "StartContainer" || ev.Reason != "Started" || ev.Note != "started container c1" || ev.Type != "Normal" ||
		ev.Regarding.Kind != "Pod" || ev.Regarding.Name != "api-1" || ev.Regarding.UID != "uid-api-1" ||
		ev.DeprecatedCount != 0 || ev.DeprecatedSource != (corev1.EventSource{}) || !ev.DeprecatedFirstTimestamp.IsZero() {
		t.Errorf("stored singleton %+v", ev)
	}
	if ev.EventTime.Time.Before(before) || ev.EventTime.Time.After(time.Now()) {
		t.Errorf("eventTime %v not within the test (%v..now)", ev.EventTime, before)
	}

	// An isomorphic event starts a series: PATCH {"series":{...}}.
	rec.Eventf(pod, nil, corev1.EventTypeNormal, "Started", "StartContainer", "started container %s", "c1-again")
	cgPoll(t, cgRecorderWait, "series.count 2", func() (bool, string) {
		items = cgNewEventsFor(t, cs, ns, "api-1")
		return len(items) == 1 && items[0].Series != nil && items[0].Series.Count == 2, fmt.Sprintf("%+v", items)
	})
	got := items[0]
	if got.Name != ev.Name || got.Note != ev.Note || got.UID != ev.UID || got.Series.LastObservedTime.Time.Before(ev.EventTime.Time) {
		t.Errorf("after the series started: %+v (was %+v)", got, ev)
	}

	// What a core/v1 client (kubectl get events) sees.
	c, err := cs.CoreV1().Events(ns).Get(cgCtx(t), ev.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ReportingController != "test-controller" || c.ReportingInstance != "test-controller-"+host || c.Message != ev.Note ||
		c.Action != "StartContainer" || c.Series == nil || c.Series.Count != 2 || c.Count != 0 ||
		!c.EventTime.Time.Equal(ev.EventTime.Time) || c.InvolvedObject != ev.Regarding {
		t.Errorf("core/v1 view %+v", c)
	}
	m := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events/"+ev.Name)
	cgJSONString(t, m, "reportingComponent", "test-controller")
	if et, _ := m["eventTime"].(string); !cgMicroTimeRE.MatchString(et) {
		t.Errorf("core/v1 eventTime %v, want RFC3339 with microseconds", m["eventTime"])
	}
	cgJSONEmptyObject(t, m, "source")
	cgJSONNull(t, m, "firstTimestamp")
	cgJSONAbsent(t, m, "count")
	if s, _ := m["series"].(map[string]any); s["count"] != float64(2) || !cgMicroTimeRE.MatchString(fmt.Sprint(s["lastObservedTime"])) {
		t.Errorf("core/v1 series %v", m["series"])
	}
}

func TestRecorderAdapter(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "rec-adapter"

	a := events.NewEventBroadcasterAdapter(cs)
	stop := make(chan struct{})
	a.StartRecordingToSink(stop)
	t.Cleanup(func() {
		a.Shutdown()
		close(stop)
	})
	rec := a.NewRecorder("adapter-ctrl")
	if _, legacy := rec.(*record.EventRecorderAdapter); legacy {
		t.Fatalf("the adapter chose the legacy core/v1 recorder (%T): GET /apis/events.k8s.io/v1 must succeed", rec)
	}
	rec.Eventf(cgPod(ns, "db-1"), cgPod(ns, "db-0"), corev1.EventTypeWarning, "Failed", "Pull", "failed to pull %q", "img")
	var items []eventsv1.Event
	cgPoll(t, cgRecorderWait, "one events.k8s.io event from the adapter", func() (bool, string) {
		items = cgNewEventsFor(t, cs, ns, "db-1")
		return len(items) == 1, fmt.Sprintf("%d events", len(items))
	})
	ev := items[0]
	// Only the events.k8s.io recorder sets action, related and eventTime;
	// the legacy fallback would set deprecatedSource instead.
	if ev.Action != "Pull" || ev.ReportingController != "adapter-ctrl" || ev.EventTime.IsZero() || ev.Note != `failed to pull "img"` ||
		ev.Related == nil || ev.Related.Name != "db-0" || ev.DeprecatedSource != (corev1.EventSource{}) || ev.Type != "Warning" {
		t.Errorf("adapter event %+v", ev)
	}
}

// TestRecorderAfterExpiry lets an event expire (--event-ttl=2s) between two
// occurrences: the recorders' PATCH gets 404 and they re-create the event
// under the same name, carrying the accumulated count or series.
func TestRecorderAfterExpiry(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--event-ttl=2s"}})
	cs := p.Clientset()
	const ns = "rec-expiry"

	lb := record.NewBroadcaster()
	t.Cleanup(lb.Shutdown)
	lb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	legacy := lb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})

	ctx, cancel := context.WithCancel(context.Background())
	nb := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	t.Cleanup(func() {
		nb.Shutdown()
		cancel()
	})
	if err := nb.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	modern := nb.NewRecorder(scheme.Scheme, "test-controller")

	legacyPod, modernPod := cgPod(ns, "old-1"), cgPod(ns, "new-1")
	legacy.Event(legacyPod, corev1.EventTypeNormal, "Pulled", "pulled")
	modern.Eventf(modernPod, nil, corev1.EventTypeNormal, "Started", "Start", "started")
	var first []corev1.Event
	cgPoll(t, cgRecorderWait, "both events stored", func() (bool, string) {
		first = append(cgCoreEventsFor(t, cs, ns, "old-1"), cgCoreEventsFor(t, cs, ns, "new-1")...)
		return len(first) == 2, fmt.Sprintf("%d events", len(first))
	})
	cgPoll(t, 10*time.Second, "both events to expire", func() (bool, string) {
		n := len(cgCoreEventsFor(t, cs, ns, "old-1")) + len(cgCoreEventsFor(t, cs, ns, "new-1"))
		return n == 0, fmt.Sprintf("%d events left", n)
	})

	legacy.Event(legacyPod, corev1.EventTypeNormal, "Pulled", "pulled")
	modern.Eventf(modernPod, nil, corev1.EventTypeNormal, "Started", "Start", "started")
	cgPoll(t, cgRecorderWait, "the legacy event re-created with count 2", func() (bool, string) {
		items := cgCoreEventsFor(t, cs, ns, "old-1")
		return len(items) == 1 && items[0].Count == 2, fmt.Sprintf("%+v", items)
	})
	cgPoll(t, cgRecorderWait, "the events.k8s.io event re-created with series.count 2", func() (bool, string) {
		items := cgNewEventsFor(t, cs, ns, "new-1")
		return len(items) == 1 && items[0].Series != nil && items[0].Series.Count == 2, fmt.Sprintf("%+v", items)
	})
	for _, old := range first {
		ev, err := cs.CoreV1().Events(ns).Get(cgCtx(t), old.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("event %s not re-created under its name: %v", old.Name, err)
			continue
		}
		if ev.UID == old.UID || !ev.FirstTimestamp.Equal(&old.FirstTimestamp) || ev.Message != old.Message {
			t.Errorf("re-created %s: %+v, was %+v", old.Name, ev, old)
		}
	}
}
