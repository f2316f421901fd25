package index

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
)

// TestMemoryNames churns a Memory's names through its arena: short names,
// names of 128 bytes and more (two-byte lengths) and one longer than a
// block; deletions that empty blocks (dropped, their numbers reused) and
// that leave a survivor in each block (holes, until the arena is copied).
// After each step the keys are exactly the live ones and the arena's
// accounting is true.
func TestMemoryNames(t *testing.T) {
	m := NewMemory(All())
	live := map[string]bool{}
	rev := int64(0)
	name := func(i int) string {
		switch {
		case i == 7:
			return strings.Repeat("x", nameBlock+100) // a block of its own
		case i%3 == 0:
			return fmt.Sprintf("pod-%d.%s", i, strings.Repeat("a", 150)) // a two-byte length
		}
		return fmt.Sprintf("pod-%d.%x", i, i*7919)
	}
	put := func(i int) {
		rev++
		key := fmt.Sprintf("ns-%d/%s", i%3, name(i))
		m.Put(event(key, func(ev *corev1.Event) { ev.Reason = "R" }), rev)
		live[key] = true
	}
	del := func(i int) {
		rev++
		key := fmt.Sprintf("ns-%d/%s", i%3, name(i))
		deleteKey(m, key, rev)
		delete(live, key)
	}
	verify := func(step string) {
		t.Helper()
		if err := m.check(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		keys, _, err := m.Keys(m.Set().Plan(storage.Selector{}), 0, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]string, 0, len(live))
		for k := range live {
			want = append(want, k)
		}
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Fatalf("%s: %d keys, want %d", step, len(keys), len(want))
		}
	}

	const n = 20000 // about 1.5 MB of names: 24 blocks
	for i := range n {
		put(i)
	}
	verify("filled")
	size := m.obj.names.size
	for i := range n / 2 { // the first half: whole blocks are emptied
		del(i)
	}
	verify("first half deleted")
	if m.obj.names.size >= size*3/4 || len(m.obj.names.free) == 0 {
		t.Errorf("after deleting the first half: %d of %d bytes held, %d blocks free", m.obj.names.size, size, len(m.obj.names.free))
	}
	for i := range n / 2 { // reuses the dropped blocks
		put(n + i)
	}
	verify("refilled")
	before := m.obj.names
	for i := n / 2; i < 2*n; i++ { // all but one in 50: every block keeps a few names
		if i%50 != 0 {
			del(i)
		}
	}
	verify("thinned")
	if a := m.obj.names; a.size > 2*a.inUse+5*nameBlock || len(a.blocks) >= len(before.blocks) && a.size == before.size {
		t.Errorf("after thinning: %d bytes held for %d in use (%d blocks, %d before): not compacted", a.size, a.inUse, len(a.blocks), len(before.blocks))
	}
	for i := n / 2; i < 2*n; i += 50 {
		del(i)
	}
	verify("emptied")
	if a := m.obj.names; a.inUse != 0 || a.size > nameBlock {
		t.Errorf("empty index: %d bytes held, %d in use", a.size, a.inUse)
	}
}
