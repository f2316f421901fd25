package index

import (
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
)

// Lookup is one index lookup: the keys whose events index ID holds Value
// for.
type Lookup struct {
	ID    ID
	Value string
}

// Plan says which keys can hold the events a selector matches. Every
// candidate must still be checked with Selector.Matches.
type Plan struct {
	// None is set when no event can match: the selector's namespace and
	// its metadata.namespace term disagree, or it asks for an empty name.
	None bool
	// Namespace, when set, restricts the candidates to that namespace (from
	// Selector.Namespace or a metadata.namespace term).
	Namespace string
	// Clusters, without Namespace, restricts the candidates to the keys of
	// some clusters of a fleet (Selector.Clusters).
	Clusters storage.Clusters
	// Name, when set (always with Namespace), makes Namespace/Name the only
	// candidate: a metadata.name term within a namespace.
	Name string
	// Lookups, when not nil, are the index lookups whose union holds every
	// match (one for an equality on an indexed field, two for involves.uid
	// or involves.name, two per name of an object set); nil means a scan
	// of every key (within Namespace), or of Range when it is set.
	Lookups []Lookup
	// Range, when set (never with Lookups), is an ordered index's range
	// whose entries hold every match: the selector's time range
	// (storage.Selector.Since/Until) on LastObserved.
	Range *Range
}

// KeyRange returns the range [from, to) of "<ns>/<name>" keys that hold
// p's candidates (an empty to: no upper bound): its namespace's, or its
// clusters'.
func (p Plan) KeyRange() (from, to string) {
	if p.Namespace != "" {
		from = p.Namespace + "/"
		return from, string(PrefixEnd([]byte(from)))
	}
	return p.Clusters.KeyRange()
}

// InRange reports whether key ("<ns>/<name>") is in p.KeyRange().
func (p Plan) InRange(key string) bool {
	from, to := p.KeyRange()
	return key >= from && (to == "" || key < to)
}

// Plan returns how to find the events sel matches with the indexes of s.
// Among the equalities on indexed fields it uses the one on the most
// selective index (the first in s's order); an involves.uid or
// involves.name term, which needs both the regarding and the related
// index, ranks as the later of the two and loses ties to a single lookup.
// Empty values are not indexed, so terms asking for them are not used.
//
// A time range (Since/Until) is served by a Range on LastObserved, when s
// keeps it, unless a narrower lookup applies: uid, name, involves and
// family lookups always win; an equality on a coarse field (reason,
// reporting instance, action, reporting component, source, type) wins
// unless the range is narrow (NarrowRange). A time range holding no
// instant (until not after since) plans None.
func (s Set) Plan(sel storage.Selector) Plan {
	if emptyRange(sel) {
		return Plan{None: true}
	}
	p, best := s.planLookups(sel)
	if p.None || p.Name != "" {
		return p
	}
	r, narrow := s.timeRange(sel)
	if r == nil {
		return p
	}
	coarse := s.pos(Reason)
	if coarse < 0 {
		coarse = len(s.ids)
	}
	if p.Lookups == nil || (best >= coarse && narrow) {
		p.Lookups, p.Range = nil, r
	}
	return p
}

// planLookups is Plan without the time range: the plan of sel's
// equalities and object set, and the position in s of the index its
// lookups use (len(s.ids) for none).
func (s Set) planLookups(sel storage.Selector) (Plan, int) {
	p := Plan{Namespace: sel.Namespace, Clusters: sel.Clusters}
	if fns, ok := sel.Fields.Equal(eventapi.FieldNamespace); ok {
		if p.Namespace != "" && p.Namespace != fns {
			return Plan{None: true}, 0
		}
		p.Namespace = fns
	}
	if name, ok := sel.Fields.Equal(eventapi.FieldName); ok && p.Namespace != "" {
		if name == "" { // every stored event has a name
			return Plan{None: true}, 0
		}
		p.Name = name
		return p, 0
	}
	best := len(s.ids)
	for i, id := range s.ids {
		if f := id.Field(); f == "" {
			continue
		} else if v, ok := sel.Fields.Equal(f); ok && v != "" {
			best = i
			p.Lookups = []Lookup{{ID: id, Value: v}}
			break
		}
	}
	for _, inv := range involves {
		a, b := s.pos(inv.pair[0]), s.pos(inv.pair[1])
		if a < 0 || b < 0 || max(a, b) >= best {
			continue
		}
		if v, ok := sel.Fields.Equal(inv.field); ok && v != "" {
			best = max(a, b)
			p.Lookups = []Lookup{{ID: inv.pair[0], Value: v}, {ID: inv.pair[1], Value: v}}
		}
	}
	if sel.Objects != nil {
		return s.planObjects(sel.Objects, p, best)
	}
	return p, best
}

// planObjects plans a selector with an object set (a family): the union
// of both name indexes' entries for each of the set's names, unless a
// lookup on an index before the names (a uid) was found already, which is
// narrower than a whole family.
func (s Set) planObjects(objs storage.ObjectSet, p Plan, best int) (Plan, int) {
	a, b := s.pos(InvolvedName), s.pos(RelatedName)
	if a < 0 || b < 0 || best < a {
		return p, best
	}
	names := objs.Names()
	if len(names) == 0 {
		return Plan{None: true}, 0
	}
	p.Lookups = make([]Lookup, 0, 2*len(names))
	for _, n := range names {
		if n != "" {
			p.Lookups = append(p.Lookups, Lookup{ID: InvolvedName, Value: n}, Lookup{ID: RelatedName, Value: n})
		}
	}
	if len(p.Lookups) == 0 {
		return Plan{None: true}, 0
	}
	return p, max(a, b)
}
