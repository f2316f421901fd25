package export_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/export"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// TestRecordJSON: the JSON form names the key, the change and the event,
// and reads back.
func TestRecordJSON(t *testing.T) {
	ev := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.1", UID: "u1", ResourceVersion: "42"},
		Reason:     "BackOff", Count: 600, Type: corev1.EventTypeWarning}
	r := export.Record{Key: export.KeyOf(ev, 42), Type: watch.Modified, Revision: 42, Event: ev}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"idempotencyKey":"u1/42"`, `"type":"MODIFIED"`, `"resourceVersion":"42"`, `"kind":"Event"`, `"count":600`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back export.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Key != r.Key || back.Type != r.Type || back.Revision != 42 || back.Event.Count != 600 {
		t.Errorf("read back %+v", back)
	}
	if strings.Contains(string(b), `"cluster"`) {
		t.Errorf("a root cluster's record has a cluster field: %s", b)
	}
	r.Cluster = "east"
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"resourceVersion":"42","cluster":"east","event":`) {
		t.Errorf("east's record %s lacks its cluster", b)
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Cluster != "east" {
		t.Errorf("read back %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"resourceVersion":"x"}`), &back); err == nil {
		t.Error("a non-integer resourceVersion was accepted")
	}
}

// TestFilterMatches is a table of filters against changes.
func TestFilterMatches(t *testing.T) {
	no := false
	warning := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "prod"}, Type: corev1.EventTypeWarning, Reason: "BackOff", Source: corev1.EventSource{Component: "kubelet"}}
	for _, tc := range []struct {
		name    string
		f       export.Filter
		t       watch.EventType
		cluster string
		want    bool
	}{
		{"empty filter, create", export.Filter{}, watch.Added, "", true},
		{"empty filter, update", export.Filter{}, watch.Modified, "", true},
		{"empty filter, delete", export.Filter{}, watch.Deleted, "", false},
		{"deletions", export.Filter{Deletions: true}, watch.Deleted, "", true},
		{"no updates", export.Filter{Updates: &no}, watch.Modified, "", false},
		{"bookmark", export.Filter{}, watch.Bookmark, "", false},
		{"type", export.Filter{Criteria: eventapi.Criteria{Types: []string{"Normal"}}}, watch.Added, "", false},
		{"namespace", export.Filter{Criteria: eventapi.Criteria{Namespaces: []string{"prod"}}}, watch.Added, "", true},
		{"controller by source", export.Filter{Criteria: eventapi.Criteria{ReportingControllers: []string{"kubelet"}}}, watch.Added, "", true},
		{"reason", export.Filter{Criteria: eventapi.Criteria{Reasons: []string{"Pulled"}}}, watch.Added, "", false},
		{"any cluster, east", export.Filter{}, watch.Added, "east", true},
		{"east, east", export.Filter{Clusters: []string{"east"}}, watch.Added, "east", true},
		{"east, west", export.Filter{Clusters: []string{"east"}}, watch.Added, "west", false},
		{"east, root", export.Filter{Clusters: []string{"east"}}, watch.Added, "", false},
		{"root, root", export.Filter{Clusters: []string{""}}, watch.Added, "", true},
		{"root, east", export.Filter{Clusters: []string{""}}, watch.Added, "east", false},
		{"root or east, east", export.Filter{Clusters: []string{"", "east"}}, watch.Added, "east", true},
		{"east and namespace, east", export.Filter{Clusters: []string{"east"}, Criteria: eventapi.Criteria{Namespaces: []string{"prod"}}}, watch.Added, "east", true},
		{"east, east, deletion unwanted", export.Filter{Clusters: []string{"east"}}, watch.Deleted, "east", false},
	} {
		if got := tc.f.Matches(tc.t, tc.cluster, warning); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	f := export.Filter{Criteria: eventapi.Criteria{Types: []string{"Warn"}}}
	if errs := f.Validate(nil); len(errs) != 1 || !strings.Contains(errs[0].Error(), `types[0]: Unsupported value: "Warn"`) {
		t.Errorf("Validate = %v", errs)
	}
	f = export.Filter{Clusters: []string{"east", "East", "", "east"}}
	errs := f.Validate(field.NewPath("filter"))
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `filter.clusters[1]: Invalid value: "East"`) ||
		!strings.Contains(errs[1].Error(), `filter.clusters[3]: Duplicate value: "\"east\" (also [0])"`) {
		t.Errorf("Validate of clusters = %v", errs)
	}
}

// TestRecordWriteJSON: WriteJSON appends exactly MarshalJSON's bytes,
// escaping included, after what the buffer holds.
func TestRecordWriteJSON(t *testing.T) {
	full := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.1", UID: "u1", ResourceVersion: "42",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)),
			Labels:            map[string]string{"b": "2", "a": "1"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:count": {}, "f:message":{}}`)}}}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"},
		Reason:         "BackOff", Message: "<b>&\u2028 ünïcødé \"quoted\"\n", Count: 600, Type: corev1.EventTypeWarning,
		EventTime: metav1.NewMicroTime(time.Date(2026, 11, 24, 10, 0, 0, 123456000, time.UTC))}
	for _, r := range []export.Record{
		{Key: "u1/42", Type: watch.Modified, Revision: 42, Event: full},
		{Key: "u1/43", Type: watch.Modified, Revision: 43, Cluster: "east", Event: full},
		{Key: "u2/7", Type: watch.Deleted, Revision: 7, Event: &corev1.Event{}},
		{Key: "", Type: watch.Added, Revision: 0, Event: nil},
	} {
		want, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.WriteString("prefix,")
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != "prefix,"+string(want) {
			t.Errorf("WriteJSON:\n%s\nwant\nprefix,%s", got, want)
		}
	}
}
