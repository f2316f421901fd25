package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// unknownEnvelope is the envelope as runtime.Unknown's own Marshal makes
// it: what protobufEnvelope must produce byte for byte.
func unknownEnvelope(t *testing.T, obj any) []byte {
	t.Helper()
	raw, err := obj.(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.(interface{ GetObjectKind() schema.ObjectKind }).GetObjectKind().GroupVersionKind()
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{}, protobufMagic...), b...)
}

// TestProtobufEnvelopeIsUnknowns checks that protobufEnvelope, which
// encodes the object in place, gives the bytes of encoding it and then
// wrapping it in a runtime.Unknown, for every kind of object it answers
// with and for sizes whose length prefixes take one, two and three
// bytes.
func TestProtobufEnvelopeIsUnknowns(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	micro := metav1.NewMicroTime(now.Time)
	full := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "default", UID: "u-1", ResourceVersion: "42",
			CreationTimestamp: now, Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:count":{}}`)}}}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "p-1", APIVersion: "v1"},
		Reason:         "Pulled", Message: "pulled", Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: now, LastTimestamp: now, Count: 3, Type: "Normal", EventTime: micro,
		Series: &corev1.EventSeries{Count: 2, LastObservedTime: micro}, Action: "Pull",
		Related: &corev1.ObjectReference{Kind: "Node", Name: "node-1"}, ReportingController: "kubelet", ReportingInstance: "node-1",
	}
	objs := map[string]any{
		"core event":         externalEvent(eventapi.CoreV1, full),
		"events.k8s.io":      externalEvent(eventapi.EventsV1, full),
		"empty event":        externalEvent(eventapi.CoreV1, &corev1.Event{}),
		"core list":          externalList(eventapi.CoreV1, []*corev1.Event{full, full}, metav1.ListMeta{ResourceVersion: "7", Continue: "x"}),
		"events.k8s.io list": externalList(eventapi.EventsV1, []*corev1.Event{full}, metav1.ListMeta{}),
		"metadata":           partialMeta(full, "v1"),
		"status":             statusOf(apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, "x")),
		"events.k8s.io kind": &eventsv1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}},
	}
	// Messages of 100 B, 20 KB and 3 MB: the object's length prefix takes 1
	// (under 128 B with the rest empty), 2 and 3 bytes.
	for _, n := range []int{0, 100, 20_000, 3 << 20} {
		ev := &corev1.Event{Message: strings.Repeat("m", n)}
		objs[fmt.Sprintf("message of %d bytes", n)] = externalEvent(eventapi.CoreV1, ev)
	}
	for name, obj := range objs {
		got, err := protobufEnvelope(obj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := unknownEnvelope(t, obj); !bytes.Equal(got, want) {
			t.Errorf("%s: envelope differs from runtime.Unknown's:\n got %q\nwant %q", name, got, want)
		}
	}
	if _, err := protobufEnvelope(&metav1.Table{}); err == nil {
		t.Error("a Table got a protobuf envelope; it has no protobuf form")
	}
}

// statusOf is the Status an error is answered with, with its kind.
func statusOf(se *apierrors.StatusError) *metav1.Status {
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return &st
}
