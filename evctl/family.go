package evctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubevents/kubevents/eventapi"
)

// familySpec names the object whose family a timeline shows: the object
// and everything it owns, transitively, as eventsd's family.* field
// selectors select them.
type familySpec struct {
	// target is KIND/NAME, resolved; nil when only uid names the object.
	target *target
	// uid is --uid.
	uid string
	// withNodes adds the Nodes the family's Pods ran on.
	withNodes bool
}

func (s familySpec) String() string {
	if s.target != nil {
		return s.target.String()
	}
	return "uid " + s.uid
}

// selector is the family.* field selector of s.
func (s familySpec) selector() string {
	set := fields.Set{}
	if s.uid != "" {
		set[string(eventapi.FieldFamilyUID)] = s.uid
	}
	if t := s.target; t != nil {
		set[string(eventapi.FieldFamilyKind)], set[string(eventapi.FieldFamilyName)] = t.kind, t.name
		if t.namespaced {
			set[string(eventapi.FieldFamilyNamespace)] = t.namespace
		}
	}
	if s.withNodes {
		set[string(eventapi.FieldFamilyWithNodes)] = "true"
	}
	return selectorString(set)
}

// noFamilyError says that the server answers no family query: it refuses
// the family.* field selectors (kube-apiserver, eventsd without its
// extensions) or does not serve lineages (an older eventsd).
type noFamilyError struct{ err error }

func (e *noFamilyError) Error() string {
	return fmt.Sprintf("the server does not answer family queries (%v)", e.err)
}

func (e *noFamilyError) Unwrap() error { return e.err }

// family returns the objects of s's family (in tree order) and their
// events, with the resourceVersion to watch the events from. It reads
// every namespace, as a timeline does, unless the server refused that
// (403): then fallback's, as q.timeline. A server that answers no family
// query returns a *noFamilyError.
func (q *querier) family(ctx context.Context, s familySpec, fallback string) ([]eventapi.Lineage, []*row, string, error) {
	sel := s.selector()
	if q.noExt {
		return nil, nil, "", &noFamilyError{errors.New("it refused eventsd's field selectors")}
	}
	var items []eventsv1.Event
	var rv string
	err := q.narrowing(fallback, func(ns string) (err error) {
		items, rv, err = q.listAll(ctx, ns, sel)
		return err
	})
	if isUnsupportedField(err) {
		q.noExt = true
		return nil, nil, "", &noFamilyError{err}
	}
	if err != nil {
		return nil, nil, "", err
	}
	objs, err := q.lineages(ctx, q.narrowedTo, sel)
	if q.narrowedTo == metav1.NamespaceAll && fallback != metav1.NamespaceAll && apierrors.IsForbidden(err) {
		// The events of every namespace, but the lineage of one: the
		// Nodes (cluster-scoped) are drawn from the Pods' nodes.
		objs, err = q.lineages(ctx, fallback, sel)
	}
	if apierrors.IsNotFound(err) || isUnsupportedField(err) {
		return nil, nil, "", &noFamilyError{err}
	}
	rows := keep(items, func(*row) bool { return true })
	if apierrors.IsForbidden(err) {
		// Who may read the events but not the lineage still gets them,
		// each under its own object.
		if q.noLineage != nil {
			q.noLineage(err)
		}
		return nil, rows, rv, nil
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("listing the objects of %s's family: %w", s, err)
	}
	return objs.Items, rows, rv, nil
}

// withRoot returns objs with the object s names first when the lineage
// does not know it (or may not be read), so that the tree starts with
// it: the events where it is only the related object go under it.
func withRoot(objs []eventapi.Lineage, s familySpec) []eventapi.Lineage {
	root := corev1.ObjectReference{UID: types.UID(s.uid)}
	if t := s.target; t != nil {
		root = corev1.ObjectReference{Kind: t.kind, APIVersion: t.apiVersion, Namespace: t.namespace, Name: t.name, UID: types.UID(s.uid)}
	}
	for _, o := range objs {
		if (root.UID != "" && o.Object.UID == root.UID) ||
			(root.Name != "" && o.Object.Kind == root.Kind && o.Object.Name == root.Name && o.Object.Namespace == root.Namespace) {
			return objs
		}
	}
	return append([]eventapi.Lineage{{Object: root}}, objs...)
}

// window is --since and --until: the events shown are those that
// happened, at least partly, within it.
type window struct {
	since, until time.Time // zero: unbounded
}

// parseWhen reads --since or --until as kubectl users write instants: a
// duration back from now (1h, 30m) or an RFC3339 time.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--%s=%s: the duration must not be negative", flag, s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s=%q: neither a duration back from now (e.g. 30m, 2h, 168h) nor an RFC3339 time (e.g. 2026-11-20T10:00:00Z)", flag, s)
	}
	return t, nil
}

// contains reports whether r happened within w.
func (w window) contains(r *row) bool {
	return (w.since.IsZero() || !r.last.Before(w.since)) && (w.until.IsZero() || !r.first.After(w.until))
}

func (w window) set() bool { return !w.since.IsZero() || !w.until.IsZero() }

// treeNode is one object of a family tree and its events.
type treeNode struct {
	obj      eventapi.Lineage
	children []*treeNode
	rows     []*row
	// roles are the rows' roles: "related" for an event placed under
	// this object as its related object, "" otherwise.
	roles []string
}

// familyTree places each event of a family under its object.
type familyTree struct {
	top   []*treeNode
	byUID map[string]*treeNode
	// byName holds the nodes by kind and name (and namespace, for
	// namespaced objects): several when an object was recreated.
	byName map[string][]*treeNode
}

func nameKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// buildTree arranges objs (in eventsd's tree order: owners before what
// they own) as a tree, adds the Nodes the Pods ran on when withNodes
// (those eventsd knows only from the Pods), and places each event under
// the object it is about (its regarding object, else its related one);
// an event about none of them gets an object of its own at the end, so
// that nothing is left out.
func buildTree(objs []eventapi.Lineage, rows []*row, withNodes bool) *familyTree {
	t := &familyTree{byUID: map[string]*treeNode{}, byName: map[string][]*treeNode{}}
	add := func(o eventapi.Lineage) *treeNode {
		n := &treeNode{obj: o}
		if o.Object.UID != "" {
			t.byUID[string(o.Object.UID)] = n
		}
		k := nameKey(o.Object.Kind, o.Object.Namespace, o.Object.Name)
		t.byName[k] = append(t.byName[k], n)
		return n
	}
	for _, o := range objs {
		n := add(o)
		var parent *treeNode
		for _, ow := range o.Owners {
			if parent = t.lookup(&ow, time.Time{}); parent != nil && parent != n {
				break
			}
			parent = nil
		}
		if parent != nil {
			parent.children = append(parent.children, n)
		} else {
			t.top = append(t.top, n)
		}
	}
	if withNodes {
		for _, o := range objs {
			if o.Object.Kind != "Pod" || o.Node == "" {
				continue
			}
			ref := corev1.ObjectReference{Kind: "Node", Name: o.Node}
			if t.lookup(&ref, time.Time{}) == nil {
				t.top = append(t.top, add(eventapi.Lineage{Object: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: o.Node}}))
			}
		}
	}
	rows = slices.Clone(rows)
	sortByFirst(rows) // objects of their own come in the order of their first events
	for _, r := range rows {
		ev := r.ev
		reg := corev1.ObjectReference{Kind: ev.Regarding.Kind, Namespace: ev.Regarding.Namespace, Name: ev.Regarding.Name, UID: ev.Regarding.UID}
		if n := t.lookup(&reg, r.first); n != nil {
			n.rows, n.roles = append(n.rows, r), append(n.roles, "")
			continue
		}
		if rel := ev.Related; rel != nil {
			if n := t.lookup(rel, r.first); n != nil {
				n.rows, n.roles = append(n.rows, r), append(n.roles, "related")
				continue
			}
		}
		n := add(eventapi.Lineage{Object: reg})
		n.rows, n.roles = []*row{r}, []string{""}
		t.top = append(t.top, n)
	}
	for n := range t.walk {
		sortTogether(n)
	}
	return t
}

// lookup returns the node of the object ref names: by uid, else by kind
// and name (and namespace, for a namespaced object), the one seen last
// before at when the name was reused.
func (t *familyTree) lookup(ref *corev1.ObjectReference, at time.Time) *treeNode {
	if ref.UID != "" {
		if n, ok := t.byUID[string(ref.UID)]; ok {
			return n
		}
	}
	cands := t.byName[nameKey(ref.Kind, ref.Namespace, ref.Name)]
	if len(cands) == 0 && ref.Namespace != "" {
		// A cluster-scoped object named with a namespace (core/v1
		// events about a Node may give one).
		if c := t.byName[nameKey(ref.Kind, "", ref.Name)]; len(c) > 0 && c[0].obj.Object.Namespace == "" {
			cands = c
		}
	}
	// The latest seen by at; else (an event before anything saw the
	// object) the earliest.
	var best *treeNode
	better := func(c *treeNode) bool {
		cf, bf := c.obj.FirstSeen.Time, best.obj.FirstSeen.Time
		cIn, bIn := !cf.After(at), !bf.After(at)
		if cIn != bIn {
			return cIn
		}
		if cIn {
			return cf.After(bf)
		}
		return cf.Before(bf)
	}
	for _, c := range cands {
		if ref.UID != "" && c.obj.Object.UID != "" && c.obj.Object.UID != ref.UID {
			continue // another object of that name
		}
		if best == nil || better(c) {
			best = c
		}
	}
	return best
}

// walk yields every node, depth first.
func (t *familyTree) walk(yield func(*treeNode) bool) {
	var visit func(ns []*treeNode) bool
	visit = func(ns []*treeNode) bool {
		for _, n := range ns {
			if !yield(n) || !visit(n.children) {
				return false
			}
		}
		return true
	}
	visit(t.top)
}

// sortTogether orders n's events in time order, keeping their roles.
func sortTogether(n *treeNode) {
	role := map[*row]string{}
	for i, r := range n.rows {
		role[r] = n.roles[i]
	}
	sortByFirst(n.rows)
	for i, r := range n.rows {
		n.roles[i] = role[r]
	}
}

// prune drops the objects without events within w and without
// descendants that have some, but never a top-level object that heads
// the family (the first).
func (t *familyTree) prune(w window) {
	var keepNode func(n *treeNode) bool
	keepNode = func(n *treeNode) bool {
		var rows []*row
		var roles []string
		for i, r := range n.rows {
			if w.contains(r) {
				rows, roles = append(rows, r), append(roles, n.roles[i])
			}
		}
		n.rows, n.roles = rows, roles
		var kids []*treeNode
		for _, c := range n.children {
			if keepNode(c) {
				kids = append(kids, c)
			}
		}
		n.children = kids
		return len(n.rows) > 0 || len(n.children) > 0
	}
	var top []*treeNode
	for i, n := range t.top {
		if keepNode(n) || i == 0 {
			top = append(top, n)
		}
	}
	t.top = top
}

// rows returns the tree's events, in time order.
func (t *familyTree) rows() []*row {
	var out []*row
	for n := range t.walk {
		out = append(out, n.rows...)
	}
	sortByFirst(out)
	return out
}

// objectLine names an object of the tree as kubectl does, Kind/name,
// marked when it was deleted.
func objectLine(o *eventapi.Lineage) string {
	s := objectRef(o.Object.Kind, o.Object.Name)
	if o.Object.Name == "" && o.Object.UID != "" {
		s = strings.TrimSpace(o.Object.Kind + " uid " + string(o.Object.UID))
	}
	if o.Deleted {
		s += " (deleted)"
	}
	return s
}

// lines returns the OBJECT cell of each line of the tree and the
// event (nil for an object without events) the line shows, kubectl
// tree's way: ├─ and └─ before what an object owns, │ down the side.
func (t *familyTree) lines() (cells []string, rows []*row, roles []string) {
	var draw func(ns []*treeNode, lead string, top bool)
	draw = func(ns []*treeNode, lead string, top bool) {
		for i, n := range ns {
			last := i == len(ns)-1
			connector, childLead := "", lead
			if !top {
				connector, childLead = "├─", lead+"│ "
				if last {
					connector, childLead = "└─", lead+"  "
				}
			}
			below := childLead + "  "
			if len(n.children) > 0 {
				below = childLead + "│ "
			}
			head := lead + connector + objectLine(&n.obj)
			if len(n.rows) == 0 || n.roles[0] == "related" {
				cells, rows, roles = append(cells, head), append(rows, nil), append(roles, "")
			}
			for j, r := range n.rows {
				cell := below
				if j == 0 && n.roles[0] != "related" {
					cell = head
				}
				if n.roles[j] == "related" {
					// An event about another object, where this one is the
					// related object.
					cell += "(regarding " + objectRef(r.ev.Regarding.Kind, r.ev.Regarding.Name) + ")"
				}
				cells, rows, roles = append(cells, cell), append(rows, r), append(roles, n.roles[j])
			}
			draw(n.children, childLead, false)
		}
	}
	draw(t.top, "", true)
	return cells, rows, roles
}
