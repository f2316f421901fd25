package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
)

// kubeventsPath recognises /apis/events.kubevents.io/v1[/namespaces/NS]/RESOURCE
// for one of eventsd's own list-only resources (lineages, facets) and
// returns its namespace.
func kubeventsPath(p, resource string) (namespace string, ok bool) {
	rest, ok := strings.CutPrefix(p, kubeventsPrefix)
	if !ok {
		return "", false
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == resource:
		return "", true
	case len(parts) == 3 && parts[0] == "namespaces" && parts[1] != "" && parts[2] == resource:
		return parts[1], true
	}
	return "", false
}

// serveListOnly serves one of eventsd's own list-only resources (lineages,
// facets): GET (or HEAD) only, no watch, within the request timeout and
// a read-only in-flight slot, list handed the request's selector (a
// list's fieldSelector, labelSelector, filter, since and until, parsed
// as the events of events.kubevents.io/v1 take them).
func (s *Server) serveListOnly(w http.ResponseWriter, r *http.Request, namespace string, list func(w http.ResponseWriter, r *http.Request, rr resourceRequest, sel storage.Selector)) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	q := r.URL.Query()
	if watch, _ := queryBool(q, "watch"); watch {
		writeStatus(w, methodNotAllowed("watch"))
		return
	}
	s.withTimeout(w, r, q, func(w http.ResponseWriter, r *http.Request) {
		if !s.readOnly.tryAcquire() {
			s.metrics.rejected.WithLabelValues("readOnly").Inc()
			tooManyRequests(w)
			return
		}
		defer s.readOnly.release()
		rr := resourceRequest{verb: verbList, version: eventapi.KubeventsV1, namespace: namespace, query: q, scope: s.scopeOf(r.Context())}
		if !storage.ValidRequestNamespace(namespace) {
			writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, namespace))
			return
		}
		sel, se := s.parseSelector(w, q, rr)
		if se != nil {
			writeStatus(w, se)
			return
		}
		list(w, r, rr, sel)
	})
}

// serveLineages lists a family's objects (eventapi.LineageList) within the
// read-only in-flight limit and the request timeout, as a list of events.
func (s *Server) serveLineages(w http.ResponseWriter, r *http.Request, namespace string) {
	s.serveListOnly(w, r, namespace, func(w http.ResponseWriter, r *http.Request, rr resourceRequest, sel storage.Selector) {
		fam, ok := sel.Objects.(*lineage.Family)
		if !ok || len(sel.Fields) > 0 || (sel.Labels != nil && !sel.Labels.Empty()) || sel.Predicate != nil || !sel.Since.IsZero() || !sel.Until.IsZero() {
			writeStatus(w, apierrors.NewBadRequest(eventapi.LineageResource+" are listed by family: give family.kind and family.name (or family.uid) as the only field selectors, and no label selector, filter or time range"))
			return
		}
		list := eventapi.LineageList{
			TypeMeta: metav1.TypeMeta{APIVersion: eventapi.KubeventsGroupVersion.String(), Kind: "LineageList"},
			ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(rr.scope.store.Revision(), 10)},
			Items:    []eventapi.Lineage{},
		}
		for _, o := range fam.Members() {
			if namespace != "" && o.Namespace != namespace {
				continue // a namespaced list shows that namespace's part of the family
			}
			list.Items = append(list.Items, lineageItem(rr.scope.lineage, &o))
		}
		w.Header().Set("Content-Type", "application/json")
		if o, _ := negotiate(r.Header.Get("Accept")); o.kind == outTable {
			_ = json.NewEncoder(w).Encode(lineageTable(&list, o, s.cfg.Clock.Now()))
			return
		}
		_ = json.NewEncoder(w).Encode(&list)
	})
}

// lineageItem renders one object of the lineage.
func lineageItem(lin Lineage, o *lineage.Object) eventapi.Lineage {
	it := eventapi.Lineage{
		TypeMeta:   metav1.TypeMeta{APIVersion: eventapi.KubeventsGroupVersion.String(), Kind: "Lineage"},
		ObjectMeta: metav1.ObjectMeta{Name: string(o.ID), Namespace: o.Namespace, CreationTimestamp: metav1.NewTime(o.FirstSeen)},
		Object:     corev1.ObjectReference{Kind: o.Kind, APIVersion: o.APIVersion, Namespace: o.Namespace, Name: o.Name, UID: o.UID()},
		Node:       o.Node, FirstSeen: metav1.NewTime(o.FirstSeen), LastSeen: metav1.NewTime(o.LastSeen), Deleted: o.Deleted,
	}
	for _, id := range o.Owners {
		ref := corev1.ObjectReference{UID: types.UID(id)}
		if ow, ok := lin.Get(id); ok {
			ref = corev1.ObjectReference{Kind: ow.Kind, APIVersion: ow.APIVersion, Namespace: ow.Namespace, Name: ow.Name, UID: ow.UID()}
		}
		it.Owners = append(it.Owners, ref)
	}
	return it
}

// lineageTable renders a family's objects as kubectl prints them: kind
// and name (indented by depth below the family's first object), owner,
// node, age, and whether deleted.
func lineageTable(l *eventapi.LineageList, o output, now time.Time) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + o.metaVersion},
		ListMeta: l.ListMeta,
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Object", Type: "string", Description: "The object, indented below its owner."},
			{Name: "Owner", Type: "string", Description: "The object that owns it."},
			{Name: "Node", Type: "string", Description: "The node a Pod ran on."},
			{Name: "Age", Type: "string", Description: "Since the object was first seen."},
			{Name: "Deleted", Type: "string", Description: "When it was seen deleted, ago."},
			{Name: "UID", Type: "string", Description: "The object's uid, if known.", Priority: 1},
		},
		Rows: make([]metav1.TableRow, 0, len(l.Items)),
	}
	depth := map[string]int{}
	for _, it := range l.Items {
		d, owner := 0, ""
		for _, ow := range it.Owners {
			if od, ok := depth[string(ow.UID)+"/"+ow.Kind+"/"+ow.Name]; ok {
				d = od + 1
			}
			owner = strings.ToLower(ow.Kind) + "/" + ow.Name
			if ow.Kind == "" {
				owner = string(ow.UID)
			}
		}
		depth[string(it.Object.UID)+"/"+it.Object.Kind+"/"+it.Object.Name] = d
		deleted := ""
		if it.Deleted {
			deleted = duration.HumanDuration(now.Sub(it.LastSeen.Time))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			strings.Repeat("  ", d) + strings.ToLower(it.Object.Kind) + "/" + it.Object.Name, owner, it.Node,
			duration.HumanDuration(now.Sub(it.FirstSeen.Time)), deleted, string(it.Object.UID),
		}})
	}
	return t
}
