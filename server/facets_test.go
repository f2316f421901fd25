package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// facetEvent is one event the facets tests create, and what a summary
// must count of it.
type facetEvent struct {
	ns, reason, typ, kind string
	occurrences           int64
	ago                   time.Duration // last observed this long before the clock's now
}

// createFacetEvents creates n events over two namespaces, legacy counts
// and series, last observed over the last 10 hours.
func (e *env) createFacetEvents(n int) []facetEvent {
	e.t.Helper()
	now := e.clock.Now()
	var out []facetEvent
	for i := range n {
		f := facetEvent{
			ns:     []string{"shop", "web"}[i%2],
			reason: []string{"BackOff", "Pulled", "OOMKilling", "FailedScheduling"}[i%4],
			typ:    []string{"Normal", "Warning", "Warning"}[i%3],
			kind:   []string{"Pod", "Node", "Deployment", "Pod", "Pod"}[i%5],
			ago:    time.Duration(i*10*60/n) * time.Minute,
		}
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%04d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: f.kind, Name: fmt.Sprintf("o%d", i%9), Namespace: f.ns},
			Reason:         f.reason, Message: fmt.Sprintf("message %d", i), Type: f.typ,
		}
		at := now.Add(-f.ago)
		if i%3 == 0 {
			ev.EventTime = metav1.NewMicroTime(at.Add(-time.Minute))
			ev.Series = &corev1.EventSeries{Count: int32(2 + i%7), LastObservedTime: metav1.NewMicroTime(at)}
			ev.ReportingController, ev.ReportingInstance, ev.Action = "kubelet", "node-1", "Probe"
			f.occurrences = int64(2 + i%7)
		} else {
			ev.Count = int32(1 + i%4)
			ev.LastTimestamp = metav1.NewTime(at)
			f.occurrences = int64(1 + i%4)
		}
		if _, err := e.cs.CoreV1().Events(f.ns).Create(e.ctx, ev, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// TestFacets: a summary counts exactly the occurrences (not the events)
// of what a list with the same namespace, selectors, filter and time
// range selects, by each field and by time bucket, over more events than
// one of its pages.
func TestFacets(t *testing.T) {
	e := newEnv(t, 24*time.Hour)
	evs := e.createFacetEvents(1500)
	for _, c := range []struct {
		name, path string
		q          url.Values
		keep       func(facetEvent) bool
	}{
		{"everything", "/apis/events.kubevents.io/v1/facets", url.Values{}, func(facetEvent) bool { return true }},
		{"a namespace's warnings", "/apis/events.kubevents.io/v1/namespaces/shop/facets", url.Values{"fieldSelector": {"type=Warning"}},
			func(f facetEvent) bool { return f.ns == "shop" && f.typ == "Warning" }},
		{"the last 2 hours of a filter", "/apis/events.kubevents.io/v1/facets", url.Values{"since": {"2h"}, "filter": {`object.note.endsWith("0")`}, "top": {"1"}},
			func(f facetEvent) bool { return f.ago <= 2*time.Hour }},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := e.do(http.MethodGet, c.path+"?"+c.q.Encode(), "", "", "")
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			var got eventapi.FacetList
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{}
			var occ, n int64
			for i, f := range evs {
				if !c.keep(f) || (c.q.Get("filter") != "" && i%10 != 0) {
					continue
				}
				occ += f.occurrences
				n++
				want["reason/"+f.reason] += f.occurrences
				want["type/"+f.typ] += f.occurrences
				want["kind/"+f.kind] += f.occurrences
				want["namespace/"+f.ns] += f.occurrences
			}
			if n == 0 {
				t.Fatal("the case selects nothing: it tests nothing")
			}
			if got.Kind != "FacetList" || got.Occurrences != occ || got.Events != n {
				t.Fatalf("%s: %d occurrences of %d events, want %d of %d", got.Kind, got.Occurrences, got.Events, occ, n)
			}
			var buckets, other int64
			for _, f := range got.Items {
				switch {
				case f.Field == eventapi.FacetTime:
					buckets += f.Occurrences
				case f.Other:
					other += f.Occurrences
				case f.Field == eventapi.FacetReportingController:
				default:
					if w := want[f.Field+"/"+f.Value]; f.Occurrences != w {
						t.Errorf("%s=%s: %d occurrences, want %d", f.Field, f.Value, f.Occurrences, w)
					}
				}
			}
			if buckets != occ {
				t.Errorf("the time buckets hold %d occurrences, want %d", buckets, occ)
			}
			if c.q.Get("top") == "1" && other == 0 {
				t.Errorf("top 1 of 2 reasons left no other facet")
			}
		})
	}

	// kubectl's Table.
	code, body := e.do(http.MethodGet, "/apis/events.kubevents.io/v1/namespaces/web/facets?top=1", "", "application/json;as=Table;v=v1;g=meta.k8s.io", "")
	if code != http.StatusOK || !strings.Contains(body, `"kind":"Table"`) || !strings.Contains(body, `"cells":["reason",`) || !strings.Contains(body, `"(other)"`) {
		t.Fatalf("table: %d %.400s", code, body)
	}
	// Discovery lists the resource, list only.
	if code, body := e.do(http.MethodGet, "/apis/events.kubevents.io/v1", "", "", ""); code != http.StatusOK || !strings.Contains(body, `"name":"facets"`) {
		t.Fatalf("discovery: %d %s", code, body)
	}
}

// TestFacetsRefused: bad parameters are 400 saying why; a watch or a
// write is 405.
func TestFacetsRefused(t *testing.T) {
	e := newEnv(t, time.Hour)
	const path = "/apis/events.kubevents.io/v1/facets"
	for _, c := range []struct {
		method, query string
		code          int
		msg           string
	}{
		{http.MethodGet, "top=0", 400, "must be an integer between 1 and 1000"},
		{http.MethodGet, "top=5000", 400, "must be between 1 and 1000"},
		{http.MethodGet, "bucket=soon", 400, "give a duration"},
		{http.MethodGet, "bucket=500ms", 400, "at least 1s"},
		{http.MethodGet, "bucket=1s&since=24h", 400, "more than 10000"},
		{http.MethodGet, "filter=object.note", 400, "must evaluate to a bool"},
		{http.MethodGet, "since=soon", 400, "give an RFC 3339 time"},
		{http.MethodGet, "fieldSelector=nosuch%3Dx", 400, "nosuch"},
		{http.MethodGet, "watch=true", 405, ""},
		{http.MethodPost, "", 405, ""},
	} {
		code, body := e.do(c.method, path+"?"+c.query, "", "", "")
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s ?%s: %d %s, want %d saying %q", c.method, c.query, code, body, c.code, c.msg)
		}
	}
}
