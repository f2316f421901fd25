package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventfilter"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// createFiltered creates n events in default whose messages, counts and
// types vary with i, through client-go.
func (e *env) createFiltered(n int) {
	e.t.Helper()
	for i := range n {
		typ := corev1.EventTypeNormal
		if i%2 == 0 {
			typ = corev1.EventTypeWarning
		}
		msg := "Started container"
		if i%5 == 0 {
			msg = "OOMKilled container app"
		}
		_, err := e.cs.CoreV1().Events("default").Create(e.ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%04d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("web-%d", i%7), Namespace: "default"},
			Reason:         "Started", Message: msg, Type: typ, Count: int32(1 + i%10),
			LastTimestamp: metav1.NewTime(e.clock.Now()),
		}, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// createLong creates the event ns/long, whose 20,000-character message
// makes a filter reading it dear.
func (e *env) createLong(ns string) {
	e.t.Helper()
	if _, err := e.cs.CoreV1().Events(ns).Create(e.ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "long"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: ns},
		Reason:         "Started", Message: strings.Repeat("x", 20000), Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// listNames lists path with query through every page (limit per page,
// 0 for one), returning the names, or the status code and body of a
// failure.
func (e *env) listNames(path string, q url.Values, limit int) ([]string, int, string) {
	e.t.Helper()
	var names []string
	for {
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		code, body := e.do(http.MethodGet, path+"?"+q.Encode(), "", "application/json", "")
		if code != http.StatusOK {
			return nil, code, body
		}
		var l struct {
			Metadata metav1.ListMeta `json:"metadata"`
			Items    []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			e.t.Fatal(err)
		}
		for _, it := range l.Items {
			names = append(names, it.Metadata.Name)
		}
		if l.Metadata.Continue == "" {
			return names, code, body
		}
		q.Set("continue", l.Metadata.Continue)
	}
}

// TestFilterLists: the filter parameter selects, in each group's shape,
// exactly what the same condition in Go does, with a field selector and
// over pages (and over the server's own pages of a list without limit).
func TestFilterLists(t *testing.T) {
	e := newEnv(t, time.Hour)
	const n = 600 // more than one of the server's pages
	e.createFiltered(n)
	want := func(cond func(i int) bool) []string {
		var out []string
		for i := range n {
			if cond(i) {
				out = append(out, fmt.Sprintf("e%04d", i))
			}
		}
		return out
	}
	for _, c := range []struct {
		path, filter, fields string
		limit                int
		want                 []string
	}{
		{"/api/v1/namespaces/default/events", `object.message.contains("OOM")`, "", 0, want(func(i int) bool { return i%5 == 0 })},
		{"/api/v1/events", `object.message.matches("^OOM") && object.count < 5`, "type=Warning", 7, want(func(i int) bool { return i%5 == 0 && 1+i%10 < 5 && i%2 == 0 })},
		{"/apis/events.k8s.io/v1/namespaces/default/events", `object.note.startsWith("Started") && object.regarding.name == "web-3"`, "", 50, want(func(i int) bool { return i%5 != 0 && i%7 == 3 })},
		{"/apis/events.kubevents.io/v1/events", `object.deprecatedCount == 10`, "regarding.name=web-2", 3, want(func(i int) bool { return 1+i%10 == 10 && i%7 == 2 })},
		{"/api/v1/events", `object.lastTimestamp < timestamp("2026-01-01T00:00:01Z")`, "", 0, want(func(int) bool { return true })},
	} {
		q := url.Values{"filter": {c.filter}}
		if c.fields != "" {
			q.Set("fieldSelector", c.fields)
		}
		got, code, body := e.listNames(c.path, q, c.limit)
		if code != http.StatusOK || !slices.Equal(got, c.want) {
			t.Fatalf("%s %s: %d %.200s: got %d names, want %d", c.path, c.filter, code, body, len(got), len(c.want))
		}
		if len(c.want) == 0 {
			t.Fatalf("%s selects nothing: the case tests nothing", c.filter)
		}
	}
}

// TestFilterRefused: a filter that does not compile, is not a bool or
// may cost too much is 400 with CEL's message or the estimate and the
// limit; so is any filter with extensions off.
func TestFilterRefused(t *testing.T) {
	e := newEnv(t, time.Hour)
	for _, c := range []struct{ path, filter, msg string }{
		{"/api/v1/events", `object.message.`, "Syntax error"},
		{"/api/v1/events", `object.message`, "must evaluate to a bool"},
		{"/api/v1/events", `object.note == "x"`, "undefined field 'note'"},
		{"/apis/events.k8s.io/v1/events", `object.message == "x"`, "undefined field 'message'"},
		{"/api/v1/events", `object.message.split(" ").all(a, object.message.split(" ").all(b, a != b || a == b))`, "estimated cost on one event"},
		{"/api/v1/events", strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300), "recursion limit"},
		{"/api/v1/watch/events", `object.message`, "must evaluate to a bool"},
	} {
		code, body := e.do(http.MethodGet, c.path+"?filter="+url.QueryEscape(c.filter), "", "", "")
		if code != http.StatusBadRequest || !strings.Contains(body, c.msg) || !strings.Contains(body, `"reason":"BadRequest"`) {
			t.Errorf("%s %.40s: %d %s, want 400 saying %q", c.path, c.filter, code, body, c.msg)
		}
	}
	off := newEnvWith(t, time.Hour, func(c *server.Config) { c.DisableExtensions = true })
	if code, body := off.do(http.MethodGet, "/api/v1/events?filter=true", "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "extensions are disabled") {
		t.Fatalf("extensions off: %d %s", code, body)
	}
}

// TestFilterCostCut: a list whose filter reaches the request's budget,
// or its per-event limit on one event, is cut with a 400 that says so,
// never answered with what was selected before; writes meanwhile go on.
func TestFilterCostCut(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.FilterLimits = eventfilter.Limits{RequestCostBudget: 500, PerEventCostLimit: 500}
	})
	e.createFiltered(600)
	// Writes keep flowing while filtered lists are cut.
	var wg sync.WaitGroup
	writeErr := make(chan error, 1)
	stop := make(chan struct{})
	var latencies []time.Duration // the writer's alone until wg.Wait
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
			_, err := e.cs.CoreV1().Events("other").Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i)},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "other"},
				Reason:         "Started", Message: "m", Type: corev1.EventTypeNormal,
			}, metav1.CreateOptions{})
			cancel()
			if err != nil {
				writeErr <- err
				return
			}
			latencies = append(latencies, time.Since(start))
		}
	}()
	// The budget is per request: pages of 100 stay within it, so a client
	// gets every event by pages.
	if names, code, body := e.listNames("/api/v1/namespaces/default/events", url.Values{"filter": {`object.count >= 1`}}, 100); code != http.StatusOK || len(names) != 600 {
		t.Fatalf("pages of 100: %d %.300s, %d names", code, body, len(names))
	}
	for _, c := range []struct {
		q     url.Values
		limit int
	}{
		{url.Values{"filter": {`object.count >= 1`}}, 0},
		{url.Values{"filter": {`object.count >= 1`}}, 400},
		{url.Values{"filter": {`object.message == "none"`}, "fieldSelector": {"type=Warning"}}, 10},
	} {
		names, code, body := e.listNames("/api/v1/namespaces/default/events", c.q, c.limit)
		if code != http.StatusBadRequest || names != nil || !strings.Contains(body, "over the request's budget of 500") {
			t.Fatalf("%v limit %d: %d %.300s, want 400 naming the budget", c.q, c.limit, code, body)
		}
	}
	// Hostile lists side by side, each cut, while the writes go on.
	var lists sync.WaitGroup
	for range 4 {
		lists.Add(1)
		go func() {
			defer lists.Done()
			for range 20 {
				code, body := e.do(http.MethodGet, "/api/v1/events?filter="+url.QueryEscape(`object.message.contains("none") || object.reason.contains("none")`), "", "", "")
				if code != http.StatusBadRequest || !strings.Contains(body, "budget") {
					t.Errorf("hostile list: %d %.200s", code, body)
					return
				}
			}
		}()
	}
	lists.Wait()
	// A long message makes one evaluation dear.
	e.createLong("big")
	code, body := e.do(http.MethodGet, "/api/v1/namespaces/big/events?filter="+url.QueryEscape(`object.message.contains("y")`), "", "", "")
	if code != http.StatusBadRequest || !strings.Contains(body, "on event big/long") || !strings.Contains(body, "limit of 500") {
		t.Fatalf("dear event: %d %s", code, body)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-writeErr:
		t.Fatalf("a create beside the cut lists failed: %v", err)
	default:
	}
	if len(latencies) == 0 {
		t.Fatal("no create completed beside the lists")
	}
	slices.Sort(latencies)
	p99 := latencies[len(latencies)*99/100]
	t.Logf("%d creates beside the cut lists: p50 %v, p99 %v", len(latencies), latencies[len(latencies)/2], p99)
	if p99 > 2*time.Second {
		t.Fatalf("creates beside the cut lists: p99 %v", p99)
	}
}

// TestFilterWatch: a filtered watch sends the initial events and the
// changes its filter selects, a DELETED for an event a change takes out
// of its selection, and ends with an ERROR event when the filter reaches
// its per-event limit.
func TestFilterWatch(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.FilterLimits = eventfilter.Limits{PerEventCostLimit: 500}
	})
	e.createFiltered(10)
	w, err := e.cs.CoreV1().RESTClient().Get().Namespace("default").Resource("events").
		Param("watch", "true").Param("filter", `object.message.contains("OOM")`).Watch(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func(typ watch.EventType, name string) {
		t.Helper()
		ev, ok := e.next(w, 0)
		if !ok {
			t.Fatalf("watch ended, want %s %s", typ, name)
		}
		got, _ := ev.Object.(*corev1.Event)
		if ev.Type != typ || got == nil || got.Name != name {
			t.Fatalf("got %s %v, want %s %s", ev.Type, ev.Object, typ, name)
		}
	}
	next(watch.Added, "e0000")
	next(watch.Added, "e0005")
	setMessage := func(name, msg string) {
		t.Helper()
		ev, err := e.cs.CoreV1().Events("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev.Message = msg
		if _, err := e.cs.CoreV1().Events("default").Update(e.ctx, ev, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Out of the selection (only the message changes: no indexed field).
	setMessage("e0005", "recovered")
	next(watch.Deleted, "e0005")
	// Into it.
	setMessage("e0001", "OOMKilled again")
	next(watch.Added, "e0001")
	// A dear event ends the watch with an ERROR.
	e.createLong("default")
	got, ok := e.next(w, 0)
	st, isStatus := got.Object.(*metav1.Status)
	if !ok || got.Type != watch.Error || !isStatus || st.Code != http.StatusBadRequest || !strings.Contains(st.Message, "on event default/long") {
		t.Fatalf("got %v %v, want an ERROR with a 400 naming the event", got.Type, got.Object)
	}
	if _, ok := e.next(w, 0); ok {
		t.Fatal("the watch goes on after its ERROR")
	}
}

// scanningStore is a store whose lists scan without end, evaluating the
// selector's predicate on the same events again and again, as a list
// over a huge store would, until the request's context ends.
type scanningStore struct{ storage.Interface }

func (s scanningStore) List(ctx context.Context, opts storage.ListOptions) (*storage.ListResult, error) {
	if opts.Predicate == nil {
		return s.Interface.List(ctx, opts)
	}
	res, err := s.Interface.List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: opts.Namespace}})
	if err != nil {
		return nil, err
	}
	for {
		for _, ev := range res.Items {
			opts.Predicate.Matches(ev)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// TestFilterScanTimesOut: a filter cheap on each event over a scan that
// does not end gets the request timeout's 504, on time, while creates
// go on.
func TestFilterScanTimesOut(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Store = scanningStore{c.Store}
		c.FilterLimits = eventfilter.Limits{RequestCostBudget: 1 << 62} // only the timeout
	})
	e.createFiltered(20)
	type result struct {
		code int
		body string
	}
	done := make(chan result, 1)
	go func() {
		code, body := e.do(http.MethodGet, "/api/v1/namespaces/default/events?timeout=10s&filter="+url.QueryEscape(`object.count > 0`), "", "", "")
		done <- result{code, body}
	}()
	var r result
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no answer within 10s")
		}
		select {
		case r = <-done:
		case <-time.After(20 * time.Millisecond):
			if _, err := e.cs.CoreV1().Events("other").Create(e.ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: "w-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "other"},
				Reason:         "Started", Message: "m", Type: corev1.EventTypeNormal,
			}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("a create beside the scan: %v", err)
			}
			e.clock.Step(time.Second)
			continue
		}
		break
	}
	if r.code != http.StatusGatewayTimeout || !strings.Contains(r.body, `"reason":"Timeout"`) {
		t.Fatalf("got %d %s, want 504", r.code, r.body)
	}
}

// TestFilterDeleteCollection: a deletecollection with a filter deletes
// what it selects and nothing else; one whose filter is cut answers with
// the cut rather than a success.
func TestFilterDeleteCollection(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.FilterLimits = eventfilter.Limits{RequestCostBudget: 200}
	})
	e.createFiltered(40)
	code, body := e.do(http.MethodDelete, "/api/v1/namespaces/default/events?filter="+url.QueryEscape(`object.message.contains("OOM")`), "", "", "")
	if code != http.StatusOK {
		t.Fatalf("deletecollection: %d %s", code, body)
	}
	left, err := e.cs.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range left.Items {
		if strings.Contains(ev.Message, "OOM") {
			t.Fatalf("%s survived", ev.Name)
		}
	}
	if len(left.Items) != 32 {
		t.Fatalf("%d events left, want the 32 the filter did not select", len(left.Items))
	}
	code, body = e.do(http.MethodDelete, "/api/v1/namespaces/default/events?filter="+url.QueryEscape(`object.message.contains("zz") || object.reason.contains("zz") || object.involvedObject.name.contains("zz") || object.count > 100`), "", "", "")
	if code != http.StatusBadRequest || !strings.Contains(body, "over the request's budget of 200") {
		t.Fatalf("cut deletecollection: %d %s", code, body)
	}
}
