package evctl

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/seriesstate"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var now = time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return now.Add(-d) }

// fixture is one of each kind of event evctl meets: a legacy event with a
// count, a finished series written by this project's recorder, an ongoing
// one, a client-go series without state, and a singleton.
func fixture() []*eventsv1.Event {
	pod := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "web-1", UID: "pod-uid"}
	node := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1", UID: "node-uid"}
	return []*eventsv1.Event{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1.legacy", UID: "1", ResourceVersion: "11"},
			Regarding: pod, Reason: "BackOff", Note: "Back-off restarting failed container web", Type: "Warning",
			DeprecatedSource: corev1.EventSource{Component: "kubelet", Host: "node-1"}, DeprecatedCount: 25,
			DeprecatedFirstTimestamp: metav1.NewTime(at(20 * time.Minute)), DeprecatedLastTimestamp: metav1.NewTime(at(47 * time.Second))},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1.series", UID: "2", ResourceVersion: "12",
			Annotations: map[string]string{seriesstate.Annotation: "finished"}},
			Regarding: pod, Related: &node, Reason: "Scheduled", Action: "Binding", Note: "Successfully assigned default/web-1 to node-1",
			Type: "Normal", ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-h1",
			EventTime: metav1.NewMicroTime(at(30 * time.Minute)),
			Series:    &eventsv1.EventSeries{Count: 600, LastObservedTime: metav1.NewMicroTime(at(29 * time.Minute))}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1.ongoing", UID: "3", ResourceVersion: "13",
			Annotations: map[string]string{seriesstate.Annotation: "ongoing"}},
			Regarding: pod, Reason: "Unhealthy", Action: "Probe", Note: "Readiness probe failed", Type: "Warning",
			ReportingController: "kubelet", ReportingInstance: "kubelet-node-1",
			EventTime: metav1.NewMicroTime(at(10 * time.Minute)),
			Series:    &eventsv1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(at(5 * time.Second))}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-1.cg", UID: "4", ResourceVersion: "14"},
			Regarding: node, Reason: "NodeNotReady", Action: "Check", Note: "  Node node-1 status is now: NodeNotReady  ", Type: "Warning",
			ReportingController: "node-controller", ReportingInstance: "node-controller-cp",
			EventTime: metav1.NewMicroTime(at(40 * time.Minute)),
			Series:    &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(at(39 * time.Minute))}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "node-1.single", UID: "5", ResourceVersion: "15"},
			Regarding: node, Reason: "NodeReady", Action: "Check", Note: "Node node-1 status is now: NodeReady", Type: "Normal",
			ReportingController: "kubelet", ReportingInstance: "kubelet-node-1", EventTime: metav1.NewMicroTime(at(35 * time.Minute))},
	}
}

func rows(evs []*eventsv1.Event) []*row {
	var out []*row
	for _, ev := range evs {
		out = append(out, newRow(ev))
	}
	return out
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./evctl -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

func TestGoldenGet(t *testing.T) {
	for _, c := range []struct {
		name, output string
		all          bool
	}{
		{"get", "", false},
		{"get-all-wide", "wide", true},
		{"get-json", "json", false},
	} {
		var buf bytes.Buffer
		p := &printer{out: &buf, output: c.output, allNamespaces: c.all, now: func() time.Time { return now }}
		rs := rows(fixture())
		sortByLast(rs)
		if err := p.table(rs); err != nil {
			t.Fatal(err)
		}
		golden(t, c.name, buf.Bytes())
	}
}

func TestGoldenTimeline(t *testing.T) {
	node := target{kind: "Node", name: "node-1"}
	var items []eventsv1.Event
	for _, ev := range fixture() {
		items = append(items, *ev)
	}
	rs := withRoles(items, node)
	sortByFirst(rs)
	for _, output := range []string{"", "wide"} {
		var buf bytes.Buffer
		p := &printer{out: &buf, output: output, now: func() time.Time { return now }}
		if err := p.timeline(rs); err != nil {
			t.Fatal(err)
		}
		golden(t, "timeline-node"+map[string]string{"": "", "wide": "-wide"}[output], buf.Bytes())
	}
}

// A series whose recorder shut down shows its state as the recorder left
// it: unknown.
func TestLastSeenUnknown(t *testing.T) {
	ev := fixture()[1].DeepCopy()
	ev.Annotations[seriesstate.Annotation] = seriesstate.Unknown
	p := &printer{now: func() time.Time { return now }}
	if got, want := p.lastSeen(newRow(ev)), "29m (x600 over 30m, unknown)"; got != want {
		t.Fatalf("last seen %q, want %q", got, want)
	}
}
