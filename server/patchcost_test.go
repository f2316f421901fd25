package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// ownerRefs are n owner references with uids prefix-0 ... prefix-(n-1).
func ownerRefs(n int, prefix string) []metav1.OwnerReference {
	refs := make([]metav1.OwnerReference, n)
	for i := range refs {
		refs[i] = metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return refs
}

// TestStrategicMergePatchCostIsBounded: a user who may patch one event
// makes it hold 3,000 ownerReferences, then strategic-merge-patches 3,000
// others into them. apimachinery's merge compares every pair (18M pairs:
// tens of CPU-seconds under the race detector, which the request timeout
// cannot stop); eventsd refuses it with 413 naming the list, at a bounded
// CPU cost, and the event is unchanged.
func TestStrategicMergePatchCostIsBounded(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	events := e.cs.CoreV1().Events("default")
	grow, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": ownerRefs(3000, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	// A merge patch replaces the list: linear, allowed.
	grown, err := events.Patch(e.ctx, "a", types.MergePatchType, grow, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bomb, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": ownerRefs(3000, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := processCPU(t)
	_, err = events.Patch(e.ctx, "a", types.StrategicMergePatchType, bomb, metav1.PatchOptions{})
	cpu := processCPU(t) - cpu0
	if err == nil || !strings.Contains(err.Error(), "the strategic merge patch would compare 18000000 pairs of list items (3000 items merged into the 3000 of metadata.ownerReferences), more than the 1048576 allowed") {
		t.Fatalf("costly strategic merge patch: %v, want 413 naming the list", err)
	}
	// Decoding, encoding and checking the 0.3 MB documents a few times
	// over; the merge itself would take tens of seconds.
	if cpu > 5*time.Second {
		t.Fatalf("refusing the patch took %v of CPU, want a bounded cost", cpu)
	}
	t.Logf("refused after %v of CPU", cpu)
	got, err := events.Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != grown.ResourceVersion || len(got.OwnerReferences) != 3000 {
		t.Fatalf("the refused patch changed the event: rv %s → %s, %d ownerReferences", grown.ResourceVersion, got.ResourceVersion, len(got.OwnerReferences))
	}
}

// TestStrategicMergePatchResults: patches within the bound give exactly
// what apimachinery's StrategicMergePatch gives, directives and large
// integers included.
func TestStrategicMergePatchResults(t *testing.T) {
	e := newEnv(t, time.Hour)
	base := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", OwnerReferences: ownerRefs(3, "o"), Finalizers: []string{"x/a", "x/b"},
			Labels: map[string]string{"keep": "1", "drop": "2"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
		Reason:         "Started", Message: "m", Type: corev1.EventTypeNormal, Count: 2147483647,
	}
	for i, patch := range []string{
		`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"new","uid":"o-new"}]}}`,
		`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"o-1"}]}}`,
		`{"metadata":{"$setElementOrder/ownerReferences":[{"uid":"o-2"},{"uid":"o-0"},{"uid":"o-1"}]}}`,
		`{"metadata":{"finalizers":["x/c"],"$deleteFromPrimitiveList/finalizers":["x/a"]}}`,
		`{"metadata":{"labels":{"drop":null,"add":"3"}},"count":2147483646,"message":"n"}`,
		`{"metadata":{"ownerReferences":[{"$patch":"replace"},{"apiVersion":"v1","kind":"Pod","name":"only","uid":"o-only"}]}}`,
	} {
		name := fmt.Sprintf("b%d", i)
		ev := base.DeepCopy()
		ev.Name = name
		created, err := e.cs.CoreV1().Events("default").Create(e.ctx, ev, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur, err := json.Marshal(created)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, err := strategicpatch.StrategicMergePatch(cur, []byte(patch), corev1.Event{})
		if err != nil {
			t.Fatalf("patch %d: %v", i, err)
		}
		var want corev1.Event
		if err := json.Unmarshal(wantJSON, &want); err != nil {
			t.Fatal(err)
		}
		got, err := e.cs.CoreV1().Events("default").Patch(e.ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("patch %d %s: %v", i, patch, err)
		}
		want.ResourceVersion, want.ManagedFields, got.ManagedFields = got.ResourceVersion, nil, nil
		if g, w := mustJSON(t, got), mustJSON(t, &want); g != w {
			t.Errorf("patch %d %s:\n got %s\nwant %s", i, patch, g, w)
		}
	}
	// Not an object: 400.
	if code, body := e.do(http.MethodPatch, "/api/v1/namespaces/default/events/b0", string(types.StrategicMergePatchType), "", `[1]`); code != http.StatusBadRequest ||
		!strings.Contains(body, "invalid strategic merge patch") {
		t.Fatalf("array patch: %d %s, want 400", code, body)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJSONPatchArrayCostIsBounded: 4,000 moves within a list of 3,000
// ownerReferences (json-patch shifts the list at each: seconds of CPU)
// are refused with 413 before any is applied; a few array operations on
// the same event are applied.
func TestJSONPatchArrayCostIsBounded(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	events := e.cs.CoreV1().Events("default")
	grow, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": ownerRefs(3000, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	grown, err := events.Patch(e.ctx, "a", types.MergePatchType, grow, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]string, 4000)
	for i := range ops {
		ops[i] = `{"op":"move","from":"/metadata/ownerReferences/0","path":"/metadata/ownerReferences/-"}`
	}
	cpu0 := processCPU(t)
	_, err = events.Patch(e.ctx, "a", types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{})
	cpu := processCPU(t) - cpu0
	if err == nil || !strings.Contains(err.Error(), "the JSON patch has 4000 operations on array items and the longest array of the event has 3000 items: they would move up to 28000000 items, more than the 16777216 allowed") {
		t.Fatalf("costly JSON patch: %v, want 413", err)
	}
	if cpu > 5*time.Second {
		t.Fatalf("refusing the patch took %v of CPU, want a bounded cost", cpu)
	}
	got, err := events.Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != grown.ResourceVersion {
		t.Fatalf("the refused patch changed the event: rv %s → %s", grown.ResourceVersion, got.ResourceVersion)
	}
	got, err = events.Patch(e.ctx, "a", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences/0"},{"op":"move","from":"/metadata/ownerReferences/0","path":"/metadata/ownerReferences/-"}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, first, last := len(got.OwnerReferences), got.OwnerReferences[0].UID, got.OwnerReferences[2998].UID; n != 2999 || first != "a-2" || last != "a-1" {
		t.Fatalf("after removing the first reference and moving the next to the end: %d references, first %s, last %s", n, first, last)
	}
}
