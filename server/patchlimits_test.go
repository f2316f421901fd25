package server_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// jsonPatchBomb adds a value of size bytes and copies it onto itself n
// times: each copy doubles it.
func jsonPatchBomb(size, n int) []byte {
	ops := []string{fmt.Sprintf(`{"op":"add","path":"/bomb","value":[%q]}`, strings.Repeat("a", size))}
	for range n {
		ops = append(ops, `{"op":"copy","from":"/bomb","path":"/bomb/-"}`)
	}
	return []byte("[" + strings.Join(ops, ",") + "]")
}

// TestJSONPatchBombIsRefused: a JSON patch that copies a value onto itself
// until it would be 512 MiB is refused with kube-apiserver's 422 naming the
// copy limit (3 MiB), after allocating a bounded amount, and changes
// nothing; a patch of more than 10000 operations gets 413.
func TestJSONPatchBombIsRefused(t *testing.T) {
	e := newEnv(t, time.Hour)
	created := e.create("a")
	events := e.cs.CoreV1().Events("default")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := events.Patch(e.ctx, "a", types.JSONPatchType, jsonPatchBomb(512, 20), metav1.PatchOptions{})
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "exceeding the limit 3145728") {
		t.Fatalf("patch bomb: %v, want 422 naming the copy limit", err)
	}
	// The whole bomb would be 512 MiB; what the server may allocate
	// before refusing it is a few copies of the 3 MiB bound.
	const allocBound = 128 << 20
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allocBound {
		t.Fatalf("refusing the patch bomb allocated %d MiB, want at most %d MiB", alloc>>20, allocBound>>20)
	}
	t.Logf("patch bomb refused after %v", took)

	ops := make([]string, 10001)
	for i := range ops {
		ops[i] = `{"op":"test","path":"/reason","value":"Started"}`
	}
	_, err = events.Patch(e.ctx, "a", types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) || !strings.Contains(err.Error(), "The allowed maximum operations in a JSON patch is 10000, got 10001") {
		t.Fatalf("10001 operations: %v, want 413 naming the limit", err)
	}

	got, err := events.Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("refused patches changed the event: resourceVersion %s → %s", created.ResourceVersion, got.ResourceVersion)
	}
}
