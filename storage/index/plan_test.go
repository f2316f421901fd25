package index

import (
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
)

func eq(f eventapi.Field, v string) eventapi.Requirement {
	return eventapi.Requirement{Field: f, Value: v}
}

func ne(f eventapi.Field, v string) eventapi.Requirement {
	return eventapi.Requirement{Field: f, Value: v, Negate: true}
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		name string
		set  Set
		sel  storage.Selector
		want Plan
	}{
		{"everything", Base(), storage.Selector{}, Plan{}},
		{"namespace", Base(), storage.Selector{Namespace: "a"}, Plan{Namespace: "a"}},
		{"namespace field", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldNamespace, "a")}}, Plan{Namespace: "a"}},
		{"same namespace twice", Base(), storage.Selector{Namespace: "a", Fields: eventapi.FieldSelector{eq(eventapi.FieldNamespace, "a")}}, Plan{Namespace: "a"}},
		{"two namespaces", Base(), storage.Selector{Namespace: "a", Fields: eventapi.FieldSelector{eq(eventapi.FieldNamespace, "b")}}, Plan{None: true}},
		{"name in namespace", Base(), storage.Selector{Namespace: "a", Fields: eventapi.FieldSelector{eq(eventapi.FieldName, "e"), eq(eventapi.FieldReason, "r")}},
			Plan{Namespace: "a", Name: "e"}},
		{"empty name", Base(), storage.Selector{Namespace: "a", Fields: eventapi.FieldSelector{eq(eventapi.FieldName, "")}}, Plan{None: true}},
		{"name without namespace", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldName, "e")}}, Plan{}},
		{"uid", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvedUID, "u1")}},
			Plan{Lookups: []Lookup{{InvolvedUID, "u1"}}}},
		{"regarding kind+namespace+name", Base(), storage.Selector{Namespace: "a", Fields: eventapi.FieldSelector{
			eq(eventapi.FieldInvolvedKind, "Pod"), eq(eventapi.FieldInvolvedNamespace, "a"), eq(eventapi.FieldInvolvedName, "p")}},
			Plan{Namespace: "a", Lookups: []Lookup{{InvolvedName, "p"}}}},
		{"most selective wins", Base(), storage.Selector{Fields: eventapi.FieldSelector{
			eq(eventapi.FieldType, "Warning"), eq(eventapi.FieldReason, "BackOff"), eq(eventapi.FieldRelatedName, "n")}},
			Plan{Lookups: []Lookup{{RelatedName, "n"}}}},
		{"negation is not a lookup", Base(), storage.Selector{Fields: eventapi.FieldSelector{ne(eventapi.FieldReason, "r"), eq(eventapi.FieldType, "Normal")}},
			Plan{Lookups: []Lookup{{Type, "Normal"}}}},
		{"empty value is not indexed", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldReportingComponent, ""), eq(eventapi.FieldType, "Normal")}},
			Plan{Lookups: []Lookup{{Type, "Normal"}}}},
		{"only empty value", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldReportingComponent, "")}}, Plan{}},
		{"unindexed field", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvedKind, "Pod")}}, Plan{}},
		{"involves.uid", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvesUID, "u1")}},
			Plan{Lookups: []Lookup{{InvolvedUID, "u1"}, {RelatedUID, "u1"}}}},
		{"involves.name", Base(), storage.Selector{Namespace: "a", Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvesName, "p"), eq(eventapi.FieldInvolvesKind, "Pod")}},
			Plan{Namespace: "a", Lookups: []Lookup{{InvolvedName, "p"}, {RelatedName, "p"}}}},
		{"involves.uid beats reason", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldReason, "r"), eq(eventapi.FieldInvolvesUID, "u1")}},
			Plan{Lookups: []Lookup{{InvolvedUID, "u1"}, {RelatedUID, "u1"}}}},
		{"involves.uid beats involves.name", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvesName, "p"), eq(eventapi.FieldInvolvesUID, "u1")}},
			Plan{Lookups: []Lookup{{InvolvedUID, "u1"}, {RelatedUID, "u1"}}}},
		{"related.uid ties involves.uid and wins", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvesUID, "u1"), eq(eventapi.FieldRelatedUID, "u2")}},
			Plan{Lookups: []Lookup{{RelatedUID, "u2"}}}},
		{"uid beats involves.uid", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvesUID, "u1"), eq(eventapi.FieldInvolvedUID, "u2")}},
			Plan{Lookups: []Lookup{{InvolvedUID, "u2"}}}},
		{"reportingInstance unindexed in Base", Base(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldReportingInstance, "node-1")}}, Plan{}},
		{"reportingInstance in All", All(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldReportingInstance, "node-1"), eq(eventapi.FieldType, "Normal")}},
			Plan{Lookups: []Lookup{{ReportingInstance, "node-1"}}}},
		{"action in All", All(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldAction, "Binding"), eq(eventapi.FieldSource, "s")}},
			Plan{Lookups: []Lookup{{Action, "Binding"}}}},
		{"reason beats action", All(), storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldAction, "Binding"), eq(eventapi.FieldReason, "Scheduled")}},
			Plan{Lookups: []Lookup{{Reason, "Scheduled"}}}},
		{"involves needs both indexes", Set{ids: []ID{InvolvedUID, Type}}, storage.Selector{Fields: eventapi.FieldSelector{eq(eventapi.FieldInvolvesUID, "u1")}}, Plan{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, c.set.Plan(c.sel), cmpopts.EquateComparable(storage.Clusters{})); d != "" {
				t.Errorf("Plan (-want +got):\n%s", d)
			}
		})
	}
}

func TestIDsAreStable(t *testing.T) {
	// pebblestore's on-disk keys hold these bytes: they must never change.
	want := map[ID]eventapi.Field{
		'u': eventapi.FieldInvolvedUID, 'U': eventapi.FieldRelatedUID,
		'n': eventapi.FieldInvolvedName, 'N': eventapi.FieldRelatedName,
		'r': eventapi.FieldReason, 'c': eventapi.FieldReportingComponent,
		's': eventapi.FieldSource, 't': eventapi.FieldType,
		'l': "", // LastObserved: no field
	}
	got := map[ID]eventapi.Field{}
	for _, id := range Base().IDs() {
		got[id] = id.Field()
	}
	if LastObserved.String() != "lastObserved" {
		t.Errorf("LastObserved.String() = %q", LastObserved.String())
	}
	if d := cmp.Diff(want, got, cmpopts.EquateComparable(storage.Clusters{})); d != "" {
		t.Errorf("Base (-want +got):\n%s", d)
	}
	seen := map[ID]bool{}
	for _, id := range All().IDs() {
		if id.Field() == "" && id != LastObserved || seen[id] {
			t.Errorf("All has unknown or repeated index %v", id)
		}
		seen[id] = true
	}
	for id := range maps.Keys(want) {
		if !seen[id] && id != LastObserved {
			t.Errorf("All lacks Base's index %v", id)
		}
	}
}

func TestEntries(t *testing.T) {
	ev := &corev1.Event{
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Name: "p", UID: "u1"},
		Related:             &corev1.ObjectReference{Kind: "Node", Name: "n1"},
		Reason:              "Pulled",
		Type:                "Normal",
		ReportingController: "kubelet",
		ReportingInstance:   "node-1",
	}
	got := map[ID]string{}
	for id, v := range All().Entries(ev) {
		got[id] = v
	}
	want := map[ID]string{InvolvedUID: "u1", InvolvedName: "p", RelatedName: "n1", Reason: "Pulled", Type: "Normal",
		ReportingComponent: "kubelet", Source: "kubelet", ReportingInstance: "node-1", LastObserved: Bucket(time.Time{})}
	if d := cmp.Diff(want, got, cmpopts.EquateComparable(storage.Clusters{})); d != "" {
		t.Errorf("Entries (-want +got):\n%s", d)
	}
	n := 0
	for range Base().Entries(ev) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("Entries did not stop when asked")
	}
}
