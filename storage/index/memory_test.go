package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func event(key string, mutate func(*corev1.Event)) *corev1.Event {
	ns, name, _ := strings.Cut(key, "/")
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mutate(ev)
	return ev
}

// deleteKey deletes key ("<namespace>/<name>") from m.
func deleteKey(m *Memory, key string, rev int64) {
	ns, name, _ := strings.Cut(key, "/")
	m.Delete(ns, name, rev)
}

func TestMemoryKeys(t *testing.T) {
	m := NewMemory(All())
	pod := func(name, uid string) func(*corev1.Event) {
		return func(ev *corev1.Event) {
			ev.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: ev.Namespace, Name: name, UID: types.UID(uid)}
			ev.Reason, ev.Type, ev.ReportingController, ev.ReportingInstance, ev.Action = "Pulled", "Normal", "kubelet", "node-1", "Pull"
		}
	}
	put := func(key string, mutate func(*corev1.Event), rev int64) { m.Put(event(key, mutate), rev) }
	put("a/e1", pod("p", "u1"), 1)
	put("a-b/e1", pod("p", "u2"), 2)
	put("a/e0", pod("q", "u3"), 3)
	put("b/e9", func(ev *corev1.Event) {
		pod("n", "u4")(ev)
		ev.Related = &corev1.ObjectReference{Kind: "Pod", Name: "p", UID: "u1"}
		ev.Type, ev.ReportingInstance = "Warning", "node-2"
	}, 4)
	put("b/e8", func(ev *corev1.Event) { ev.InvolvedObject.Name = "p"; ev.Source.Component = "kubelet" }, 5)
	put("b/gone", pod("p", "u1"), 6)
	m.Delete("b", "gone", 7)
	m.Delete("b", "never", 8)
	// Moves a/e0 from q to p; it keeps its other values.
	put("a/e0", pod("p", "u3"), 9)

	sel := func(ns string, reqs ...eventapi.Requirement) storage.Selector {
		return storage.Selector{Namespace: ns, Fields: reqs}
	}
	for _, c := range []struct {
		name  string
		sel   storage.Selector
		after string
		limit int
		want  []string
	}{
		{"all", sel(""), "", 0, []string{"a-b/e1", "a/e0", "a/e1", "b/e8", "b/e9"}},
		{"all after", sel(""), "a/e0", 0, []string{"a/e1", "b/e8", "b/e9"}},
		{"all after a missing key", sel(""), "a/e00", 2, []string{"a/e1", "b/e8"}},
		{"namespace a", sel("a"), "", 0, []string{"a/e0", "a/e1"}},
		{"namespace a, after a key before it", sel("a"), "a-b/e1", 0, []string{"a/e0", "a/e1"}},
		{"namespace a, after its last key", sel("a"), "a/e1", 0, nil},
		{"name", sel("a", eq(eventapi.FieldName, "e1")), "", 0, []string{"a/e1"}},
		{"name after itself", sel("a", eq(eventapi.FieldName, "e1")), "a/e1", 0, nil},
		{"missing name", sel("a", eq(eventapi.FieldName, "zz")), "", 0, nil},
		{"none", sel("a", eq(eventapi.FieldNamespace, "b")), "", 0, nil},
		{"regarding name", sel("", eq(eventapi.FieldInvolvedName, "p")), "", 0, []string{"a-b/e1", "a/e0", "a/e1", "b/e8"}},
		{"regarding name limited", sel("", eq(eventapi.FieldInvolvedName, "p")), "", 2, []string{"a-b/e1", "a/e0"}},
		{"regarding name next page", sel("", eq(eventapi.FieldInvolvedName, "p")), "a/e0", 2, []string{"a/e1", "b/e8"}},
		{"regarding kind+namespace+name", sel("a", eq(eventapi.FieldInvolvedKind, "Pod"), eq(eventapi.FieldInvolvedNamespace, "a"), eq(eventapi.FieldInvolvedName, "p")),
			"", 0, []string{"a/e0", "a/e1"}},
		{"old value is gone", sel("", eq(eventapi.FieldInvolvedName, "q")), "", 0, nil},
		{"unknown value", sel("", eq(eventapi.FieldReason, "Nope")), "", 0, nil},
		{"involves.uid", sel("", eq(eventapi.FieldInvolvesUID, "u1")), "", 0, []string{"a/e1", "b/e9"}},
		{"involves.name", sel("", eq(eventapi.FieldInvolvesName, "p")), "", 0, []string{"a-b/e1", "a/e0", "a/e1", "b/e8", "b/e9"}},
		{"involves.name in b", sel("b", eq(eventapi.FieldInvolvesName, "p")), "", 0, []string{"b/e8", "b/e9"}},
		{"involves.name paged", sel("", eq(eventapi.FieldInvolvesName, "p")), "a/e1", 2, []string{"b/e8", "b/e9"}},
		{"source falls back to the controller", sel("", eq(eventapi.FieldSource, "kubelet")), "", 0, []string{"a-b/e1", "a/e0", "a/e1", "b/e8", "b/e9"}},
		{"reporting instance", sel("", eq(eventapi.FieldReportingInstance, "node-2")), "", 0, []string{"b/e9"}},
		{"action", sel("", eq(eventapi.FieldAction, "Pull")), "", 0, []string{"a-b/e1", "a/e0", "a/e1", "b/e9"}},
		{"type", sel("", eq(eventapi.FieldType, "Warning")), "", 0, []string{"b/e9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, rev, err := m.Keys(m.Set().Plan(c.sel), 0, c.after, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("Keys (-want +got):\n%s", d)
			}
			if rev != 9 {
				t.Errorf("revision %d, want 9", rev)
			}
		})
	}
	for _, c := range []struct {
		name string
		sel  storage.Selector
		at   int64
		want []string
	}{
		{"deleted after 6 is a candidate at 6", sel("", eq(eventapi.FieldInvolvedName, "p")), 6, []string{"a-b/e1", "a/e0", "a/e1", "b/e8", "b/gone"}},
		{"deleted at 7 is not one at 7", sel("", eq(eventapi.FieldInvolvedName, "p")), 7, []string{"a-b/e1", "a/e0", "a/e1", "b/e8"}},
		{"old value at 8", sel("", eq(eventapi.FieldInvolvedName, "q")), 8, []string{"a/e0"}},
		{"old value now", sel("", eq(eventapi.FieldInvolvedName, "q")), 9, nil},
		{"deleted name at 6", sel("b", eq(eventapi.FieldName, "gone")), 6, []string{"b/gone"}},
		{"all at 6, namespace b", sel("b"), 6, []string{"b/e8", "b/e9", "b/gone"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := m.Keys(m.Set().Plan(c.sel), c.at, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("Keys at %d (-want +got):\n%s", c.at, d)
			}
		})
	}
	m.Forget(8)
	if got, _, err := m.Keys(m.Set().Plan(sel("", eq(eventapi.FieldInvolvedName, "q"))), 8, "", 0); err != nil || len(got) != 1 {
		t.Errorf("Keys at 8 after Forget(8): %q, %v", got, err)
	}
	if _, _, err := m.Keys(Plan{}, 7, "", 0); !errors.Is(err, storage.ErrCompacted) {
		t.Errorf("Keys at 7 after Forget(8): %v, want ErrCompacted", err)
	}
	if _, _, err := m.Keys(Plan{}, 10, "", 0); !errors.Is(err, storage.ErrFutureRevision) {
		t.Errorf("Keys at 10 with the index at 9: %v, want ErrFutureRevision", err)
	}
	if n := m.Len(); n != 5 {
		t.Errorf("Len %d, want 5", n)
	}
	if err := m.check(); err != nil {
		t.Error(err)
	}
	if _, _, err := NewMemory(Base()).Keys(Plan{Lookups: []Lookup{{Action, "x"}}}, 0, "", 0); err == nil {
		t.Error("a lookup on an index the Memory does not keep gave no error")
	}
}

func TestMemoryWait(t *testing.T) {
	m := NewMemory(All())
	m.SetRevision(5)
	if err := m.Wait(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Wait(ctx, 6); err == nil {
		t.Fatal("Wait for a future revision with a cancelled context returned nil")
	}
	done := make(chan error)
	go func() { done <- m.Wait(context.Background(), 7) }()
	m.Put(event("a/b", func(*corev1.Event) {}), 6)
	select {
	case err := <-done:
		t.Fatalf("Wait(7) returned %v at revision 6", err)
	case <-time.After(10 * time.Millisecond): // a bound on a negative: no clock involved
	}
	m.Delete("a", "b", 7)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.SetRevision(3)
	if r := m.Revision(); r != 7 {
		t.Errorf("revision went back to %d", r)
	}
}

// check verifies m's invariants: every list in its order, with chunks of
// 1..chunkMax ids and a true count, every object in byKey and in the list
// of each index it has a value for, and true reference counts.
func (m *Memory) check() error {
	n := uint32(m.set.Len())
	refs := make([]uint32, len(m.strs))
	live := 0
	for o := range uint32(m.obj.n) {
		if !m.obj.live(o) {
			continue
		}
		live++
		refs[m.obj.ns(o)]++
		for p := range int(n) {
			if v := m.obj.val(o, p); v != 0 {
				refs[v]++
			}
		}
	}
	if err := m.obj.checkNames(); err != nil {
		return err
	}
	for _, r := range m.removed {
		refs[r.ns]++
	}
	for _, v := range m.removedVals {
		if v != 0 {
			refs[v]++
		}
	}
	if len(m.removedVals) != len(m.removed)*int(n) {
		return fmt.Errorf("%d removals with %d values", len(m.removed), len(m.removedVals))
	}
	if d := cmp.Diff(m.refs[1:], refs[1:]); d != "" {
		return fmt.Errorf("reference counts (-have +true):\n%s", d)
	}
	for v, s := range m.strs[1:] {
		if id, ok := m.ids[s]; (refs[v+1] > 0) != ok || ok && id != uint32(v+1) {
			return fmt.Errorf("value %d %q: id %d in map %v, %d refs", v+1, s, id, ok, refs[v+1])
		}
	}
	inUse := 0
	for v := 1; v < len(m.strs); v++ {
		if refs[v] == 0 {
			continue
		}
		b, n := m.strArena.entry(m.strRefs[v])
		if string(b) != m.strs[v] {
			return fmt.Errorf("value %d %q: %q in the arena", v, m.strs[v], b)
		}
		inUse += n
	}
	if inUse != m.strArena.inUse {
		return fmt.Errorf("value arena: %d bytes in use, counted %d", m.strArena.inUse, inUse)
	}
	if len(m.ids) != len(m.strs)-1-len(m.freeStrs) {
		return fmt.Errorf("%d interned values, %d ids, %d free", len(m.ids), len(m.strs)-1, len(m.freeStrs))
	}
	walk := func(name string, l *list, less func(a, b uint32) bool) ([]uint32, error) {
		var ids []uint32
		for i, ch := range l.chunks {
			if len(ch) == 0 || len(ch) > chunkMax {
				return nil, fmt.Errorf("%s: chunk %d has %d ids", name, i, len(ch))
			}
			ids = append(ids, ch...)
		}
		if len(ids) != l.n {
			return nil, fmt.Errorf("%s: %d ids, counted %d", name, len(ids), l.n)
		}
		for i := 1; i < len(ids); i++ {
			if !less(ids[i-1], ids[i]) {
				return nil, fmt.Errorf("%s: %q before %q", name, m.key(ids[i-1]), m.key(ids[i]))
			}
		}
		return ids, nil
	}
	ids, err := walk("byKey", &m.byKey, func(a, b uint32) bool { return m.key(a) < m.key(b) })
	if err != nil {
		return err
	}
	if len(ids) != live {
		return fmt.Errorf("byKey has %d objects, %d live", len(ids), live)
	}
	for p := range n {
		val := func(o uint32) uint32 { return m.obj.val(o, int(p)) }
		ids, err := walk(m.set.ids[p].String(), &m.lists[p], func(a, b uint32) bool {
			return val(a) < val(b) || val(a) == val(b) && m.key(a) < m.key(b)
		})
		if err != nil {
			return err
		}
		want := 0
		for o := range uint32(m.obj.n) {
			if m.obj.live(o) && val(o) != 0 {
				want++
			}
		}
		for _, o := range ids {
			if !m.obj.live(o) || val(o) == 0 {
				return fmt.Errorf("%v lists object %d, free or without a value", m.set.ids[p], o)
			}
		}
		if len(ids) != want {
			return fmt.Errorf("%v lists %d objects, %d have a value", m.set.ids[p], len(ids), want)
		}
	}
	return nil
}

// checkNames verifies the name arena: every live object's name in a held
// block, the live bytes of each block and in all, the size of the blocks,
// and the dropped blocks.
func (t *objects) checkNames() error {
	a := &t.names
	live := make([]int, len(a.blocks))
	for o := range uint32(t.n) {
		if !t.live(o) {
			continue
		}
		ref := t.refs[o/objBlock][o%objBlock]
		blk := int(ref >> 16)
		if blk >= len(a.blocks) || a.blocks[blk] == nil || int(ref&0xffff) >= len(a.blocks[blk]) {
			return fmt.Errorf("object %d: name reference %#x outside the arena", o, ref)
		}
		_, n := a.entry(ref)
		live[blk] += n
	}
	size, inUse := 0, 0
	for blk, b := range a.blocks {
		if live[blk] != a.live[blk] {
			return fmt.Errorf("name block %d: %d live bytes, counted %d", blk, live[blk], a.live[blk])
		}
		if b == nil != slices.Contains(a.free, uint16(blk)) {
			return fmt.Errorf("name block %d: dropped %v, in the free list %v", blk, b == nil, slices.Contains(a.free, uint16(blk)))
		}
		if b != nil && live[blk] == 0 && blk != a.cur {
			return fmt.Errorf("name block %d holds no name but is kept", blk)
		}
		size += cap(b)
		inUse += live[blk]
	}
	if size != a.size || inUse != a.inUse {
		return fmt.Errorf("name arena: %d bytes, %d in use; counted %d, %d", size, inUse, a.size, a.inUse)
	}
	return nil
}

// TestMemoryRandom runs random puts and deletes against a Memory and a map
// of the events, and checks after each batch that every plan's keys are
// exactly those of the brute-force model, that pages put together give the
// same keys, and the Memory's invariants. Enough keys are used for lists
// to be split into chunks and merged back.
// timeBase is the start of TestMemoryRandom's events' times.
var timeBase = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

func TestMemoryRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	namespaces := []string{"a", "a-b", "ab", "b"}
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	numbered := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, r.IntN(n)) }
	randEvent := func(key string) *corev1.Event {
		return event(key, func(ev *corev1.Event) {
			ev.InvolvedObject = corev1.ObjectReference{Kind: pick("Pod", "Node"), Name: numbered("p", 30), UID: types.UID(numbered("u", 300))}
			if r.IntN(3) == 0 {
				ev.Related = &corev1.ObjectReference{Kind: "Pod", Name: numbered("p", 30), UID: types.UID(numbered("u", 300))}
			}
			ev.Reason = pick("", "Pulled", "BackOff", "Scheduled")
			ev.Type = pick("Normal", "Warning")
			ev.ReportingController = pick("", "kubelet", "scheduler")
			ev.Source.Component = pick("", "", "kubelet")
			ev.ReportingInstance = pick("", "node-1", "node-2")
			ev.Action = pick("", "Pull", "Bind")
			ev.LastTimestamp = metav1.NewTime(timeBase.Add(time.Duration(r.IntN(3*3600)) * time.Second))
		})
	}
	randSelector := func() storage.Selector {
		var sel storage.Selector
		if r.IntN(2) == 0 {
			sel.Namespace = pick(namespaces...)
		}
		if r.IntN(3) == 0 {
			sel.Since = timeBase.Add(time.Duration(r.IntN(3*3600)) * time.Second)
		}
		if r.IntN(3) == 0 {
			sel.Until = timeBase.Add(time.Duration(r.IntN(3*3600)) * time.Second)
		}
		for range r.IntN(3) {
			switch r.IntN(12) {
			case 0:
				sel.Fields = append(sel.Fields, eq(eventapi.FieldName, numbered("e", 600)))
			case 1:
				sel.Fields = append(sel.Fields, eq(eventapi.FieldNamespace, pick(namespaces...)))
			case 2:
				sel.Fields = append(sel.Fields, eq(eventapi.FieldInvolvesUID, numbered("u", 300)))
			case 3:
				sel.Fields = append(sel.Fields, eq(eventapi.FieldInvolvesName, numbered("p", 30)))
			case 4:
				sel.Fields = append(sel.Fields, ne(eventapi.FieldType, "Normal"))
			default:
				id := All().ids[r.IntN(All().Len())]
				if id == LastObserved {
					continue
				}
				var v string
				switch id {
				case InvolvedUID, RelatedUID:
					v = numbered("u", 300)
				case InvolvedName, RelatedName:
					v = numbered("p", 30)
				default:
					v = pick("", "Pulled", "BackOff", "Normal", "Warning", "kubelet", "scheduler", "node-1", "Pull", "Bind", "x")
				}
				sel.Fields = append(sel.Fields, eq(id.Field(), v))
			}
		}
		return sel
	}
	// candidate reports whether key, holding ev, is a key Keys(p, 0, after,
	// 0) must return: the brute-force answer.
	candidate := func(p Plan, after, key string, ev *corev1.Event) bool {
		if key <= after || p.None || p.Namespace != "" && ev.Namespace != p.Namespace ||
			p.Name != "" && ev.Name != p.Name {
			return false
		}
		ok := p.Lookups == nil
		if p.Range != nil {
			ok = p.Range.Contains(valueOf(ev, p.Range.ID))
		}
		for _, l := range p.Lookups {
			ok = ok || valueOf(ev, l.ID) == l.Value
		}
		return ok
	}
	candidates := func(model map[string]*corev1.Event, p Plan, after string) []string {
		var out []string
		for key, ev := range model {
			if candidate(p, after, key, ev) {
				out = append(out, key)
			}
		}
		slices.Sort(out)
		return out
	}

	m := NewMemory(All())
	model := map[string]*corev1.Event{}
	// history holds every key's versions (nil: deleted), for Keys at
	// older revisions.
	type version struct {
		rev int64
		ev  *corev1.Event
	}
	history := map[string][]version{}
	var roundRevs []int64
	forgotten := int64(0)
	rev := int64(0)
	del := func(key string) {
		rev++
		deleteKey(m, key, rev)
		delete(model, key)
		history[key] = append(history[key], version{rev, nil})
	}
	for round := range 40 {
		for range 500 {
			key := pick(namespaces...) + "/" + numbered("e", 600)
			if r.IntN(4) == 0 {
				del(key)
			} else {
				rev++
				ev := randEvent(key)
				m.Put(ev, rev)
				model[key] = ev
				history[key] = append(history[key], version{rev, ev})
			}
		}
		if round == 29 && len(m.byKey.chunks) < 2 {
			t.Fatalf("%d keys in %d chunk: splits untested", m.byKey.n, len(m.byKey.chunks))
		}
		if round == 30 { // shrink: merges chunks
			for key := range model {
				if r.IntN(10) > 0 {
					del(key)
				}
			}
		}
		roundRevs = append(roundRevs, rev)
		if round%10 == 9 {
			forgotten = roundRevs[round-5]
			m.Forget(forgotten)
			if _, _, err := m.Keys(Plan{}, forgotten-1, "", 0); !errors.Is(err, storage.ErrCompacted) {
				t.Fatalf("Keys at %d after Forget(%d): %v, want ErrCompacted", forgotten-1, forgotten, err)
			}
		}
		if err := m.check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if m.Len() != len(model) {
			t.Fatalf("round %d: Len %d, model %d", round, m.Len(), len(model))
		}
		buckets := map[string]int{}
		for _, ev := range model {
			buckets[valueOf(ev, LastObserved)]++
		}
		if d := cmp.Diff(buckets, m.buckets); d != "" {
			t.Fatalf("round %d: bucket counts (-model +index):\n%s", round, d)
		}
		for range 25 {
			sel := randSelector()
			p := m.Set().Plan(sel)
			after := ""
			if r.IntN(3) == 0 {
				after = pick(namespaces...) + "/" + numbered("e", 600) + pick("", "0")
			}
			got, gotRev, err := m.Keys(p, 0, after, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := candidates(model, p, after)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("round %d, selector %+v after %q, plan %+v (-want +got):\n%s", round, sel, after, p, d)
			}
			if gotRev != rev {
				t.Fatalf("revision %d, want %d", gotRev, rev)
			}
			gotSet := map[string]bool{}
			for _, key := range got {
				gotSet[key] = true
			}
			for key, ev := range model {
				if key > after && sel.Matches(ev) && !gotSet[key] {
					t.Fatalf("selector %+v matches %q, which the plan %+v missed", sel, key, p)
				}
			}
			var paged []string
			limit := 1 + r.IntN(40)
			for last := after; ; {
				page, _, err := m.Keys(p, 0, last, limit)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page...)
				if len(page) < limit {
					break
				}
				last = page[len(page)-1]
			}
			if d := cmp.Diff(want, paged); d != "" {
				t.Fatalf("pages of %d, selector %+v (-want +got):\n%s", limit, sel, d)
			}

			// At an older revision, the keys hold the candidates of that
			// revision and of now, and only keys that were candidates at
			// some revision in between.
			if r.IntN(5) > 0 {
				continue
			}
			at := max(forgotten, roundRevs[r.IntN(len(roundRevs))])
			got, _, err = m.Keys(p, at, after, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
				t.Fatalf("keys at %d not sorted and distinct: %q", at, got)
			}
			then := map[string]*corev1.Event{}
			upper := map[string]bool{}
			gotSet = map[string]bool{}
			for _, key := range got {
				gotSet[key] = true
			}
			for key, vs := range history {
				for i, v := range vs {
					if v.rev <= at && v.ev != nil && (i+1 == len(vs) || vs[i+1].rev > at) {
						then[key] = v.ev
					}
					if v.ev != nil && (i+1 == len(vs) || vs[i+1].rev > at) && candidate(p, after, key, v.ev) {
						upper[key] = true
					}
				}
			}
			for _, key := range append(candidates(then, p, after), want...) {
				if !gotSet[key] {
					t.Fatalf("keys at %d for plan %+v after %q miss %q", at, p, after, key)
				}
			}
			for _, key := range got {
				if !upper[key] {
					t.Fatalf("keys at %d for plan %+v after %q hold %q, never a candidate since", at, p, after, key)
				}
			}
		}
	}
}

// TestCompareKey checks the comparisons that avoid building keys against
// comparing the built keys.
func TestCompareKey(t *testing.T) {
	parts := []string{"", "a", "a-b", "a.b", "ab", "a0", "b", "a/", "a/b"}
	sign := func(c int) int { return max(-1, min(1, c)) }
	for _, ns := range parts {
		for _, name := range parts {
			for _, target := range parts {
				if got, want := sign(compareKey(ns, name, target)), strings.Compare(ns+"/"+name, target); got != want {
					t.Errorf("compareKey(%q, %q, %q) = %d, want %d", ns, name, target, got, want)
				}
			}
			if strings.Contains(ns, "/") || strings.Contains(name, "/") {
				continue
			}
			if got, want := sign(compareNS(ns, name)), strings.Compare(ns+"/", name+"/"); got != want {
				t.Errorf("compareNS(%q, %q) = %d, want %d", ns, name, got, want)
			}
		}
	}
}

// TestMemoryKeysClusters: a plan of some clusters of a fleet reads only
// their keys, whether it scans or looks values up, and at an older
// revision only their removed keys.
func TestMemoryKeysClusters(t *testing.T) {
	m := NewMemory(All())
	keys := []string{"shop/e1", "~a~shop/e1", "~a-b~shop/e1", "~b~default/e2", "~b~shop/e1"}
	for i, k := range keys {
		m.Put(event(k, func(ev *corev1.Event) { ev.Reason = "Pulled" }), int64(i+1))
	}
	m.Delete("~a~shop", "e1", 6)
	for _, c := range []struct {
		clusters storage.Clusters
		at       int64
		want     []string
	}{
		{storage.OneCluster(""), 0, []string{"shop/e1"}},
		{storage.OneCluster("a"), 0, nil},
		{storage.OneCluster("a"), 5, []string{"~a~shop/e1"}},
		{storage.OneCluster("b"), 0, []string{"~b~default/e2", "~b~shop/e1"}},
		{storage.NamedClusters(), 0, []string{"~a-b~shop/e1", "~b~default/e2", "~b~shop/e1"}},
		{storage.AnyCluster(), 0, []string{"shop/e1", "~a-b~shop/e1", "~b~default/e2", "~b~shop/e1"}},
	} {
		for _, fs := range []eventapi.FieldSelector{nil, {{Field: eventapi.FieldReason, Value: "Pulled"}}} {
			got, _, err := m.Keys(m.Set().Plan(storage.Selector{Clusters: c.clusters, Fields: fs}), c.at, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("%s at %d, fields %v (-want +got):\n%s", c.clusters, c.at, fs, d)
			}
		}
	}
}
