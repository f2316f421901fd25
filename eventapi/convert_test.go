package eventapi

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConversionRoundTrip(t *testing.T) {
	full := newEvent(func(e *corev1.Event) {
		e.Series = &corev1.EventSeries{Count: 3, LastObservedTime: t0}
		e.Related = &corev1.ObjectReference{Kind: "Node", Name: "n1"}
		e.Source = corev1.EventSource{Component: "c", Host: "h"}
		e.Count = 4
		e.FirstTimestamp = metav1.NewTime(t0.Time)
		e.LastTimestamp = metav1.NewTime(t0.Time)
		e.Labels = map[string]string{"a": "b"}
	})
	SetCoreTypeMeta(full)
	v1 := ToEventsV1(full)
	if v1.Regarding != full.InvolvedObject || v1.Note != full.Message || v1.DeprecatedSource != full.Source ||
		v1.DeprecatedCount != full.Count || v1.ReportingController != full.ReportingController || v1.Series.Count != 3 {
		t.Fatalf("field mapping wrong: %+v", v1)
	}
	back := FromEventsV1(v1)
	if d := cmp.Diff(full, back); d != "" {
		t.Fatalf("round trip changed the event (-want +got):\n%s", d)
	}
}

// TestJSONShapes checks the wire shapes of api-server.md §2.8: zero times
// are null, empty structs {}, and core's reporting fields always present.
func TestJSONShapes(t *testing.T) {
	legacy := legacyEvent()
	SetCoreTypeMeta(legacy)
	core, _ := json.Marshal(legacy)
	var m map[string]any
	_ = json.Unmarshal(core, &m)
	for k, want := range map[string]any{"eventTime": nil, "reportingComponent": "", "reportingInstance": "", "kind": "Event", "apiVersion": "v1"} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("core/v1 JSON %s = %#v (present %v), want %#v", k, got, ok, want)
		}
	}
	v1, _ := json.Marshal(ToEventsV1(legacy))
	m = nil
	_ = json.Unmarshal(v1, &m)
	for k, want := range map[string]any{"eventTime": nil, "reportingController": nil, "apiVersion": "events.k8s.io/v1", "note": "m"} {
		if got := m[k]; got != want {
			t.Errorf("events.k8s.io/v1 JSON %s = %#v, want %#v", k, got, want)
		}
	}
	if src, ok := m["deprecatedSource"].(map[string]any); !ok || src["component"] != "kubelet" {
		t.Errorf("deprecatedSource = %#v", m["deprecatedSource"])
	}
}
