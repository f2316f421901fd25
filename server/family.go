package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Lineage is the ownership lineage the family.* field selectors are
// resolved with: package lineage's Graph.
type Lineage interface {
	// Family returns the live set of the object spec names and all it owns.
	Family(spec lineage.FamilySpec) *lineage.Family
	// Learning returns "" while ownership is learned, otherwise why not.
	Learning() string
	// Subscribe calls fn with each object added or whose ownership changed.
	Subscribe(fn func(lineage.ID)) (cancel func())
	// Get returns an object of the lineage.
	Get(id lineage.ID) (lineage.Object, bool)
}

var _ Lineage = (*lineage.Graph)(nil)

// resolveFamily turns the family.* terms of sel's field selector into
// sel.Objects, with warnings on w when the answer can only be partial
// (ownership not learned, or the object unknown). In a namespaced request
// family.namespace defaults to the request's namespace; across namespaces
// without it, the name is looked up in every namespace.
func (s *Server) resolveFamily(w http.ResponseWriter, sc *scope, sel *storage.Selector) *apierrors.StatusError {
	terms, rest := sel.Fields.Family()
	if len(terms) == 0 {
		return nil
	}
	if sc.fleet != nil {
		return fleetOnlyOneCluster("families")
	}
	spec := lineage.FamilySpec{Namespace: sel.Namespace, AnyNamespace: sel.Namespace == ""}
	for _, t := range terms {
		switch t.Field {
		case eventapi.FieldFamilyKind:
			spec.Kind = t.Value
		case eventapi.FieldFamilyName:
			spec.Name = t.Value
		case eventapi.FieldFamilyNamespace:
			spec.Namespace, spec.AnyNamespace = t.Value, false
		case eventapi.FieldFamilyUID:
			spec.UID = types.UID(t.Value)
		case eventapi.FieldFamilyWithNodes:
			switch t.Value {
			case "true":
				spec.WithNodes = true
			case "false":
			default:
				return apierrors.NewBadRequest(fmt.Sprintf("family.withNodes: invalid value %q: must be true or false", t.Value))
			}
		}
	}
	if spec.UID == "" && (spec.Kind == "" || spec.Name == "") {
		return apierrors.NewBadRequest("a family selector names its object with family.kind and family.name (and family.namespace), or with family.uid")
	}
	fam := sc.lineage.Family(spec)
	sel.Fields, sel.Objects = rest, fam
	if why := sc.lineage.Learning(); why != "" {
		setWarnings(w, []string{fmt.Sprintf("the family of %s may lack objects: %s", spec, why)})
	} else if !fam.Known() {
		setWarnings(w, []string{fmt.Sprintf("%s is not in eventsd's ownership lineage: the family holds only the events naming it", spec)})
	}
	return nil
}

// familyFeed lets a watch with a family selector see the events of
// objects that join the family after the watch started (a new Pod whose
// ownership was learned after its first events were stored): once the
// lineage knows them, their events so far are sent as ADDED, and the
// watch's own changes up to that point are not sent again.
type familyFeed struct {
	sc   *scope
	sel  storage.Selector
	fam  *lineage.Family
	stop func()

	mu      sync.Mutex
	pending []lineage.ID
	signal  chan struct{}

	seen map[lineage.ID]bool // members whose events the watch delivers itself
	// sentUpTo holds, per object whose events were sent on joining, the
	// revision they were listed at: the watch's own changes of its
	// events up to it are already delivered.
	sentUpTo map[lineage.ID]int64
}

// newFamilyFeed subscribes to the lineage for a watch of sel, before the
// store's watch starts, so that no join is missed; nil without a family.
func newFamilyFeed(sc *scope, sel storage.Selector) *familyFeed {
	fam, ok := sel.Objects.(*lineage.Family)
	if !ok {
		return nil
	}
	f := &familyFeed{sc: sc, sel: sel, fam: fam, signal: make(chan struct{}, 1), seen: map[lineage.ID]bool{}, sentUpTo: map[lineage.ID]int64{}}
	f.stop = sc.lineage.Subscribe(func(id lineage.ID) {
		f.mu.Lock()
		f.pending = append(f.pending, id)
		f.mu.Unlock()
		select {
		case f.signal <- struct{}{}:
		default:
		}
	})
	for _, m := range fam.Members() {
		f.seen[m.ID] = true
	}
	return f
}

// joined returns the events of the objects that joined the family since
// the last call, as ADDED watch events, listed at the store's current
// revision.
func (f *familyFeed) joined(ctx context.Context) ([]storage.Event, error) {
	f.mu.Lock()
	ids := f.pending
	f.pending = nil
	f.mu.Unlock()
	var out []storage.Event
	for _, id := range ids {
		evs, err := f.join(ctx, id)
		if err != nil {
			return out, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// admit is called with each change the store's watch delivers, before it
// is sent: a change of an object that joined the family after the watch
// started, but whose join the watch has not handled yet, makes it handle
// the join now (its events so far, this one included, as ADDED), so that
// no event is sent twice whatever the order in which the watch learns of
// the change and of the join.
func (f *familyFeed) admit(ctx context.Context, e storage.Event) ([]storage.Event, error) {
	if e.Object == nil {
		return nil, nil
	}
	var out []storage.Event
	for _, ref := range []*corev1.ObjectReference{&e.Object.InvolvedObject, e.Object.Related} {
		if ref == nil {
			continue
		}
		for _, id := range refIDs(ref) {
			evs, err := f.join(ctx, id)
			if err != nil {
				return out, err
			}
			out = append(out, evs...)
		}
	}
	return out, nil
}

// refIDs are the lineage IDs an event's reference may stand for.
func refIDs(ref *corev1.ObjectReference) []lineage.ID {
	name := lineage.NameID(ref.Kind, ref.Namespace, ref.Name)
	if ref.UID == "" {
		return []lineage.ID{name}
	}
	return []lineage.ID{lineage.ID(ref.UID), name}
}

// join handles the object id joining the family, if it is a member now
// and its join was not handled: its events, listed at the current
// revision, as ADDED.
func (f *familyFeed) join(ctx context.Context, id lineage.ID) ([]storage.Event, error) {
	if f.seen[id] || !f.fam.Has(id) {
		return nil, nil
	}
	f.seen[id] = true
	o, ok := f.sc.lineage.Get(id)
	if !ok {
		return nil, nil
	}
	sel := f.sel
	sel.Fields = append(sel.Fields[:len(sel.Fields):len(sel.Fields)], involvesTerms(&o)...)
	res, err := f.sc.store.List(ctx, storage.ListOptions{Selector: sel})
	if err != nil {
		return nil, err
	}
	f.sentUpTo[id] = res.Revision
	out := make([]storage.Event, 0, len(res.Items))
	for _, ev := range res.Items {
		out = append(out, storage.Event{Type: watch.Added, Object: ev, Revision: res.Revision})
	}
	return out, nil
}

// involvesTerms select the events whose regarding or related object is o.
func involvesTerms(o *lineage.Object) eventapi.FieldSelector {
	if uid := o.UID(); uid != "" {
		return eventapi.FieldSelector{{Field: eventapi.FieldInvolvesUID, Value: string(uid)}}
	}
	return eventapi.FieldSelector{
		{Field: eventapi.FieldInvolvesKind, Value: o.Kind},
		{Field: eventapi.FieldInvolvesNamespace, Value: o.Namespace},
		{Field: eventapi.FieldInvolvesName, Value: o.Name},
	}
}

// sent reports whether the watch already sent e's object when one of its
// objects joined the family.
func (f *familyFeed) sent(e storage.Event) bool {
	if len(f.sentUpTo) == 0 || e.Object == nil {
		return false
	}
	for _, ref := range []*corev1.ObjectReference{&e.Object.InvolvedObject, e.Object.Related} {
		if ref == nil {
			continue
		}
		for _, id := range refIDs(ref) {
			if rev, ok := f.sentUpTo[id]; ok && e.Revision <= rev {
				return true
			}
		}
	}
	return false
}
