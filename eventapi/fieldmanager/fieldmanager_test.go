package fieldmanager_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventapi/fieldmanager"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func newManager(t testing.TB) *fieldmanager.Manager {
	t.Helper()
	m, err := fieldmanager.New()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// legacyEvent is what client-go's record package creates.
func legacyEvent(name string) *corev1.Event {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "uid-" + types.UID(name)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", UID: "u1", APIVersion: "v1"},
		Reason:         "Started", Message: "started", Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}}
	eventapi.SetCoreTypeMeta(ev)
	return ev
}

// fieldsOf is an entry's fieldsV1 as JSON.
func fieldsOf(t *testing.T, e metav1.ManagedFieldsEntry) map[string]any {
	t.Helper()
	var m map[string]any
	if e.FieldsV1 == nil || json.Unmarshal(e.FieldsV1.Raw, &m) != nil {
		t.Fatalf("entry %+v has no fieldsV1", e)
	}
	return m
}

// keys are the top-level keys of a fieldsV1 set, sorted.
func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestUpdateRecordsManagers: a create records its manager's fields
// (operation Update, the API version written through, the time); a
// later write through the other group by another manager takes the
// fields it changed, in its own version, leaving the rest to the first;
// a write that changes nothing adds no entry; clearing managedFields
// with [] drops them, and a later update then records none.
func TestUpdateRecordsManagers(t *testing.T) {
	m := newManager(t)
	before := time.Now().Add(-time.Second)
	created := m.Update(eventapi.CoreV1, nil, legacyEvent("a"), "kubectl-create")
	if len(created.ManagedFields) != 1 {
		t.Fatalf("create: managedFields %+v, want one entry", created.ManagedFields)
	}
	e := created.ManagedFields[0]
	if e.Manager != "kubectl-create" || e.Operation != metav1.ManagedFieldsOperationUpdate || e.APIVersion != "v1" ||
		e.FieldsType != "FieldsV1" || e.Time == nil || e.Time.Time.Before(before) || e.Time.Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("create's entry: %+v", e)
	}
	got := keys(fieldsOf(t, e))
	want := []string{"f:count", "f:firstTimestamp", "f:involvedObject", "f:lastTimestamp", "f:message", "f:reason", "f:source", "f:type"}
	if !slices.Equal(got, want) {
		t.Fatalf("create's fields %v, want %v", got, want)
	}
	if src := fieldsOf(t, e)["f:source"].(map[string]any); !slices.Equal(keys(src), []string{"f:component", "f:host"}) {
		t.Fatalf("create's source fields %v", src)
	}

	// A patch through events.k8s.io/v1 by another manager.
	patched := created.DeepCopy()
	patched.Message, patched.Count = "again", 2
	patched = m.Update(eventapi.EventsV1, created, patched, "kubectl-patch")
	if len(patched.ManagedFields) != 2 {
		t.Fatalf("after the patch: %+v, want two entries", patched.ManagedFields)
	}
	first, second := patched.ManagedFields[0], patched.ManagedFields[1]
	if first.Manager != "kubectl-create" || slices.Contains(keys(fieldsOf(t, first)), "f:message") || slices.Contains(keys(fieldsOf(t, first)), "f:count") {
		t.Errorf("the creator's entry after the patch: %s", first.FieldsV1.Raw)
	}
	if second.Manager != "kubectl-patch" || second.APIVersion != "events.k8s.io/v1" ||
		!slices.Equal(keys(fieldsOf(t, second)), []string{"f:deprecatedCount", "f:note"}) {
		t.Errorf("the patcher's entry: %+v %s", second, second.FieldsV1.Raw)
	}

	// A write that changes nothing.
	same := m.Update(eventapi.CoreV1, patched, patched.DeepCopy(), "other")
	if len(same.ManagedFields) != 2 {
		t.Errorf("a write changing nothing: %+v, want the two entries unchanged", same.ManagedFields)
	}

	// Resetting: managedFields [] drops them; an event without any keeps
	// none on update, as kube-apiserver does.
	reset := patched.DeepCopy()
	reset.ManagedFields = []metav1.ManagedFieldsEntry{}
	reset = m.Update(eventapi.CoreV1, patched, reset, "kubectl-patch")
	if reset.ManagedFields != nil {
		t.Fatalf("reset: %+v, want none", reset.ManagedFields)
	}
	later := reset.DeepCopy()
	later.Message = "later"
	if later = m.Update(eventapi.CoreV1, reset, later, "kubectl-edit"); later.ManagedFields != nil {
		t.Errorf("an update of an event without managed fields: %+v, want none", later.ManagedFields)
	}

	// A client that sends none keeps the live ones.
	dropped := patched.DeepCopy()
	dropped.ManagedFields = nil
	dropped.Reason = "Again"
	dropped = m.Update(eventapi.CoreV1, patched, dropped, "client")
	if len(dropped.ManagedFields) != 3 || !slices.ContainsFunc(dropped.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "client" }) {
		t.Errorf("an update without managedFields: %+v, want the live ones and the client's", dropped.ManagedFields)
	}
}

// TestApplyConflicts: a server-side apply owns what it sets; another
// manager's apply of a different value conflicts (kube-apiserver's 409
// with the field and its owner), unless forced, which moves ownership.
func TestApplyConflicts(t *testing.T) {
	m := newManager(t)
	cfg := func(note string) map[string]any {
		return map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event",
			"metadata":  map[string]any{"name": "a", "namespace": "default"},
			"eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "ctrl", "reportingInstance": "ctrl-1",
			"action": "Start", "reason": "Started", "type": "Normal", "note": note,
			"regarding": map[string]any{"kind": "Pod", "name": "web", "namespace": "default"}}
	}
	ev, err := m.Apply(eventapi.EventsV1, nil, cfg("one"), "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Message != "one" || len(ev.ManagedFields) != 1 || ev.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("first apply: %+v", ev)
	}
	ev.ResourceVersion, ev.UID = "5", "uid-a"
	_, err = m.Apply(eventapi.EventsV1, ev, cfg("two"), "bob", false)
	if err == nil || !isConflict(err, ".note", "alice") {
		t.Fatalf("bob's apply of another note: %v, want a conflict on .note with alice", err)
	}
	forced, err := m.Apply(eventapi.EventsV1, ev, cfg("two"), "bob", true)
	if err != nil || forced.Message != "two" {
		t.Fatalf("bob's forced apply: %+v %v", forced, err)
	}
	// A configuration of the other version is refused.
	core := cfg("x")
	core["apiVersion"] = "v1"
	if _, err := m.Apply(eventapi.EventsV1, ev, core, "bob", false); err == nil {
		t.Error("an apply of a core/v1 configuration through events.k8s.io/v1 succeeded")
	}
}

func isConflict(err error, field, manager string) bool {
	type status interface{ Status() metav1.Status }
	s, ok := err.(status)
	if !ok {
		return false
	}
	st := s.Status()
	if st.Code != 409 || st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == field && c.Type == metav1.CauseTypeFieldManagerConflict && contains(c.Message, manager) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestManagerName: the fieldManager when given, else the User-Agent's
// product without non-printable characters, at most 128 bytes.
func TestManagerName(t *testing.T) {
	long := ""
	for range 200 {
		long += "x"
	}
	for _, c := range []struct{ fm, ua, want string }{
		{"mine", "kubectl/v1.32.4 (linux/amd64) kubernetes/abc", "mine"},
		{"", "kubectl/v1.32.4 (linux/amd64) kubernetes/abc", "kubectl"},
		{"", "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:x", "kube-controller-manager"},
		{"", "a\tb\x00c/1", "abc"},
		{"", long + "/1", long[:128]},
		{"", "", ""},
	} {
		if got := fieldmanager.ManagerName(c.fm, c.ua); got != c.want {
			t.Errorf("ManagerName(%q, %q) = %q, want %q", c.fm, c.ua, got, c.want)
		}
	}
}

// TestCreateCacheMatchesFieldManager: a create served from the cache of
// field sets by shape gets exactly the entry the field manager gives
// the same event (but for the time), for random events of either
// version, so the cheap path never changes what is recorded.
func TestCreateCacheMatchesFieldManager(t *testing.T) {
	cached := newManager(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		v := eventapi.CoreV1
		if rng.IntN(2) == 1 {
			v = eventapi.EventsV1
		}
		ev := randomEvent(rng)
		// Warm the cache with another event of the same shape, then
		// compare its answer for ev with a fresh field manager's.
		warm := ev.DeepCopy()
		warm.Name, warm.Message = warm.Name+"-warm", warm.Message+warm.Message
		cached.Update(v, nil, warm, "m")
		got := cached.Update(v, nil, ev.DeepCopy(), "m").ManagedFields
		want := newManager(t).Update(v, nil, ev.DeepCopy(), "m").ManagedFields
		for _, l := range [][]metav1.ManagedFieldsEntry{got, want} {
			for i := range l {
				l[i].Time = nil
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %d (%s): cached %+v, field manager %+v", i, v, got, want)
		}
	}
}

func randomEvent(rng *rand.Rand) *corev1.Event {
	maybe := func(s string) string {
		if rng.IntN(2) == 0 {
			return ""
		}
		return s
	}
	t := func() metav1.Time {
		if rng.IntN(2) == 0 {
			return metav1.Time{}
		}
		return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, rng.IntN(60), 0, time.UTC))
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default", GenerateName: maybe("e-")},
		InvolvedObject: corev1.ObjectReference{Kind: maybe("Pod"), Name: maybe("web"), Namespace: "default"},
		Reason:         maybe("Started"), Message: maybe("m"), Type: maybe("Normal"), Count: int32(rng.IntN(2)),
		FirstTimestamp: t(), LastTimestamp: t(), Source: corev1.EventSource{Component: maybe("kubelet"), Host: maybe("n1")},
		Action: maybe("Start"), ReportingController: maybe("ctrl"), ReportingInstance: maybe("ctrl-1")}
	if rng.IntN(2) == 0 {
		ev.EventTime = metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 0, 0, rng.IntN(1e9), time.UTC))
	}
	if rng.IntN(3) == 0 {
		ev.Series = &corev1.EventSeries{Count: int32(rng.IntN(3))}
		if rng.IntN(2) == 0 {
			ev.Series.LastObservedTime = metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
		}
	}
	if rng.IntN(3) == 0 {
		ev.Related = &corev1.ObjectReference{Kind: maybe("Node"), Name: maybe("n1")}
	}
	eventapi.SetCoreTypeMeta(ev)
	return ev
}

// TestShapeCoversEveryField fails when k8s.io/api gives Event or
// ObjectMeta a field the create cache's shape does not account for: its
// shapes would then no longer decide the field set.
func TestShapeCoversEveryField(t *testing.T) {
	known := map[reflect.Type][]string{
		reflect.TypeFor[corev1.Event](): {"TypeMeta", "ObjectMeta", "InvolvedObject", "Reason", "Message", "Source", "FirstTimestamp",
			"LastTimestamp", "Count", "Type", "EventTime", "Series", "Action", "Related", "ReportingController", "ReportingInstance"},
		reflect.TypeFor[metav1.ObjectMeta](): {"Name", "GenerateName", "Namespace", "SelfLink", "UID", "ResourceVersion", "Generation",
			"CreationTimestamp", "DeletionTimestamp", "DeletionGracePeriodSeconds", "Labels", "Annotations", "OwnerReferences",
			"Finalizers", "ManagedFields"},
		reflect.TypeFor[corev1.EventSource](): {"Component", "Host"},
		reflect.TypeFor[corev1.EventSeries](): {"Count", "LastObservedTime"},
	}
	for typ, fields := range known {
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%v has fields %v; the create cache's shape knows %v", typ, got, fields)
		}
	}
}

// BenchmarkCreate measures the managedFields of a legacy recorder's
// create: through the field manager (a new shape each time: kube-apiserver's
// cost) and from the create cache (the shape seen before).
func BenchmarkCreate(b *testing.B) {
	ev := legacyEvent("bench")
	ev.UID = ""
	b.Run("fieldmanager", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			m := newManager(b)
			e := *ev
			b.StartTimer()
			m.Update(eventapi.CoreV1, nil, &e, "kubelet")
		}
	})
	b.Run("cached", func(b *testing.B) {
		m := newManager(b)
		e := *ev
		m.Update(eventapi.CoreV1, nil, &e, "kubelet")
		b.ReportAllocs()
		for b.Loop() {
			e := *ev
			m.Update(eventapi.CoreV1, nil, &e, "kubelet")
		}
	})
}
