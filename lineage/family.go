package lineage

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// eventSlack widens an object's lifetime when an event that names it
// without a uid is matched by name: components' clocks differ, and events
// about an object still come a little after its deletion (Killing).
const eventSlack = 2 * time.Minute

// FamilySpec names the object whose family is asked for: by UID, or by
// Kind, Namespace and Name (AnyNamespace: the name in every namespace).
type FamilySpec struct {
	UID          types.UID
	Kind         string
	Namespace    string
	AnyNamespace bool
	Name         string
	// WithNodes adds the Nodes the family's Pods ran on, within the time
	// they ran there.
	WithNodes bool
}

// String renders the spec as a user wrote it.
func (s FamilySpec) String() string {
	if s.UID != "" {
		return "uid " + string(s.UID)
	}
	if s.Namespace == "" {
		return s.Kind + "/" + s.Name
	}
	return s.Kind + "/" + s.Namespace + "/" + s.Name
}

// Family is the set of objects a FamilySpec names and everything they own,
// transitively, at any time, deleted ones included: a storage.ObjectSet.
// It is live: objects the graph learns later are in it as soon as their
// ownership is known.
type Family struct {
	g     *Graph
	spec  FamilySpec
	roots map[ID]bool
	ident ident

	namesOnce sync.Once
	names     []string

	// set holds the members a walk of the graph found when the graph was
	// at change setGen (Names' walk, or Involves' own), so that Involves
	// finds the events of members (a family list's events: most of its
	// candidates) without walking each one's owners; setCalls counts the
	// checks the set could not answer since: a stale set is read again
	// once they outnumber its members, so that reading it costs at most
	// one walk up per check.
	setMu    sync.Mutex
	set      map[ID]bool
	setGen   uint64
	setCalls int
}

var _ storage.ObjectSet = (*Family)(nil)

// Family returns the family of the object spec names. The objects named
// are every one the graph holds under that uid or name (an object
// recreated under one name is one family); an object the graph does not
// know still has its own events, matched by uid or by kind, namespace and
// name.
func (g *Graph) Family(spec FamilySpec) *Family {
	f := &Family{g: g, spec: spec, roots: map[ID]bool{}, ident: identOf(spec.Kind, spec.Namespace, spec.Name)}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if spec.UID != "" {
		f.roots[ID(spec.UID)] = true
		if o, ok := g.objs[ID(spec.UID)]; ok {
			f.ident = identOf(o.Kind, o.Namespace, o.Name)
		}
		return f
	}
	if spec.AnyNamespace {
		for k, ids := range g.byName {
			if k.kind == f.ident.kind && k.name == f.ident.name {
				for id := range ids {
					f.roots[id] = true
				}
			}
		}
		return f
	}
	for id := range g.byName[f.ident] {
		f.roots[id] = true
	}
	return f
}

// Known reports whether the graph knows the family's object: when it does
// not, the family holds only that object's own events.
func (f *Family) Known() bool {
	f.g.mu.RLock()
	defer f.g.mu.RUnlock()
	for id := range f.roots {
		if _, ok := f.g.objs[id]; ok {
			return true
		}
	}
	return false
}

// Members returns the family's objects the graph holds, roots first, then
// in ownership order (owners before what they own), then by name; with
// WithNodes, the Nodes its Pods ran on last (a Node the graph does not
// hold, known only as its Pods' node, by name).
func (f *Family) Members() []Object {
	f.g.mu.RLock()
	defer f.g.mu.RUnlock()
	var out []Object
	f.walk(func(o *Object, depth int) { out = append(out, clone(o)) })
	if f.spec.WithNodes {
		for _, n := range f.nodeNames(out) {
			ids := f.g.byName[identOf("Node", "", n)]
			for id := range ids {
				out = append(out, clone(f.g.objs[id]))
			}
			if len(ids) == 0 { // known only from its Pods
				out = append(out, Object{ID: NameID("Node", "", n), APIVersion: "v1", Kind: "Node", Name: n})
			}
		}
	}
	return out
}

// walk calls fn for each member the graph holds, depth-first from the
// roots (sorted), children by first seen and name, each once; under g.mu.
func (f *Family) walk(fn func(o *Object, depth int)) {
	f.traverse(true, fn)
}

// each calls fn for each member the graph holds, each once, in no
// particular order, and returns the members' IDs; under g.mu. It is
// walk without sorting each object's children, for what needs the set
// only (the names each family list reads).
func (f *Family) each(fn func(o *Object)) map[ID]bool {
	return f.traverse(false, func(o *Object, _ int) { fn(o) })
}

// traverse is walk, with the roots and each object's children in order
// when sorted is set; it returns the IDs of the members visited.
func (f *Family) traverse(sorted bool, fn func(o *Object, depth int)) map[ID]bool {
	seen := map[ID]bool{}
	var visit func(id ID, depth int)
	visit = func(id ID, depth int) {
		o, ok := f.g.objs[id]
		if !ok || seen[id] || depth > maxDepth {
			return
		}
		seen[id] = true
		fn(o, depth)
		if !sorted {
			for c := range f.g.children[id] {
				visit(c, depth+1)
			}
			return
		}
		kids := make([]*Object, 0, len(f.g.children[id]))
		for c := range f.g.children[id] {
			if co, ok := f.g.objs[c]; ok {
				kids = append(kids, co)
			}
		}
		slices.SortFunc(kids, func(a, b *Object) int {
			if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		for _, k := range kids {
			visit(k.ID, depth+1)
		}
	}
	roots := make([]ID, 0, len(f.roots))
	for id := range f.roots {
		roots = append(roots, id)
	}
	if sorted {
		slices.Sort(roots)
	}
	for _, id := range roots {
		visit(id, 0)
	}
	return seen
}

// nodeNames returns the nodes the Pods among objs ran on, sorted.
func (f *Family) nodeNames(objs []Object) []string {
	var out []string
	for _, o := range objs {
		if o.Kind == "Pod" && o.Node != "" && !slices.Contains(out, o.Node) {
			out = append(out, o.Node)
		}
	}
	slices.Sort(out)
	return out
}

// Names implements storage.ObjectSet: the names of the members (and of
// the named object, known or not), and with WithNodes of their Nodes. The
// first call's answer is kept: a family is made for one request, whose
// list is planned with it at each page (objects learned later are still
// in Involves; a list's later pages keep its first page's candidates).
func (f *Family) Names() []string {
	f.namesOnce.Do(func() { f.names = f.readNames() })
	return f.names
}

// readNames is Names, read from the graph; the members it walks are
// kept for Involves.
func (f *Family) readNames() []string {
	f.g.mu.RLock()
	var names []string
	if f.ident.name != "" {
		names = append(names, f.ident.name)
	}
	var pods []Object
	set := f.each(func(o *Object) {
		names = append(names, o.Name)
		if f.spec.WithNodes && o.Kind == "Pod" {
			pods = append(pods, *o)
		}
	})
	names = append(names, f.nodeNames(pods)...)
	gen := f.g.gen.Load()
	f.g.mu.RUnlock()
	// The members walked are Involves' too (keepSet outside g.mu: inSet
	// takes the two locks one after the other, never both).
	f.keepSet(set, gen)
	slices.Sort(names)
	return slices.Compact(names)
}

// Involves implements storage.ObjectSet.
func (f *Family) Involves(ev *corev1.Event) bool {
	if id := ID(ev.InvolvedObject.UID); id != "" && (f.inSet(id) || f.roots[id]) {
		return true // the usual answer for a family's events, without their times
	}
	first, last := EventSpan(ev)
	if f.refIn(&ev.InvolvedObject, first, last) {
		return true
	}
	return ev.Related != nil && f.refIn(ev.Related, first, last)
}

// refIn reports whether the object ref names is a member, at the time
// [first, last] of the event naming it.
func (f *Family) refIn(ref *corev1.ObjectReference, first, last time.Time) bool {
	if ref.UID != "" && (f.inSet(ID(ref.UID)) || f.roots[ID(ref.UID)]) {
		return true
	}
	f.g.mu.RLock()
	defer f.g.mu.RUnlock()
	if ref.UID != "" {
		if o, ok := f.g.objs[ID(ref.UID)]; ok {
			return f.member(o) || f.onNode(ref, first, last)
		}
	}
	// No uid, or one the graph never learned (an object created and
	// deleted while nothing watched): by kind, namespace and name at the
	// event's time.
	id := identOf(ref.Kind, ref.Namespace, ref.Name)
	for oid := range f.g.byName[id] {
		o := f.g.objs[oid]
		if alive(o, first, last) && f.member(o) {
			return true
		}
	}
	if id == f.ident || f.spec.AnyNamespace && id.kind == f.ident.kind && id.name == f.ident.name {
		return true
	}
	return f.onNode(ref, first, last)
}

// inSet reports whether the object id is among the members a walk of
// the graph found, as the graph is now; false when it is not or the set
// is stale (the caller then asks the graph).
func (f *Family) inSet(id ID) bool {
	gen := f.g.gen.Load()
	f.setMu.Lock()
	if f.set != nil && f.setGen == gen {
		ok := f.set[id]
		f.setMu.Unlock()
		return ok
	}
	f.setCalls++
	read := f.setCalls > len(f.set)
	f.setMu.Unlock()
	if !read {
		return false
	}
	f.g.mu.RLock()
	set, gen := f.readSet(), f.g.gen.Load()
	f.g.mu.RUnlock()
	f.keepSet(set, gen)
	return set[id]
}

// readSet returns the members the graph holds; under g.mu.
func (f *Family) readSet() map[ID]bool {
	return f.each(func(*Object) {})
}

// keepSet keeps set, the members at the graph's change gen, unless the
// set kept is newer.
func (f *Family) keepSet(set map[ID]bool, gen uint64) {
	f.setMu.Lock()
	defer f.setMu.Unlock()
	if f.set == nil || gen >= f.setGen {
		f.set, f.setGen, f.setCalls = set, gen, 0
	}
}

// alive reports whether o existed at some time of [first, last], give or
// take eventSlack.
func alive(o *Object, first, last time.Time) bool {
	if !last.IsZero() && last.Before(o.FirstSeen.Add(-eventSlack)) {
		return false
	}
	return !o.Deleted || first.IsZero() || !first.After(o.LastSeen.Add(eventSlack))
}

// member reports whether o is a root or owned by one, transitively; under
// g.mu.
func (f *Family) member(o *Object) bool {
	// maxDepth bounds the walk up, cycles of owner references included.
	var up func(o *Object, depth int) bool
	up = func(o *Object, depth int) bool {
		if f.roots[o.ID] {
			return true
		}
		if depth > maxDepth {
			return false
		}
		for _, ow := range o.Owners {
			if f.roots[ow] {
				return true
			}
			if po, ok := f.g.objs[ow]; ok && up(po, depth+1) {
				return true
			}
		}
		return false
	}
	return up(o, 0)
}

// onNode reports, with WithNodes, whether ref is a Node one of the
// family's Pods ran on during [first, last]; under g.mu.
func (f *Family) onNode(ref *corev1.ObjectReference, first, last time.Time) bool {
	if !f.spec.WithNodes || ref.Kind != "Node" {
		return false
	}
	found := false
	f.each(func(o *Object) {
		if !found && o.Kind == "Pod" && o.Node == ref.Name && alive(o, first, last) {
			found = true
		}
	})
	return found
}

// EventSpan returns the first and last time an event reports: its
// eventTime (or firstTimestamp) and its series' last observed time (or
// lastTimestamp), falling back to its creation time.
func EventSpan(ev *corev1.Event) (first, last time.Time) {
	switch {
	case !ev.EventTime.IsZero():
		first = ev.EventTime.Time
	case !ev.FirstTimestamp.IsZero():
		first = ev.FirstTimestamp.Time
	default:
		first = ev.CreationTimestamp.Time
	}
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		last = ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		last = ev.LastTimestamp.Time
	default:
		last = first
	}
	if last.Before(first) {
		first, last = last, first
	}
	return first, last
}

// Has reports whether the object id is in the family now.
func (f *Family) Has(id ID) bool {
	if f.roots[id] {
		return true
	}
	f.g.mu.RLock()
	defer f.g.mu.RUnlock()
	o, ok := f.g.objs[id]
	return ok && f.member(o)
}

// Spec returns what the family was asked for with.
func (f *Family) Spec() FamilySpec { return f.spec }
