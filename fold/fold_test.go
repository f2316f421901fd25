package fold

import (
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// coreEvent is a core/v1 event as a naive client sends it: count 1,
// timestamps at at.
func coreEvent(name string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(at)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: "u1", APIVersion: "v1", FieldPath: "spec.containers{app}"},
		Reason:         "BackOff", Type: corev1.EventTypeWarning, Message: "back-off " + name,
		Source: corev1.EventSource{Component: "kubelet", Host: "node1"}, Count: 1,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
	}
}

// newEvent is an events.k8s.io/v1 event in the storage form.
func newEvent(name string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(at)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: "u1", APIVersion: "v1", ResourceVersion: "7"},
		Related:        &corev1.ObjectReference{Kind: "Node", Name: "node1"},
		Reason:         "PolicyViolation", Type: corev1.EventTypeWarning, Action: "Scan", Message: "note " + name,
		ReportingController: "kyverno", ReportingInstance: "kyverno-0", EventTime: metav1.NewMicroTime(at),
	}
}

// TestKey: each field of the recorders' keys separates series, fields
// outside them do not, and the API group the create came through decides
// which key applies.
func TestKey(t *testing.T) {
	base := coreEvent("a", t0)
	same := []func(*corev1.Event){
		func(e *corev1.Event) { e.Name = "b" },
		func(e *corev1.Event) { e.Message = "other" },
		func(e *corev1.Event) { e.InvolvedObject.ResourceVersion = "9" },
		func(e *corev1.Event) { e.Count = 5; e.LastTimestamp = metav1.NewTime(t0.Add(time.Hour)) },
		func(e *corev1.Event) { e.Annotations = map[string]string{"a": "b"} },
	}
	for i, f := range same {
		e := base.DeepCopy()
		f(e)
		if Key(e, eventapi.CoreV1) != Key(base, eventapi.CoreV1) {
			t.Errorf("core change %d split the series", i)
		}
	}
	differ := []func(*corev1.Event){
		func(e *corev1.Event) { e.Reason = "Failed" },
		func(e *corev1.Event) { e.Type = corev1.EventTypeNormal },
		func(e *corev1.Event) { e.Namespace = "other" },
		func(e *corev1.Event) { e.Source.Component = "kubelet2" },
		func(e *corev1.Event) { e.Source.Host = "node2" },
		func(e *corev1.Event) { e.InvolvedObject.UID = "u2" },
		func(e *corev1.Event) { e.InvolvedObject.Name = "web2" },
		func(e *corev1.Event) { e.InvolvedObject.Kind = "Deployment" },
		func(e *corev1.Event) { e.InvolvedObject.FieldPath = "spec.containers{sidecar}" },
		func(e *corev1.Event) { e.ReportingController = "x" },
		func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(t0) },
		// No ambiguity from concatenation: "kubelet"+"node1" is not "kube"+"letnode1".
		func(e *corev1.Event) { e.Source = corev1.EventSource{Component: "kube", Host: "letnode1"} },
	}
	for i, f := range differ {
		e := base.DeepCopy()
		f(e)
		if Key(e, eventapi.CoreV1) == Key(base, eventapi.CoreV1) {
			t.Errorf("core change %d kept the series", i)
		}
	}
	nb := newEvent("a", t0)
	for i, f := range []func(*corev1.Event){
		func(e *corev1.Event) { e.Action = "Other" },
		func(e *corev1.Event) { e.Related = nil },
		func(e *corev1.Event) { e.Related.Name = "node2" },
		func(e *corev1.Event) { e.ReportingInstance = "kyverno-1" },
	} {
		e := nb.DeepCopy()
		f(e)
		if Key(e, eventapi.EventsV1) == Key(nb, eventapi.EventsV1) {
			t.Errorf("events.k8s.io change %d kept the series", i)
		}
	}
	e := nb.DeepCopy()
	e.Message, e.InvolvedObject.ResourceVersion, e.EventTime = "later", "8", metav1.NewMicroTime(t0.Add(time.Minute))
	if Key(e, eventapi.EventsV1) != Key(nb, eventapi.EventsV1) {
		t.Error("note, time and regarding.resourceVersion split the series")
	}
	if Key(nb, eventapi.EventsV1) == Key(nb, eventapi.CoreV1) {
		t.Error("the two groups' keys are the same")
	}
}

// TestChoose: the earliest created isomorphic candidate within the
// window, whatever the order given; candidates out of the window, not
// isomorphic, or the event itself are not chosen.
func TestChoose(t *testing.T) {
	now := t0.Add(20 * time.Minute)
	old := coreEvent("old", t0) // last observed 20 min ago
	a := coreEvent("a", t0.Add(5*time.Minute))
	a.LastTimestamp = metav1.NewTime(now.Add(-time.Minute))
	b := coreEvent("b", t0.Add(5*time.Minute)) // same creation: a wins by name
	b.LastTimestamp = metav1.NewTime(now)
	later := coreEvent("c", t0.Add(6*time.Minute))
	later.LastTimestamp = metav1.NewTime(now)
	other := coreEvent("d", t0)
	other.Reason, other.LastTimestamp = "Failed", metav1.NewTime(now)
	ev := coreEvent("new", now)
	for _, order := range [][]*corev1.Event{{old, a, b, later, other}, {other, later, b, a, old}} {
		if got := Choose(order, ev, eventapi.CoreV1, now, 10*time.Minute); got != a {
			t.Fatalf("chose %v, want a", got)
		}
	}
	if got := Choose([]*corev1.Event{old, other}, ev, eventapi.CoreV1, now, 10*time.Minute); got != nil {
		t.Fatalf("chose %s out of the window or not isomorphic", got.Name)
	}
	if got := Choose([]*corev1.Event{old}, ev, eventapi.CoreV1, now, 30*time.Minute); got != old {
		t.Fatalf("a 30m window did not reach old: %v", got)
	}
	self := coreEvent("new", now)
	if got := Choose([]*corev1.Event{self}, ev, eventapi.CoreV1, now, time.Hour); got != nil {
		t.Fatal("chose the event itself")
	}
}

// TestFoldCore: a naive client's creates (count 1 each) add one each; the
// latest message and lastTimestamp win; a late create does not move them
// back; a create carrying a count adds it.
func TestFoldCore(t *testing.T) {
	stored := coreEvent("first", t0)
	stored.ResourceVersion = "10"
	cur := stored
	for i := 1; i < 600; i++ {
		next, added := Fold(cur, coreEvent("x", t0.Add(time.Duration(i)*100*time.Millisecond)), eventapi.CoreV1, t0)
		if added != 1 {
			t.Fatalf("fold %d added %d", i, added)
		}
		cur = next
	}
	if cur.Count != 600 || !cur.LastTimestamp.Time.Equal(t0.Add(59*time.Second)) || cur.Message != "back-off x" || cur.Name != "first" {
		t.Fatalf("after 600: count %d last %v message %q name %s", cur.Count, cur.LastTimestamp, cur.Message, cur.Name)
	}
	if stored.Count != 1 {
		t.Fatal("Fold modified the stored event")
	}
	late := coreEvent("late", t0)
	late.Message = "stale"
	out, _ := Fold(cur, late, eventapi.CoreV1, t0)
	if out.Count != 601 || out.Message != "back-off x" || !out.LastTimestamp.Time.Equal(t0.Add(59*time.Second)) {
		t.Fatalf("a late create: count %d message %q last %v", out.Count, out.Message, out.LastTimestamp)
	}
	counted := coreEvent("counted", t0.Add(time.Hour))
	counted.Count = 25
	if out, added := Fold(cur, counted, eventapi.CoreV1, t0); added != 25 || out.Count != 625 {
		t.Fatalf("a create of count 25 added %d, count %d", added, out.Count)
	}
	// No timestamps: the server's time.
	bare := coreEvent("bare", t0)
	bare.LastTimestamp, bare.FirstTimestamp, bare.Count = metav1.Time{}, metav1.Time{}, 0
	if out, _ := Fold(cur, bare, eventapi.CoreV1, t0.Add(2*time.Hour)); !out.LastTimestamp.Time.Equal(t0.Add(2*time.Hour)) || out.Count != 601 {
		t.Fatalf("a create without times: last %v count %d", out.LastTimestamp, out.Count)
	}
}

// TestFoldSeries: events.k8s.io creates start and advance the stored
// event's series; a recorder's creates of one name with its series'
// growing count add only what is new, in either order; the names
// remembered are bounded.
func TestFoldSeries(t *testing.T) {
	stored := newEvent("first", t0)
	// A restarted tools/events recorder: its first occurrence (no series),
	// then its series written to its own name (count 2), then the final
	// count (10); the second create may arrive before the first.
	z1 := newEvent("z", t0.Add(time.Minute))
	z2 := newEvent("z", t0.Add(time.Minute))
	z2.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t0.Add(2 * time.Minute))}
	z10 := z2.DeepCopy()
	z10.Series = &corev1.EventSeries{Count: 10, LastObservedTime: metav1.NewMicroTime(t0.Add(9 * time.Minute))}
	for _, order := range [][]*corev1.Event{{z1, z2, z10}, {z2, z1, z10}} {
		cur := stored
		var total int32
		for _, ev := range order {
			var added int32
			cur, added = Fold(cur, ev, eventapi.EventsV1, t0)
			total += added
		}
		if cur.Series == nil || cur.Series.Count != 11 || total != 10 || !cur.Series.LastObservedTime.Time.Equal(t0.Add(9*time.Minute)) {
			t.Fatalf("order %s,%v: series %+v, added %d", order[0].Name, order[0].Series, cur.Series, total)
		}
		if cur.Count != 0 || !cur.LastTimestamp.IsZero() {
			t.Fatal("a series-style event got a count")
		}
		if cur.Message != "note z" {
			t.Fatalf("note %q", cur.Message)
		}
		// A repeat of what z already contributed changes nothing.
		if out, added := Fold(cur, z10, eventapi.EventsV1, t0); added != 0 || out != cur {
			t.Fatal("a repeated create was counted")
		}
	}
	cur := stored
	for i := range MaxCounted + 5 {
		cur, _ = Fold(cur, newEvent(string(rune('a'+i)), t0), eventapi.EventsV1, t0)
	}
	if got := len(parseCounted(cur.Annotations[CountedAnnotation])); got != MaxCounted || cur.Series.Count != MaxCounted+6 {
		t.Fatalf("%d names remembered, count %d", got, cur.Series.Count)
	}
}

// TestStoredBefore: of the isomorphic candidates in the window, the one
// stored first, and only if stored before the created event; the created
// event itself and later ones are not.
func TestStoredBefore(t *testing.T) {
	now := t0.Add(time.Minute)
	at := func(name, rv string) *corev1.Event {
		e := coreEvent(name, t0)
		e.ResourceVersion = rv
		return e
	}
	created := at("mine", "20")
	other := at("other", "19")
	older := at("older", "12")
	older.Reason = "Failed" // not isomorphic
	later := at("later", "25")
	stale := at("stale", "5")
	stale.LastTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	if got := StoredBefore([]*corev1.Event{later, created, older, other, stale}, created, eventapi.CoreV1, now, 10*time.Minute); got != other {
		t.Fatalf("got %v, want other", got)
	}
	if got := StoredBefore([]*corev1.Event{later, created}, created, eventapi.CoreV1, now, 10*time.Minute); got != nil {
		t.Fatalf("got %s stored after", got.Name)
	}
}
