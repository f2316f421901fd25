package index

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestMemoryNames churns a Memory's names and interned values (a uid per
// event) through their arenas: short names,
// names of 128 bytes and more (two-byte lengths) and one longer than a
// block; deletions that empty blocks (dropped, their numbers reused) and
// that leave a survivor in each block (holes, until the arena is copied).
// After each step the keys are exactly the live ones and the arena's
// accounting is true.
func TestMemoryNames(t *testing.T) {
	m := NewMemory(All())
	live := map[string]int{} // key: i
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
	uid := func(i int) types.UID { return types.UID(fmt.Sprintf("6c1d2f0e-3b7a-4c55-%012d", i)) }
	put := func(i int) {
		rev++
		key := fmt.Sprintf("ns-%d/%s", i%3, name(i))
		m.Put(event(key, func(ev *corev1.Event) { ev.Reason, ev.InvolvedObject.UID = "R", uid(i) }), rev)
		live[key] = i
	}
	del := func(i int) {
		rev++
		key := fmt.Sprintf("ns-%d/%s", i%3, name(i))
		deleteKey(m, key, rev)
		delete(live, key)
	}
	verify := func(step string) {
		t.Helper()
		m.Forget(rev) // the removals hold their values
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
		for _, k := range want[:min(len(want), 50)] { // each key found by its uid
			i := live[k]
			sel := storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvedUID, Value: string(uid(i))}}}
			if got, _, err := m.Keys(m.Set().Plan(sel), 0, "", 0); err != nil || !slices.Equal(got, []string{k}) {
				t.Fatalf("%s: keys of uid %s: %v, %v; want %s", step, uid(i), got, err, k)
			}
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
	before, beforeStrs := m.obj.names, m.strArena
	for i := n / 2; i < 2*n; i++ { // all but one in 50: every block keeps a few names
		if i%50 != 0 {
			del(i)
		}
	}
	verify("thinned")
	if a := m.obj.names; a.size > 2*a.inUse+5*nameBlock || len(a.blocks) >= len(before.blocks) && a.size == before.size {
		t.Errorf("after thinning: %d bytes of names held for %d in use (%d blocks, %d before): not compacted", a.size, a.inUse, len(a.blocks), len(before.blocks))
	}
	if a := m.strArena; a.size > 2*a.inUse+5*nameBlock || len(a.blocks) >= len(beforeStrs.blocks) && a.size == beforeStrs.size {
		t.Errorf("after thinning: %d bytes of values held for %d in use (%d blocks, %d before): not compacted", a.size, a.inUse, len(a.blocks), len(beforeStrs.blocks))
	}
	for i := n / 2; i < 2*n; i += 50 {
		del(i)
	}
	verify("emptied")
	if a := m.obj.names; a.inUse != 0 || a.size > nameBlock {
		t.Errorf("empty index: %d bytes of names held, %d in use", a.size, a.inUse)
	}
	if a := m.strArena; a.size > nameBlock {
		t.Errorf("empty index: %d bytes of values held, %d in use", a.size, a.inUse)
	}
}
