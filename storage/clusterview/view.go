package clusterview

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterAnnotation names the cluster of an event served by a fleet View.
const ClusterAnnotation = eventapi.ClusterAnnotation

// ErrFleetReadOnly is returned by the writes of a fleet View: an event is
// written to one cluster, at /clusters/NAME/.
var ErrFleetReadOnly = errors.New("events are written to one cluster, not to every cluster at once")

// View is a storage.Interface serving one cluster of a fleet store, or
// every named cluster (Fleet). It also implements storage.HealthReporter,
// storage.CursorStore and storage.RecordStore (failing when the store does
// not), and, when the store is a storage.Elector, New returns a View that
// is one too.
type View struct {
	base storage.Interface
	// cluster is the cluster served ("" the root cluster); fleet serves
	// every named cluster instead, or with narrowed only cluster, and
	// never those of excluded.
	cluster  string
	fleet    bool
	narrowed bool
	// only, when set, are the clusters a fleet view is restricted to.
	only []string
}

var (
	_ storage.Interface      = (*View)(nil)
	_ storage.HealthReporter = (*View)(nil)
	_ storage.CursorStore    = (*View)(nil)
	_ storage.RecordStore    = (*View)(nil)
	_ storage.Elector        = electingView{}
)

// electingView is a View of a store that is a storage.Elector.
type electingView struct{ *View }

// New returns the view of cluster c ("" the root cluster) of base. It is a
// storage.Elector when base is one.
func New(base storage.Interface, c string) storage.Interface {
	v := &View{base: base, cluster: c}
	if _, ok := base.(storage.Elector); ok {
		return electingView{v}
	}
	return v
}

// Fleet returns the read-only view of every named cluster of base.
func Fleet(base storage.Interface) *View { return &View{base: base, fleet: true} }

// narrow returns the fleet view v narrowed to cluster c: its events
// still carry their cluster. A view restricted to other clusters
// (Only) narrows to no event.
func (v *View) narrow(c string) *View {
	if v.only != nil && !slices.Contains(v.only, c) {
		return &View{base: v.base, fleet: true, only: []string{}}
	}
	return &View{base: v.base, cluster: c, fleet: true, narrowed: true}
}

// Only returns the fleet view v restricted to clusters cs (a reader
// allowed in those only).
func (v *View) Only(cs ...string) *View {
	return &View{base: v.base, fleet: true, only: slices.Clone(cs)}
}

func (v *View) clusters() storage.Clusters {
	if v.fleet && !v.narrowed {
		return storage.NamedClusters()
	}
	return storage.OneCluster(v.cluster)
}

// ns returns the storage namespace of the cluster's namespace ns (one
// cluster's view only).
func (v *View) ns(ns string) string { return storage.ClusterNamespace(v.cluster, ns) }

// out returns ev as the view serves it: a copy with its real namespace
// (and, in a fleet view, its cluster in ClusterAnnotation); ev itself when
// it needs no change (the root cluster's events).
func (v *View) out(ev *corev1.Event) *corev1.Event { return v.outInto(ev, nil) }

// outInto is out, making the copy in cp when it is not nil.
func (v *View) outInto(ev, cp *corev1.Event) *corev1.Event {
	if ev == nil {
		return nil
	}
	c, ns := storage.SplitClusterNamespace(ev.Namespace)
	if !v.fleet && c == "" {
		return ev
	}
	if cp == nil {
		cp = new(corev1.Event)
	}
	*cp = *ev
	cp.Namespace = ns
	if v.fleet {
		a := make(map[string]string, len(ev.Annotations)+1)
		for k, val := range ev.Annotations {
			a[k] = val
		}
		a[ClusterAnnotation] = c
		cp.Annotations = a
	}
	return cp
}

// in returns a copy of ev to write to the cluster (the view is not a
// fleet's). A namespace holding storage.ClusterMark is refused: in the
// root cluster it would be another cluster's storage namespace (in a
// named one it stays within the cluster's keys, but no such namespace
// exists).
func (v *View) in(ev *corev1.Event) (*corev1.Event, error) {
	if !storage.ValidRequestNamespace(ev.Namespace) {
		return nil, fmt.Errorf("event %s/%s: %w", ev.Namespace, ev.Name, ErrInvalidNamespace)
	}
	if v.cluster == "" {
		return ev, nil
	}
	cp := *ev
	cp.Namespace = v.ns(ev.Namespace)
	return &cp, nil
}

// ErrInvalidNamespace is returned by writes of an event whose namespace
// holds storage.ClusterMark, which no namespace can.
var ErrInvalidNamespace = errors.New("a namespace cannot hold " + string(storage.ClusterMark))

// invalidNamespace is the error of a request naming a namespace no
// cluster can have.
func invalidNamespace(ns string) error {
	return fmt.Errorf("namespace %q: %w", ns, storage.ErrNotFound)
}

// Get implements storage.Interface. A fleet view returns the event when
// exactly one cluster has one of that namespace and name, and fails with
// ErrAmbiguous when several do.
func (v *View) Get(ctx context.Context, namespace, name string) (*corev1.Event, error) {
	if !storage.ValidRequestNamespace(namespace) {
		return nil, invalidNamespace(namespace)
	}
	if v.fleet && !v.narrowed {
		return v.fleetGet(ctx, namespace, name)
	}
	if v.fleet && v.only != nil && !slices.Contains(v.only, v.cluster) {
		return nil, fmt.Errorf("event %s/%s: %w", namespace, name, storage.ErrNotFound)
	}
	ev, err := v.base.Get(ctx, v.ns(namespace), name)
	return v.out(ev), err
}

// ErrAmbiguous is returned by a fleet view's Get when several clusters
// hold an event of the namespace and name asked for.
var ErrAmbiguous = errors.New("several clusters hold an event of that name")

func (v *View) fleetGet(ctx context.Context, namespace, name string) (*corev1.Event, error) {
	res, err := v.List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: namespace,
		Fields: eventapi.FieldSelector{{Field: eventapi.FieldName, Value: name}}}, Limit: 2})
	if err != nil {
		return nil, err
	}
	switch len(res.Items) {
	case 0:
		return nil, fmt.Errorf("event %s/%s: %w", namespace, name, storage.ErrNotFound)
	case 1:
		return res.Items[0], nil
	}
	return nil, fmt.Errorf("event %s/%s is in clusters %s and %s: %w", namespace, name,
		res.Items[0].Annotations[ClusterAnnotation], res.Items[1].Annotations[ClusterAnnotation], ErrAmbiguous)
}

// scoped returns the view that serves sel: a fleet view whose selector
// selects one cluster (sel.Clusters, from a cluster=NAME field selector)
// serves that cluster's events only, still annotated.
func (v *View) scoped(sel storage.Selector) *View {
	if c, ok := sel.Clusters.One(); ok && v.fleet && !v.narrowed && c != "" {
		return v.narrow(c)
	}
	return v
}

// selector returns sel as the store selects it (v is scoped).
func (v *View) selector(sel storage.Selector) (storage.Selector, error) {
	if !storage.ValidRequestNamespace(sel.Namespace) {
		return sel, invalidNamespace(sel.Namespace)
	}
	out := sel
	out.Clusters = v.clusters()
	if sel.Predicate != nil {
		out.Predicate = predicate{v: v, p: sel.Predicate}
	}
	if v.only != nil {
		out.Predicate = onlyClusters{only: v.only, next: out.Predicate}
	}
	if !v.fleet || v.narrowed {
		if sel.Namespace != "" {
			out.Namespace = v.ns(sel.Namespace)
		}
		if v.cluster != "" && hasNamespaceTerm(sel.Fields) {
			out.Fields = make(eventapi.FieldSelector, len(sel.Fields))
			for i, r := range sel.Fields {
				if r.Field == eventapi.FieldNamespace {
					r.Value = v.ns(r.Value)
				}
				out.Fields[i] = r
			}
		}
		return out, nil
	}
	// Every named cluster: a namespace, and metadata.namespace terms, are
	// of each cluster's events, so they are checked on the namespaces
	// split from the storage namespaces.
	if sel.Namespace == "" && !hasNamespaceTerm(sel.Fields) {
		return out, nil
	}
	rest := make(eventapi.FieldSelector, 0, len(sel.Fields))
	terms := make(eventapi.FieldSelector, 0, 2)
	if sel.Namespace != "" {
		terms = append(terms, eventapi.Requirement{Field: eventapi.FieldNamespace, Value: sel.Namespace})
	}
	for _, r := range sel.Fields {
		if r.Field == eventapi.FieldNamespace {
			terms = append(terms, r)
		} else {
			rest = append(rest, r)
		}
	}
	out.Namespace, out.Fields = "", rest
	out.Predicate = namespaceTerms{terms: terms, next: out.Predicate}
	return out, nil
}

func hasNamespaceTerm(fs eventapi.FieldSelector) bool {
	for _, r := range fs {
		if r.Field == eventapi.FieldNamespace {
			return true
		}
	}
	return false
}

// onlyClusters selects the events of some clusters, then asks next (if
// any).
type onlyClusters struct {
	only []string
	next storage.Predicate
}

// Matches implements storage.Predicate.
func (o onlyClusters) Matches(ev *corev1.Event) bool {
	c, _ := storage.SplitClusterNamespace(ev.Namespace)
	return slices.Contains(o.only, c) && (o.next == nil || o.next.Matches(ev))
}

// predicate evaluates a predicate of the cluster's events (a CEL filter
// reading metadata.namespace) on the event as the view serves it.
type predicate struct {
	v *View
	p storage.Predicate
}

// Matches implements storage.Predicate.
func (p predicate) Matches(ev *corev1.Event) bool { return p.p.Matches(p.v.out(ev)) }

// namespaceTerms holds the metadata.namespace terms of a fleet view's
// selection, checked on the namespace split from the storage namespace,
// then next (if any).
type namespaceTerms struct {
	terms eventapi.FieldSelector
	next  storage.Predicate
}

// Matches implements storage.Predicate.
func (n namespaceTerms) Matches(ev *corev1.Event) bool {
	_, ns := storage.SplitClusterNamespace(ev.Namespace)
	for _, r := range n.terms {
		if (ns == r.Value) == r.Negate {
			return false
		}
	}
	return n.next == nil || n.next.Matches(ev)
}

// List implements storage.Interface.
func (v *View) List(ctx context.Context, opts storage.ListOptions) (*storage.ListResult, error) {
	v = v.scoped(opts.Selector)
	sel, err := v.selector(opts.Selector)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return &storage.ListResult{Revision: v.base.Revision()}, nil
		}
		return nil, err
	}
	opts.Selector = sel
	if v.fleet || v.cluster != "" {
		// The stored encodings hold storage namespaces: the view's
		// copies are encoded by the server.
		opts.WithProtobuf = false
	}
	res, err := v.base.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	if v.fleet || v.cluster != "" {
		// The copies in one allocation: a page's events are served
		// together and dropped together.
		items := make([]*corev1.Event, len(res.Items))
		copies := make([]corev1.Event, len(res.Items))
		for i, ev := range res.Items {
			items[i] = v.outInto(ev, &copies[i])
		}
		cp := *res
		cp.Items = items
		res = &cp
	}
	return res, nil
}

// Create implements storage.Interface.
func (v *View) Create(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	if v.fleet {
		return nil, ErrFleetReadOnly
	}
	in, err := v.in(ev)
	if err != nil {
		return nil, err
	}
	out, err := v.base.Create(ctx, in, opts)
	return v.out(out), err
}

// Update implements storage.Interface.
func (v *View) Update(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	if v.fleet {
		return nil, ErrFleetReadOnly
	}
	in, err := v.in(ev)
	if err != nil {
		return nil, err
	}
	out, err := v.base.Update(ctx, in, opts)
	return v.out(out), err
}

// Delete implements storage.Interface.
func (v *View) Delete(ctx context.Context, namespace, name string, pre storage.Preconditions) (*corev1.Event, error) {
	if v.fleet {
		return nil, ErrFleetReadOnly
	}
	if !storage.ValidRequestNamespace(namespace) {
		return nil, invalidNamespace(namespace)
	}
	out, err := v.base.Delete(ctx, v.ns(namespace), name, pre)
	return v.out(out), err
}

// Watch implements storage.Interface.
func (v *View) Watch(ctx context.Context, opts storage.WatchOptions) (storage.Watcher, error) {
	v = v.scoped(opts.Selector)
	sel, err := v.selector(opts.Selector)
	if err != nil {
		return nil, err
	}
	opts.Selector = sel
	w, err := v.base.Watch(ctx, opts)
	if err != nil || (!v.fleet && v.cluster == "") {
		return w, err
	}
	return newWatcher(w, v), nil
}

// Revision implements storage.Interface: the store's, one sequence for
// every cluster.
func (v *View) Revision() int64 { return v.base.Revision() }

// Stats implements storage.Interface: the whole store's.
func (v *View) Stats() storage.Stats { return v.base.Stats() }

// Close implements storage.Interface. It does not close the store, which
// its owner closes.
func (v *View) Close() error { return nil }

// Health implements storage.HealthReporter: the store's.
func (v *View) Health() error {
	if hr, ok := v.base.(storage.HealthReporter); ok {
		return hr.Health()
	}
	return nil
}

// ownName returns the name of the cluster's own cursor, record space or
// election called name: name itself for the root cluster.
func (v *View) ownName(name string) string {
	if v.cluster == "" {
		return name
	}
	return v.cluster + "." + name
}

// errNoState is returned when the store keeps no cursors or records.
func (v *View) errNoState(what string) error {
	return fmt.Errorf("the store (%T) keeps no %s", v.base, what)
}

// Cursor implements storage.CursorStore with the cluster's cursors.
func (v *View) Cursor(ctx context.Context, name string) (int64, bool, error) {
	cs, ok := v.base.(storage.CursorStore)
	if !ok {
		return 0, false, v.errNoState("cursors")
	}
	return cs.Cursor(ctx, v.ownName(name))
}

// SaveCursor implements storage.CursorStore with the cluster's cursors.
func (v *View) SaveCursor(ctx context.Context, name string, rev int64) error {
	if v.fleet {
		return ErrFleetReadOnly
	}
	cs, ok := v.base.(storage.CursorStore)
	if !ok {
		return v.errNoState("cursors")
	}
	return cs.SaveCursor(ctx, v.ownName(name), rev)
}

// Records implements storage.RecordStore with the cluster's record spaces.
func (v *View) Records(ctx context.Context, space string, fn func(key string, value []byte) error) error {
	rs, ok := v.base.(storage.RecordStore)
	if !ok {
		return v.errNoState("records")
	}
	if err := storage.CheckRecordSpace(space); err != nil {
		return err
	}
	return rs.Records(ctx, v.ownName(space), fn)
}

// SaveRecords implements storage.RecordStore with the cluster's record
// spaces.
func (v *View) SaveRecords(ctx context.Context, space string, writes []storage.RecordWrite) error {
	if v.fleet {
		return ErrFleetReadOnly
	}
	rs, ok := v.base.(storage.RecordStore)
	if !ok {
		return v.errNoState("records")
	}
	if err := storage.CheckRecordWrites(space, writes); err != nil {
		return err
	}
	return rs.SaveRecords(ctx, v.ownName(space), writes)
}

// Lead implements storage.Elector with the cluster's own elections: each
// cluster's mirror is led apart.
func (e electingView) Lead(ctx context.Context, name string) (context.Context, func(), error) {
	return e.base.(storage.Elector).Lead(ctx, e.ownName(name))
}

// ClusterOf returns the cluster of an event a fleet view served (its
// ClusterAnnotation).
func ClusterOf(ev *corev1.Event) string { return ev.Annotations[ClusterAnnotation] }

// ValidName reports why name cannot name a cluster of a fleet, or "" when
// it can: a DNS-1123 label of at most MaxNameLength bytes.
func ValidName(name string) string {
	if name == "" || len(name) > MaxNameLength {
		return fmt.Sprintf("must have 1 to %d characters", MaxNameLength)
	}
	if len(validation.IsDNS1123Label(name)) > 0 {
		return "must consist of lower case alphanumeric characters or '-', and start and end with an alphanumeric character"
	}
	return ""
}

// MaxNameLength bounds a cluster's name: a DNS label's 63 characters, so
// that "NAME.SPACE" record spaces and cursor names stay within the
// stores' bounds (storage.MaxRecordSpace).
const MaxNameLength = 63
