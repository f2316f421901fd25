package server_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSelfLinkNotStored: metadata.selfLink sent by a client is neither
// stored nor echoed, on create and on update, as kube-apiserver's storage
// drops it (on the etcd backend, a stored selfLink would also make the
// values differ from kube-apiserver's for the same event).
func TestSelfLinkNotStored(t *testing.T) {
	e := newEnv(t, time.Hour)
	events := e.cs.CoreV1().Events("default")
	in := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "linked", SelfLink: "/api/v1/namespaces/default/events/linked"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
		Reason:         "Started", Message: "started", Type: corev1.EventTypeNormal, Count: 1,
	}
	created, err := events.Create(e.ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.SelfLink != "" {
		t.Fatalf("create echoed selfLink %q", created.SelfLink)
	}
	created.SelfLink = "/somewhere/else"
	created.Count = 2
	updated, err := events.Update(e.ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.SelfLink != "" {
		t.Fatalf("update echoed selfLink %q", updated.SelfLink)
	}
	got, err := events.Get(e.ctx, "linked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.SelfLink != "" {
		t.Fatalf("stored selfLink %q", got.SelfLink)
	}
}
