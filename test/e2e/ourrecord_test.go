package e2e

// End-to-end tests of the project's own core/v1 recorder (package record)
// against a real eventsd, through client-go's typedcorev1.EventSinkImpl.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/record"
)

// ourRecordWait bounds how long the recorder may take to write through.
const ourRecordWait = 20 * time.Second

func ourRecordPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
}

// ourRecordStart returns a broadcaster writing to eventsd through
// client-go's EventSinkImpl, and a recorder for component on node1.
func ourRecordStart(t *testing.T, cs kubernetes.Interface, component string, opts ...record.Option) (*record.Broadcaster, record.EventRecorderLogger) {
	t.Helper()
	b := record.NewBroadcaster(opts...)
	t.Cleanup(b.Shutdown)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return b, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: "node1"})
}

// ourRecordEvents lists the events about a pod.
func ourRecordEvents(t *testing.T, cs kubernetes.Interface, ns, pod string) []corev1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return l.Items
}

// ourRecordPoll polls f until it reports done or timeout passes.
func ourRecordPoll(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(ourRecordWait)
	for {
		ok, state := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state: %s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ourRecordByReason indexes events by reason.
func ourRecordByReason(items []corev1.Event) map[string][]corev1.Event {
	out := map[string][]corev1.Event{}
	for _, ev := range items {
		out[ev.Reason] = append(out[ev.Reason], ev)
	}
	return out
}

func TestOurRecorder(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "ourrec"
	_, rec := ourRecordStart(t, cs, "our-test")

	t.Run("repeats are counted on one event", func(t *testing.T) {
		pod := ourRecordPod(ns, "web-1")
		for i := 0; i < 5; i++ {
			rec.Event(pod, corev1.EventTypeNormal, "Pulled", "pulled image nginx")
		}
		var items []corev1.Event
		ourRecordPoll(t, "one event with count 5", func() (bool, string) {
			items = ourRecordEvents(t, cs, ns, "web-1")
			return len(items) == 1 && items[0].Count == 5, fmt.Sprintf("%d events %+v", len(items), items)
		})
		ev := items[0]
		if !regexp.MustCompile(`^web-1\.[0-9a-f]+$`).MatchString(ev.Name) {
			t.Errorf("name %q, want web-1.<hex>", ev.Name)
		}
		if ev.Source != (corev1.EventSource{Component: "our-test", Host: "node1"}) || ev.ReportingController != "our-test" ||
			ev.ReportingInstance != "node1" || !ev.EventTime.IsZero() || ev.InvolvedObject.UID != "uid-web-1" ||
			ev.LastTimestamp.Before(&ev.FirstTimestamp) {
			t.Errorf("stored event %+v", ev)
		}
	})

	t.Run("similar messages are aggregated", func(t *testing.T) {
		pod := ourRecordPod(ns, "web-2")
		for i := 1; i <= 11; i++ {
			rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "back-off %d restarting container", i)
		}
		const prefix = "(combined from similar events): "
		var items []corev1.Event
		ourRecordPoll(t, "9 individual events and a combined one with count 2", func() (bool, string) {
			items = ourRecordEvents(t, cs, ns, "web-2")
			for _, ev := range items {
				if strings.HasPrefix(ev.Message, prefix) && ev.Count == 2 {
					return len(items) == 10, ""
				}
			}
			return false, fmt.Sprintf("%d events", len(items))
		})
		for _, ev := range items {
			if strings.HasPrefix(ev.Message, prefix) {
				if ev.Message != prefix+"back-off 11 restarting container" || ev.ReportingController != "" {
					t.Errorf("combined event %+v", ev)
				}
			} else if ev.Count != 1 {
				t.Errorf("individual event %+v", ev)
			}
		}
	})

	t.Run("an expired event is re-created by name", func(t *testing.T) {
		pod := ourRecordPod(ns, "web-3")
		rec.Event(pod, corev1.EventTypeNormal, "Started", "started")
		var first corev1.Event
		ourRecordPoll(t, "the event", func() (bool, string) {
			items := ourRecordEvents(t, cs, ns, "web-3")
			if len(items) == 1 {
				first = items[0]
			}
			return len(items) == 1, fmt.Sprint(len(items))
		})
		if err := cs.CoreV1().Events(ns).Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.Event(pod, corev1.EventTypeNormal, "Started", "started")
		ourRecordPoll(t, "the re-created event with count 2", func() (bool, string) {
			items := ourRecordEvents(t, cs, ns, "web-3")
			return len(items) == 1 && items[0].Name == first.Name && items[0].Count == 2 &&
				items[0].FirstTimestamp.Equal(&first.FirstTimestamp), fmt.Sprintf("%+v", items)
		})
	})

	// The five-reasons workload, compressed in time: five reasons
	// 18 times each and a sixth 12 times, interleaved. Every reason is
	// stored with its exact count (client-go stores 25 of the first 90 and
	// never the sixth).
	t.Run("five reasons are each counted", func(t *testing.T) {
		pod := ourRecordPod(ns, "web-4")
		reasons := []string{"Pulling", "Pulled", "Created", "Started", "Probe"}
		for tick := 0; tick < 18; tick++ {
			for _, r := range reasons {
				rec.Eventf(pod, corev1.EventTypeNormal, r, "%s web", r)
			}
			if tick >= 6 {
				rec.Event(pod, corev1.EventTypeWarning, "Unhealthy", "probe failed")
			}
			time.Sleep(5 * time.Millisecond) // spread over a few ticks of the clock
		}
		ourRecordPoll(t, "exact counts for every reason", func() (bool, string) {
			by := ourRecordByReason(ourRecordEvents(t, cs, ns, "web-4"))
			for _, r := range reasons {
				if len(by[r]) != 1 || by[r][0].Count != 18 {
					return false, fmt.Sprintf("%s: %d events", r, len(by[r]))
				}
			}
			return len(by["Unhealthy"]) == 1 && by["Unhealthy"][0].Count == 12, fmt.Sprintf("Unhealthy: %+v", by["Unhealthy"])
		})
	})
}

// A crashloop at real-time scale: 100 repeats at once, most of them held
// back by the spam filter, then Shutdown: the stored count is 100.
func TestOurRecorderFlushOnShutdown(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "ourrec-flush"
	b, rec := ourRecordStart(t, cs, "our-test")
	pod := ourRecordPod(ns, "crash")
	for i := 0; i < 100; i++ {
		rec.Event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	}
	b.Shutdown()
	items := ourRecordEvents(t, cs, ns, "crash")
	if len(items) != 1 || items[0].Count != 100 {
		t.Fatalf("stored %d events, counts %v; want one with count 100", len(items), func() []int32 {
			var c []int32
			for _, ev := range items {
				c = append(c, ev.Count)
			}
			return c
		}())
	}
}

// WithResume: a restarted component keeps counting on its stored events
// (eventsd serves the source field selector the resume list uses); another
// host's events of the same component are left alone.
func TestOurRecorderResume(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "ourrec-resume"
	pod := ourRecordPod(ns, "web")
	b1, rec1 := ourRecordStart(t, cs, "our-resume")
	rec1.Event(pod, corev1.EventTypeNormal, "Started", "started")
	rec1.Event(pod, corev1.EventTypeNormal, "Started", "started")
	other := b1.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "our-resume", Host: "node2"})
	other.Event(pod, corev1.EventTypeNormal, "Started", "started")
	b1.Shutdown()
	before := ourRecordEvents(t, cs, ns, "web")
	if len(before) != 2 {
		t.Fatalf("%d events before the restart", len(before))
	}

	b2, rec2 := ourRecordStart(t, cs, "our-resume", record.WithResume(true))
	rec2.Event(pod, corev1.EventTypeNormal, "Started", "started")
	b2.Shutdown()
	after := ourRecordEvents(t, cs, ns, "web")
	if len(after) != 2 {
		t.Fatalf("%d events after the restart, want the same 2", len(after))
	}
	for _, ev := range after {
		want := int32(3)
		if ev.Source.Host == "node2" {
			want = 1
		}
		if ev.Count != want {
			t.Errorf("%s (host %s): count %d, want %d", ev.Name, ev.Source.Host, ev.Count, want)
		}
	}
}
