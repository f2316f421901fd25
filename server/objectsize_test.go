package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubevents/kubevents/server"
)

// TestObjectSizeLimit: creates, updates (including PUT creating) and
// patches whose result is over the object size limit (etcd's 1.5 MiB)
// get 413 naming the limit, and nothing is stored; just under it is fine.
func TestObjectSizeLimit(t *testing.T) {
	e := newEnv(t, time.Hour)
	events := e.cs.CoreV1().Events("default")
	big := strings.Repeat("m", server.DefaultMaxObjectSizeBytes)
	limitMsg := fmt.Sprintf("over the object size limit of %d bytes", server.DefaultMaxObjectSizeBytes)
	tooLarge := func(what string, err error) {
		t.Helper()
		if !apierrors.IsRequestEntityTooLargeError(err) || !strings.Contains(err.Error(), limitMsg) {
			t.Fatalf("%s: %v, want 413 naming the object size limit", what, err)
		}
	}
	newEvent := func(name, message string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason:         "Started", Message: message, Type: corev1.EventTypeNormal}
	}

	_, err := events.Create(e.ctx, newEvent("big", big), metav1.CreateOptions{})
	tooLarge("create", err)
	_, err = events.Update(e.ctx, newEvent("big", big), metav1.UpdateOptions{})
	tooLarge("PUT creating", err)
	if _, err := events.Get(e.ctx, "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after refused writes: %v, want 404", err)
	}

	created := e.create("a")
	upd := created.DeepCopy()
	upd.Message = big
	_, err = events.Update(e.ctx, upd, metav1.UpdateOptions{})
	tooLarge("update", err)
	_, err = events.Patch(e.ctx, "a", types.MergePatchType, fmt.Appendf(nil, `{"message":%q}`, big), metav1.PatchOptions{})
	tooLarge("merge patch", err)
	_, err = events.Patch(e.ctx, "a", types.StrategicMergePatchType, fmt.Appendf(nil, `{"message":%q}`, big), metav1.PatchOptions{})
	tooLarge("strategic merge patch", err)
	_, err = events.Patch(e.ctx, "a", types.JSONPatchType, fmt.Appendf(nil, `[{"op":"replace","path":"/message","value":%q}]`, big), metav1.PatchOptions{})
	tooLarge("JSON patch", err)
	got, err := events.Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Message != created.Message {
		t.Fatalf("refused writes changed the event: resourceVersion %s → %s", created.ResourceVersion, got.ResourceVersion)
	}

	// 1 MiB is fine, as it is for kube-apiserver.
	if _, err := events.Create(e.ctx, newEvent("mib", strings.Repeat("m", 1<<20)), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a 1 MiB event: %v", err)
	}
}
