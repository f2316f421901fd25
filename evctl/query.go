package evctl

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/pager"
)

// filter is what the user asked to see.
type filter struct {
	target                                    *target
	typ, reason, action, controller, instance string
	since                                     time.Duration
	now                                       func() time.Time
}

// upstream returns the field selector every API server accepts for f.
func (f filter) upstream() fields.Set {
	s := fields.Set{}
	if t := f.target; t != nil {
		s["regarding.kind"], s["regarding.name"] = t.kind, t.name
	}
	add := func(k, v string) {
		if v != "" {
			s[k] = v
		}
	}
	add("type", f.typ)
	add("reason", f.reason)
	add("reportingController", f.controller)
	return s
}

// extension returns the terms only eventsd accepts.
func (f filter) extension() fields.Set {
	s := fields.Set{}
	if f.action != "" {
		s["action"] = f.action
	}
	if f.instance != "" {
		s["reportingInstance"] = f.instance
	}
	return s
}

// selector returns the field selector for f: the upstream terms, and
// eventsd's extension terms too when ext is set.
func (f filter) selector(ext bool) fields.Set {
	s := f.upstream()
	if ext {
		for k, v := range f.extension() {
			s[k] = v
		}
	}
	return s
}

// selectorString renders s as a field selector, its terms sorted and
// their values escaped with fields.EscapeValue, so that a name holding
// "," "=" or "\\" stays one value (fields.Set.String does not escape).
func selectorString(s fields.Set) string {
	terms := make([]string, 0, len(s))
	for k, v := range s {
		terms = append(terms, k+"="+fields.EscapeValue(v))
	}
	slices.Sort(terms)
	return strings.Join(terms, ",")
}

// matches applies every filter on the client: whatever the server could
// not select on, and nothing more (it agrees with the server elsewhere).
func (f filter) matches(r *row) bool {
	ev := r.ev
	if t := f.target; t != nil {
		reg := ev.Regarding
		if reg.Kind != t.kind || reg.Name != t.name || (t.namespaced && reg.Namespace != t.namespace) {
			return false
		}
	}
	for _, c := range []struct{ want, got string }{
		{f.typ, ev.Type}, {f.reason, ev.Reason}, {f.action, ev.Action},
		{f.controller, controllerOf(ev)}, {f.instance, ev.ReportingInstance},
	} {
		if c.want != "" && c.want != c.got {
			return false
		}
	}
	return f.since <= 0 || !r.last.Before(f.now().Add(-f.since))
}

// controllerOf is who reported ev: the reporting controller, or for a
// legacy event its source component.
func controllerOf(ev *eventsv1.Event) string {
	if ev.ReportingController != "" {
		return ev.ReportingController
	}
	return ev.DeprecatedSource.Component
}

// querier lists and watches events, using eventsd's extensions when the
// server turns out to accept them.
type querier struct {
	// cs reads the server's discovery.
	cs     kubernetes.Interface
	events eventsIn
	// watchEvents opens watches: its requests have no overall timeout.
	watchEvents eventsIn
	// lineages lists a family's objects (eventsd's lineages).
	lineages lineagesIn
	// search lists a page of events with eventsd's filter and time
	// range.
	search searchIn
	// searchWatch opens watches with eventsd's filter: with watchParams,
	// when set, instead of watchEvents.
	searchWatch searchWatchIn
	watchParams url.Values
	// group is the API group events are read from.
	group string
	// timeout bounds how long a watch may take to start (0: forever).
	timeout time.Duration
	clock   clock.WithDelayedExecution
	// noExt is set once the server has refused an extension selector;
	// until then the extensions are tried.
	noExt bool
	// narrowedTo is the namespace a timeline reads instead of every
	// namespace, once the server refused those (403); "" until then.
	narrowedTo string
	// narrowed, if set, is told when a timeline is narrowed to ns after
	// the server refused the list of every namespace with err.
	narrowed func(ns string, err error)
	// noLineage, if set, is told when a family's objects may not be
	// read (403): its events are shown without their ownership.
	noLineage func(err error)
}

// extensions reports whether queries should use eventsd's extensions:
// until the server has refused them.
func (q *querier) extensions() bool { return !q.noExt }

// isUnsupportedField reports whether err is a server refusing a field
// label, as kube-apiserver does for eventsd's extensions.
func isUnsupportedField(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "field label not supported")
}

// listAll lists every event in ns matching selector, page by page, and
// returns them with the list's resourceVersion.
func (q *querier) listAll(ctx context.Context, ns, selector string) ([]eventsv1.Event, string, error) {
	var out []eventsv1.Event
	rv := ""
	opts := metav1.ListOptions{FieldSelector: selector, Limit: 500}
	err := pager.Each(ctx, opts, q.events(ns).List, func(l *eventsv1.EventList) error {
		if rv == "" {
			rv = l.ResourceVersion
		}
		out = append(out, l.Items...)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, rv, nil
}

// list returns the events f selects in ns ("" for all): server-side as far
// as the server can, the rest here.
func (q *querier) list(ctx context.Context, ns string, f filter) ([]*row, string, error) {
	if len(f.extension()) > 0 && q.extensions() {
		items, rv, err := q.listAll(ctx, ns, selectorString(f.selector(true)))
		if err == nil {
			return keep(items, f.matches), rv, nil
		}
		if !isUnsupportedField(err) {
			return nil, "", err
		}
		q.noExt = true
	}
	items, rv, err := q.listAll(ctx, ns, selectorString(f.selector(false)))
	if err != nil {
		return nil, "", err
	}
	return keep(items, f.matches), rv, nil
}

func keep(items []eventsv1.Event, ok func(*row) bool) []*row {
	var out []*row
	for i := range items {
		if r := newRow(&items[i]); ok(r) {
			out = append(out, r)
		}
	}
	return out
}

// watch opens a watch of the events in ns. Its start, until the server
// answers with the stream's headers, is bounded by q.timeout (a server that
// accepts the connection and never answers is given up on, as any other
// request); once started, the watch lives until ctx ends or it is stopped.
func (q *querier) watch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	if q.timeout <= 0 {
		return q.openWatch(ctx, ns, opts)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	timer := q.clock.AfterFunc(q.timeout, func() { cancel(errRequestTimeout) })
	w, err := q.openWatch(wctx, ns, opts)
	if !timer.Stop() {
		// Too late, whatever the answer: the stream's context is done.
		if w != nil {
			w.Stop()
		}
		cancel(nil)
		return nil, &timeoutError{timeout: q.timeout, err: fmt.Errorf("starting a watch: %w", errRequestTimeout)}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	return &cancelingWatch{Interface: w, cancel: func() { cancel(nil) }}, nil
}

// openWatch opens the watch of ns: with eventsd's parameters when the
// querier has some (a search's filter), else a plain one.
func (q *querier) openWatch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	if len(q.watchParams) > 0 {
		return q.searchWatch(ctx, ns, opts, q.watchParams)
	}
	return q.watchEvents(ns).Watch(ctx, opts)
}

// cancelingWatch releases its context when stopped.
type cancelingWatch struct {
	watch.Interface
	cancel func()
}

func (w *cancelingWatch) Stop() {
	w.Interface.Stop()
	w.cancel()
}

// involvement says how an event concerns t: as its regarding object, as
// its related object, or not at all ("").
func involvement(ev *eventsv1.Event, t target) string {
	same := func(kind, name, ns string) bool {
		return kind == t.kind && name == t.name && (!t.namespaced || ns == t.namespace)
	}
	if same(ev.Regarding.Kind, ev.Regarding.Name, ev.Regarding.Namespace) {
		return "regarding"
	}
	if r := ev.Related; r != nil && same(r.Kind, r.Name, r.Namespace) {
		return "related"
	}
	return ""
}

// involvesSelector is eventsd's one-query selector for t's events.
func involvesSelector(t target) string {
	s := fields.Set{"involves.kind": t.kind, "involves.name": t.name}
	if t.namespaced {
		s["involves.namespace"] = t.namespace
	}
	return selectorString(s)
}

// timeline returns every event that concerns t, as regarding or related
// object, with the resourceVersion to watch from, from every namespace
// (events about an object may be in any). A user who may not list events
// across namespaces (the server answers 403) gets them from fallback, the
// namespace of the context or -n, as the web page does: q.narrowedTo says
// so from then on, for the watch and later lists.
func (q *querier) timeline(ctx context.Context, t target, fallback string) (rows []*row, rv string, err error) {
	err = q.narrowing(fallback, func(ns string) (err error) {
		rows, rv, err = q.timelineIn(ctx, ns, t)
		return err
	})
	return rows, rv, err
}

// narrowing runs list in q.narrowedTo ("" at first: every namespace)
// and, when the server refuses every namespace (403), narrows the
// timeline to fallback, says so, and runs list there.
func (q *querier) narrowing(fallback string, list func(ns string) error) error {
	err := list(q.narrowedTo)
	if q.narrowedTo == metav1.NamespaceAll && fallback != metav1.NamespaceAll && apierrors.IsForbidden(err) {
		q.narrowedTo = fallback
		if q.narrowed != nil {
			q.narrowed(fallback, err)
		}
		err = list(fallback)
	}
	return err
}

// timelineIn returns the events in ns ("" for all) that concern t. eventsd
// answers one involves.* query; another server gets one list of every
// event, filtered here, since no upstream selector reaches the related
// object.
func (q *querier) timelineIn(ctx context.Context, ns string, t target) ([]*row, string, error) {
	if q.extensions() {
		items, rv, err := q.listAll(ctx, ns, involvesSelector(t))
		if err == nil {
			return withRoles(items, t), rv, nil
		}
		if !isUnsupportedField(err) {
			return nil, "", err
		}
		q.noExt = true
	}
	items, rv, err := q.listAll(ctx, ns, "")
	if err != nil {
		return nil, "", err
	}
	return withRoles(items, t), rv, nil
}

func withRoles(items []eventsv1.Event, t target) []*row {
	var out []*row
	for i := range items {
		if role := involvement(&items[i], t); role != "" {
			r := newRow(&items[i])
			r.role = role
			out = append(out, r)
		}
	}
	return out
}
