package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/facet"
	"github.com/kubevents/kubevents/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// facetPage is how many events a summary reads from the store at a time,
// each page under a permit of the readGate, so that a summary of a
// million events takes its turns beside other large reads rather than
// hold a CPU from start to end.
const facetPage = 1024

// The facets resource's own query parameters, besides a list's selectors,
// filter and time range: top, how many values of each field to give, and
// bucket, the time buckets' width (a duration of whole seconds).
const (
	facetTopParam    = "top"
	facetBucketParam = "bucket"
)

// serveFacets answers a summary of the events a list with the request's
// selectors, filter and time range would give (eventapi.FacetList),
// within the read-only in-flight limit and the request timeout.
func (s *Server) serveFacets(w http.ResponseWriter, r *http.Request, namespace string) {
	s.serveListOnly(w, r, namespace, func(w http.ResponseWriter, r *http.Request, rr resourceRequest, sel storage.Selector) {
		opts, se := s.facetOptions(rr.query, sel)
		if se != nil {
			writeStatus(w, se)
			return
		}
		list, summarized, err := s.countFacets(r, sel, opts)
		if err != nil {
			if se := filterFailure(sel); se != nil {
				writeStatus(w, se)
				return
			}
			if errors.Is(err, facet.ErrTooManyBuckets) {
				writeStatus(w, apierrors.NewBadRequest(err.Error()))
				return
			}
			writeStatus(w, statusError(err, rr, ""))
			return
		}
		var warnings []string
		for _, f := range summarized {
			warnings = append(warnings, fmt.Sprintf("more than %d values of %s: the rest are counted together in its other facet", facet.MaxValues, f))
		}
		setWarnings(w, warnings)
		w.Header().Set("Content-Type", "application/json")
		if o, _ := negotiate(r.Header.Get("Accept")); o.kind == outTable {
			_ = json.NewEncoder(w).Encode(facetTable(list, o))
			return
		}
		_ = json.NewEncoder(w).Encode(list)
	})
}

// facetOptions reads the top and bucket parameters into a Counter's
// options over sel's time range.
func (s *Server) facetOptions(q map[string][]string, sel storage.Selector) (facet.Options, *apierrors.StatusError) {
	opts := facet.Options{Since: sel.Since, Until: sel.Until, Now: s.cfg.Clock.Now()}
	get := func(name string) (string, *apierrors.StatusError) {
		v := q[name]
		if len(v) > 1 {
			return "", apierrors.NewBadRequest(fmt.Sprintf("%s: %d values given, at most one is allowed", name, len(v)))
		}
		if len(v) == 0 {
			return "", nil
		}
		return v[0], nil
	}
	top, se := get(facetTopParam)
	if se != nil {
		return opts, se
	}
	if top != "" {
		n, err := strconv.Atoi(top)
		if err != nil || n < 1 {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("top: invalid value %q: must be an integer between 1 and %d", top, facet.MaxTop))
		}
		opts.Top = n
	}
	bucket, se := get(facetBucketParam)
	if se != nil {
		return opts, se
	}
	if bucket != "" {
		d, err := time.ParseDuration(bucket)
		if err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("bucket: invalid value %q: give a duration such as 1m or 1h", bucket))
		}
		opts.Bucket = d
	}
	if err := opts.Validate(); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	return opts, nil
}

// countFacets counts the events sel selects, a page at a time, each page
// read and counted under a permit of the readGate.
func (s *Server) countFacets(r *http.Request, sel storage.Selector, opts facet.Options) (*eventapi.FacetList, []string, error) {
	ctx, cancel := bindFilter(r.Context(), sel)
	defer cancel()
	c := facet.NewCounter(opts)
	ticket := s.readGate.ticket()
	lo := storage.ListOptions{Selector: sel, Limit: facetPage}
	var rev int64
	for {
		if err := s.readGate.acquire(ticket, ctx.Done(), nil); err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, err
		}
		page, err := s.store(ctx).List(ctx, lo)
		if err == nil {
			rev = page.Revision
			for _, ev := range page.Items {
				if err = c.Add(ev); err != nil {
					break
				}
			}
		}
		s.readGate.release()
		if err != nil {
			return nil, nil, err
		}
		if page.Continue == "" {
			break
		}
		lo.Continue = page.Continue
	}
	list, summarized, err := c.Result()
	if err != nil {
		return nil, nil, err
	}
	list.ResourceVersion = strconv.FormatInt(rev, 10)
	return list, summarized, nil
}

// facetTable renders a summary as kubectl prints it: one row per facet,
// but the empty time buckets.
func facetTable(l *eventapi.FacetList, o output) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + o.metaVersion},
		ListMeta: l.ListMeta,
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Field", Type: "string", Description: "What the events are counted by: reason, type, kind, namespace, reportingController, or time (buckets of their last observation)."},
			{Name: "Value", Type: "string", Description: "The field's value, or a time bucket's start; (other) counts the values beyond the top ones together."},
			{Name: "Occurrences", Type: "integer", Description: "The occurrences the events report: counts and series summed."},
			{Name: "Events", Type: "integer", Description: "How many events."},
		},
		Rows: make([]metav1.TableRow, 0, len(l.Items)),
	}
	for _, f := range l.Items {
		if f.Field == eventapi.FacetTime && f.Events == 0 {
			continue // a table lists what happened; -o json has every bucket
		}
		v := f.Value
		switch {
		case f.Other:
			v = "(other)"
		case v == "":
			v = "<none>"
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{f.Field, v, f.Occurrences, f.Events}})
	}
	return t
}
