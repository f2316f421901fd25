package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSearchModelJS runs searchmodel.js's unit tests
// (testdata/search_test.js) in the browser and reports each failure.
func TestSearchModelJS(t *testing.T) {
	runJSTests(t, "search_test.html", "search_test.js")
}

// searchState is the search page's state (window.kubevents.state), its
// fields in the page's order.
type searchState struct {
	Filter    string `json:"filter"`
	Namespace string `json:"namespace"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Kind      string `json:"kind"`
	Since     string `json:"since"`
	Until     string `json:"until"`
}

// searchEvent is what the test created, to select from by brute force.
type searchEvent struct {
	UID, Namespace, Type, Reason, Kind, Note string
	Last                                     time.Time
}

// createSearchEvents creates n events in three namespaces, of two types,
// five reasons and three kinds, last observed one a minute back from
// now (some series), and returns them as created.
func createSearchEvents(t *testing.T, srv *eventsd, n int, now time.Time) []searchEvent {
	t.Helper()
	out := make([]searchEvent, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				ns := []string{"default", "shop", "kube-system"}[i%3]
				reason := []string{"BackOff", "Pulled", "Started", "FailedMount", "Killing"}[i%5]
				typ := corev1.EventTypeNormal
				if reason == "BackOff" || reason == "FailedMount" {
					typ = corev1.EventTypeWarning
				}
				kind := "Pod"
				switch {
				case i%7 == 0:
					kind = "Node"
				case i%11 == 0:
					kind = "Deployment"
				}
				note := fmt.Sprintf("occurrence %d", i)
				if i%6 == 0 {
					note += ", OOM"
				}
				last := now.Add(-time.Duration(i) * time.Minute).Truncate(time.Microsecond)
				ev := &eventsv1.Event{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("search.%05d", i)},
					EventTime:  metav1.NewMicroTime(last),
					Type:       typ, Reason: reason, Action: "Test", Note: note,
					ReportingController: "test", ReportingInstance: "test-1",
					Regarding: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: fmt.Sprintf("obj-%d", i%13)},
				}
				if i%10 == 0 {
					// A series: first observed an hour before its last.
					ev.EventTime = metav1.NewMicroTime(last.Add(-time.Hour))
					ev.Series = &eventsv1.EventSeries{Count: int32(i + 2), LastObservedTime: metav1.NewMicroTime(last)}
				}
				got, err := srv.cs.EventsV1().Events(ns).Create(context.Background(), ev, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				out[i] = searchEvent{UID: string(got.UID), Namespace: ns, Type: typ, Reason: reason, Kind: kind, Note: note, Last: last}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// searchOccurrences is the occurrences of createSearchEvents' n events:
// one each, and i+2 for the series (every tenth).
func searchOccurrences(n int) int {
	occ := 0
	for i := range n {
		occ++
		if i%10 == 0 {
			occ += i + 1
		}
	}
	return occ
}

// uidsOf is the sorted uids of the events keep selects.
func uidsOf(evs []searchEvent, keep func(searchEvent) bool) []string {
	var out []string
	for _, e := range evs {
		if keep(e) {
			out = append(out, e.UID)
		}
	}
	slices.Sort(out)
	return out
}

// shownUIDs is the sorted uids of the result rows on the page.
func shownUIDs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#results tbody tr')].map(r => r.dataset.uid)`))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// waitSearch waits until the page shows the search of want, read.
func waitSearch(t *testing.T, ctx context.Context, what string, want searchState) {
	t.Helper()
	// As JSON.stringify writes it: & < > not escaped.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	cond := `document.querySelector('#search-view').dataset.status === 'ready' && JSON.stringify(window.kubevents.state) === ` + jsString(strings.TrimSuffix(b.String(), "\n"))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.kubevents && window.kubevents.state) + ' | ' + document.querySelector('#search-view').dataset.status + ' | ' + document.querySelector('#status').textContent + ' | ' + document.querySelector('#filter-error').textContent`))
		t.Fatalf("waiting for %s: %v (page: %s)", what, err, got)
	}
}

// submitSearch fills the form with s and submits it.
func submitSearch(t *testing.T, ctx context.Context, s searchState) {
	t.Helper()
	b, _ := json.Marshal(s)
	js := `(() => { const s = ` + string(b) + `;
		document.querySelector('#filter').value = s.filter;
		document.querySelector('#f-namespace').value = s.namespace;
		document.querySelector('#f-type').value = s.type;
		document.querySelector('#f-reason').value = s.reason;
		document.querySelector('#f-kind').value = s.kind;
		document.querySelector('#f-since').value = s.since;
		document.querySelector('#f-until').value = s.until;
		return true; })()`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#query-form button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
}

func checkShown(t *testing.T, ctx context.Context, what string, want []string) {
	t.Helper()
	if got := shownUIDs(t, ctx); !slices.Equal(got, want) {
		t.Errorf("%s: the page shows %d events, want %d:\ngot  %v\nwant %v", what, len(got), len(want), got, want)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#search-view').dataset.events`))
	if err != nil {
		t.Fatal(err)
	}
	if n != fmt.Sprint(len(want)) {
		t.Errorf("%s: the page counts %s events, want %d", what, n, len(want))
	}
}

// TestSearchInBrowser searches an eventsd's events from the page: every
// event, a CEL filter (exactly the events a brute force over what the
// test created selects), an invalid filter (CEL's message under the box,
// the previous results kept), the namespace, type, reason and kind
// filters, a new event arriving live only when the filter selects it,
// and the time range.
func TestSearchInBrowser(t *testing.T) {
	ctx := browser(t)
	srv := startEventsd(t, true, false)
	now := time.Now()
	evs := createSearchEvents(t, srv, 60, now)
	all := uidsOf(evs, func(searchEvent) bool { return true })

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/search.html")); err != nil {
		t.Fatal(err)
	}
	waitSearch(t, ctx, "every event", searchState{})
	checkShown(t, ctx, "every event", all)

	// A CEL filter.
	oom := searchState{Filter: `object.type == "Warning" && object.note.contains("OOM")`}
	submitSearch(t, ctx, oom)
	waitSearch(t, ctx, "the OOM Warnings", oom)
	wantOOM := uidsOf(evs, func(e searchEvent) bool { return e.Type == "Warning" && strings.Contains(e.Note, "OOM") })
	if len(wantOOM) == 0 {
		t.Fatal("the test's events have no OOM Warnings")
	}
	checkShown(t, ctx, "the OOM Warnings", wantOOM)

	// An invalid filter: CEL's message inline, the results kept.
	submitSearch(t, ctx, searchState{Filter: `object.type == `})
	waitPage(t, ctx, "the filter's error", `document.querySelector('#search-view').dataset.status === 'invalid' && !document.querySelector('#filter-error').hidden`)
	msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#filter-error').textContent + ' | ' + document.querySelector('#filter').getAttribute('aria-invalid') + ' | ' + document.querySelector('#filter').value`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, `invalid filter "object.type =="`) || !strings.Contains(msg, "Syntax error") || !strings.HasSuffix(msg, " | true | object.type == ") {
		t.Errorf("the invalid filter's message, aria-invalid and the box: %q, want CEL's syntax error, true and the filter kept to edit", msg)
	}
	checkShown(t, ctx, "after the invalid filter", wantOOM)
	if q, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.kubevents.state.filter`)); q != oom.Filter {
		t.Errorf("after the invalid filter the page's search is %q, want the previous one", q)
	}

	// The field filters, with a filter; then the error is gone.
	fields := searchState{Filter: `!object.note.contains("OOM")`, Namespace: "shop", Type: "Normal", Kind: "Pod"}
	submitSearch(t, ctx, fields)
	waitSearch(t, ctx, "the field filters", fields)
	checkShown(t, ctx, "namespace shop, Normal, Pods, no OOM", uidsOf(evs, func(e searchEvent) bool {
		return e.Namespace == "shop" && e.Type == "Normal" && e.Kind == "Pod" && !strings.Contains(e.Note, "OOM")
	}))
	if hidden, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#filter-error').hidden && !document.querySelector('#filter').hasAttribute('aria-invalid')`)); !hidden {
		t.Error("the filter's error still shown after a valid search")
	}
	reason := searchState{Reason: "BackOff", Namespace: "default"}
	submitSearch(t, ctx, reason)
	waitSearch(t, ctx, "the reason filter", reason)
	checkShown(t, ctx, "BackOff in default", uidsOf(evs, func(e searchEvent) bool { return e.Namespace == "default" && e.Reason == "BackOff" }))

	// Live: a new BackOff in default arrives, a new Pulled does not.
	waitPage(t, ctx, "the watch", `document.querySelector('#search-view').dataset.live === 'watching'`)
	create := func(name, reason string, at time.Time) string {
		t.Helper()
		got, err := srv.cs.EventsV1().Events("default").Create(context.Background(), &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NewMicroTime(at),
			Type: corev1.EventTypeWarning, Reason: reason, Action: "Test", Note: "live",
			ReportingController: "test", ReportingInstance: "test-1",
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "live"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(got.UID)
	}
	pulledUID := create("live.pulled", "Pulled", time.Now())
	liveUID := create("live.backoff", "BackOff", time.Now())
	wantLive := append(uidsOf(evs, func(e searchEvent) bool { return e.Namespace == "default" && e.Reason == "BackOff" }), liveUID)
	slices.Sort(wantLive)
	waitPage(t, ctx, "the live BackOff", fmt.Sprintf(`document.querySelector('#search-view').dataset.events === '%d'`, len(wantLive)))
	checkShown(t, ctx, "BackOff in default, live", wantLive)

	// Live with a range a duration back from now: the watch sends every
	// change, the page keeps those in the range.
	recent := searchState{Namespace: "default", Since: "10m"}
	submitSearch(t, ctx, recent)
	waitSearch(t, ctx, "default's last 10 minutes", recent)
	waitPage(t, ctx, "the watch of the last 10 minutes", `document.querySelector('#search-view').dataset.live === 'watching'`)
	wantRecent := append(uidsOf(evs, func(e searchEvent) bool {
		return e.Namespace == "default" && e.Last.After(now.Add(-9*time.Minute-30*time.Second))
	}), pulledUID, liveUID)
	oldAt := time.Now().Add(-20 * time.Minute).Truncate(time.Microsecond)
	evs = append(evs, searchEvent{UID: create("live.old", "Killing", oldAt), Namespace: "default", Type: "Warning", Reason: "Killing", Kind: "Pod", Last: oldAt})
	wantRecent = append(wantRecent, create("live.new", "Killing", time.Now()))
	slices.Sort(wantRecent)
	waitPage(t, ctx, "the new event in range", fmt.Sprintf(`document.querySelector('#search-view').dataset.changes === '2' && document.querySelector('#search-view').dataset.events === '%d'`, len(wantRecent)))
	checkShown(t, ctx, "default's last 10 minutes, live", wantRecent)

	// A time range: RFC 3339 until in the past, not watched.
	since, until := now.Add(-30*time.Minute).UTC().Format(time.RFC3339), now.Add(-10*time.Minute).UTC().Format(time.RFC3339)
	ranged := searchState{Since: since, Until: until}
	submitSearch(t, ctx, ranged)
	waitSearch(t, ctx, "the time range", ranged)
	s0, u0 := now.Add(-30*time.Minute).Truncate(time.Second), now.Add(-10*time.Minute).Truncate(time.Second)
	checkShown(t, ctx, "the time range", uidsOf(evs, func(e searchEvent) bool { return !e.Last.Before(s0) && e.Last.Before(u0) }))
	if live, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#search-view').dataset.live`)); live != "off" {
		t.Errorf("a range ending in the past: live %q, want off", live)
	}

	// An invalid time range is the API's message too.
	submitSearch(t, ctx, searchState{Since: "7d"})
	waitPage(t, ctx, "the range's error", `document.querySelector('#search-view').dataset.status === 'invalid' && document.querySelector('#filter-error').textContent.includes('since: invalid value "7d"')`)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "search.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSearchBurst: 2,000 events created within seconds while the page
// watches are all counted, in far fewer repaints than events, and the
// page answers throughout.
func TestSearchBurst(t *testing.T) {
	const n = 2000
	ctx := browser(t)
	srv := startEventsd(t, true, false)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/search.html")); err != nil {
		t.Fatal(err)
	}
	waitSearch(t, ctx, "the empty search", searchState{})
	waitPage(t, ctx, "the watch", `document.querySelector('#search-view').dataset.live === 'watching'`)
	repaints0, err := chromedp.Run(ctx, chromedp.Evaluate[int](`+document.querySelector('#search-view').dataset.repaints`))
	if err != nil {
		t.Fatal(err)
	}

	// While the burst is written, the page answers a script within a
	// second, each time it is asked.
	done := make(chan struct{})
	var slowest time.Duration
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			start := time.Now()
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1`)); err != nil {
				return
			}
			slowest = max(slowest, time.Since(start))
		}
	}()
	start := time.Now()
	createSearchEvents(t, srv, n, time.Now())
	written := time.Since(start)
	waitPage(t, ctx, "every event of the burst", fmt.Sprintf(`document.querySelector('#search-view').dataset.events === '%d'`, n))
	close(done)
	<-probed
	got, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ Repaints, Rows, Changes, RenderMs int }](`({Repaints: +document.querySelector('#search-view').dataset.repaints,
		Rows: document.querySelectorAll('#results tbody tr').length, Changes: +document.querySelector('#search-view').dataset.changes,
		RenderMs: +document.querySelector('#search-view').dataset.renderMs})`))
	if err != nil {
		t.Fatal(err)
	}
	repaints := got.Repaints - repaints0
	t.Logf("%d events written in %v; the page repainted %d times for %d changes (the longest %d ms), %d rows drawn; slowest answer %v", n, written, repaints, got.Changes, got.RenderMs, got.Rows, slowest)
	if got.Changes != n {
		t.Errorf("%d changes applied, want %d", got.Changes, n)
	}
	// One repaint per 500 ms at most: a burst of a few seconds is a few
	// dozen, however the events were spread.
	if limit := int(written/(500*time.Millisecond)) + 10; repaints > limit || repaints > n/10 {
		t.Errorf("%d repaints for %d events written in %v: want at most %d", repaints, n, written, limit)
	}
	if got.Rows != 200 {
		t.Errorf("%d rows drawn, want the first 200", got.Rows)
	}
	if more, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#more-text').textContent`)); more != "1800 more, older." {
		t.Errorf("more: %q", more)
	}
	// Generous bounds: the machine also runs eventsd and the writers
	// (with the race detector); the page's own repaint is the tighter.
	// The histogram follows, its facets read again at most every 5 s.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelector('#histogram').dataset.occurrences === '%d'`, searchOccurrences(n)), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		h, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(document.querySelector('#histogram').dataset) + ' ' + JSON.stringify(document.querySelector('#search-view').dataset) + ' ' + document.querySelector('#histogram-note').textContent`))
		t.Fatalf("waiting for the burst in the histogram: %v (%s)", err, h)
	}
	if slowest > 2*time.Second || got.RenderMs > 500 {
		t.Errorf("during the burst the page took %v to answer, and %d ms to repaint: want under 2 s and 500 ms", slowest, got.RenderMs)
	}
}

// TestSearchFacets: the histogram counts the occurrences of the events
// searched, a drag across it and a click on a bar zoom the list into
// that time, and clicking a loudest reason adds it as a filter. It needs
// eventsd's facets.
func TestSearchFacets(t *testing.T) {
	ctx := browser(t)
	srv := startEventsd(t, true, false)
	now := time.Now()
	evs := createSearchEvents(t, srv, 60, now)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/search.html")); err != nil {
		t.Fatal(err)
	}
	waitSearch(t, ctx, "every event", searchState{})
	waitPage(t, ctx, "the histogram", `['ready', 'error'].includes(document.querySelector('#search-view').dataset.facets)`)

	occurrences := searchOccurrences(len(evs))
	hist, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Status            string
		Occurrences, Bars int
		Note              string
	}](`({Status: document.querySelector('#histogram').dataset.status, Occurrences: +document.querySelector('#histogram').dataset.occurrences,
		Bars: document.querySelectorAll('#histo rect.bar').length, Note: document.querySelector('#histogram-note').textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if hist.Status != "ready" {
		t.Fatalf("the histogram: %s (%s)", hist.Status, hist.Note)
	}
	if hist.Occurrences != occurrences || hist.Bars == 0 {
		t.Errorf("the histogram counts %d occurrences in %d bars, want %d", hist.Occurrences, hist.Bars, occurrences)
	}

	// A drag across the middle half of the histogram.
	box, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ X, Y, W float64 }](`(() => { const r = document.querySelector('#histo svg').getBoundingClientRect(); return {X: r.left, Y: r.top + 50, W: r.width}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	x1, x2 := box.X+box.W/4, box.X+3*box.W/4
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x1, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, (x1+x2)/2, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x2, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x2, box.Y, chromedp.ButtonLeft),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the dragged range", `document.querySelector('#search-view').dataset.status === 'ready' && window.kubevents.state.since !== '' && window.kubevents.state.until !== ''`)
	checkRange(t, ctx, evs, "the dragged range")

	// A click on the highest bar: that bucket.
	waitPage(t, ctx, "the zoomed histogram", `document.querySelector('#search-view').dataset.facets === 'ready'`)
	before, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.kubevents.state)`))
	bar, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ X, Y float64 }](`(() => { const bars = [...document.querySelectorAll('#histo rect.bar')];
		const b = bars.reduce((a, c) => +c.dataset.occurrences > +a.dataset.occurrences ? c : a); const r = b.getBoundingClientRect();
		return {X: r.left + r.width / 2, Y: r.bottom - 1}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, bar.X, bar.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, bar.X, bar.Y, chromedp.ButtonLeft),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the clicked bar's range", `document.querySelector('#search-view').dataset.status === 'ready' && JSON.stringify(window.kubevents.state) !== `+jsString(before))
	checkRange(t, ctx, evs, "the clicked bar")

	// The loudest reason, clicked, becomes the reason filter (the range
	// cleared first, so that every reason counts).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#clear-range`))); err != nil {
		t.Fatal(err)
	}
	waitSearch(t, ctx, "every time again", searchState{})
	waitPage(t, ctx, "the loudest reasons", `document.querySelector('#search-view').dataset.facets === 'ready' && document.querySelectorAll('#loudest-tables [data-field="reason"] button.facet').length > 0`)
	top, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#loudest-tables [data-field="reason"] button.facet').dataset.value`))
	if err != nil {
		t.Fatal(err)
	}
	byReason := map[string]int{}
	for i, e := range evs {
		byReason[e.Reason]++
		if i%10 == 0 {
			byReason[e.Reason] += i + 1
		}
	}
	for r, c := range byReason {
		if c > byReason[top] {
			t.Errorf("the loudest reason is %s (%d occurrences), but %s has %d", top, byReason[top], r, c)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#loudest-tables [data-field="reason"] button.facet`))); err != nil {
		t.Fatal(err)
	}
	waitSearch(t, ctx, "the loudest reason as a filter", searchState{Reason: top})
	checkShown(t, ctx, "the loudest reason", uidsOf(evs, func(e searchEvent) bool { return e.Reason == top }))
	waitPage(t, ctx, "the loudest reason's facets", `document.querySelector('#search-view').dataset.facets === 'ready'`)

	// With a filter too: the series of more than 10 among them.
	series := searchState{Filter: `has(object.series) && object.series.count > 10`, Reason: top}
	submitSearch(t, ctx, series)
	waitSearch(t, ctx, "a filter with the loudest reason", series)
	checkShown(t, ctx, "a filter with the loudest reason", uidsOf(evs, func(e searchEvent) bool {
		i := slices.IndexFunc(evs, func(x searchEvent) bool { return x.UID == e.UID })
		return e.Reason == top && i%10 == 0 && i+2 > 10
	}))
	waitPage(t, ctx, "the filter's facets", `document.querySelector('#search-view').dataset.facets === 'ready'`)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "search.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "docs", "search.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRange checks that the page shows exactly the events last observed
// in its state's since and until.
func checkRange(t *testing.T, ctx context.Context, evs []searchEvent, what string) {
	t.Helper()
	st, err := chromedp.Run(ctx, chromedp.Evaluate[searchState](`window.kubevents.state`))
	if err != nil {
		t.Fatal(err)
	}
	since, err1 := time.Parse(time.RFC3339, st.Since)
	until, err2 := time.Parse(time.RFC3339, st.Until)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: since %q, until %q: want RFC 3339 times", what, st.Since, st.Until)
	}
	want := uidsOf(evs, func(e searchEvent) bool { return !e.Last.Before(since) && e.Last.Before(until) })
	if len(want) == 0 || len(want) == len(evs) {
		t.Errorf("%s: %s to %s holds %d of the %d events: want some, not all", what, st.Since, st.Until, len(want), len(evs))
	}
	checkShown(t, ctx, what, want)
}

// TestSearchWithoutExtensions: against an eventsd with a token and
// --extensions=false, and without facets (404, as another API server),
// the search page asks for the token, lists every event, says that the
// server gives no facets, and shows the server's refusal of a filter
// under the box.
func TestSearchWithoutExtensions(t *testing.T) {
	ctx := browser(t)
	srv := startEventsd(t, false, true)
	srv.noFacets.Store(true)
	evs := createSearchEvents(t, srv, 12, time.Now())
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/search.html")); err != nil {
		t.Fatal(err)
	}
	giveToken(t, ctx, testToken)
	waitSearch(t, ctx, "every event", searchState{})
	checkShown(t, ctx, "every event", uidsOf(evs, func(searchEvent) bool { return true }))
	waitPage(t, ctx, "no facets", `document.querySelector('#search-view').dataset.facets === 'error' && document.querySelector('#histogram-note').textContent.startsWith('This server does not summarize events')`)

	submitSearch(t, ctx, searchState{Filter: "true"})
	waitPage(t, ctx, "the refused filter", `document.querySelector('#search-view').dataset.status === 'invalid' && document.querySelector('#filter-error').textContent.includes('extensions are disabled')`)
	// The field filters still work: they are upstream's.
	warnings := searchState{Type: "Warning", Namespace: "shop"}
	submitSearch(t, ctx, warnings)
	waitSearch(t, ctx, "shop's Warnings", warnings)
	checkShown(t, ctx, "shop's Warnings", uidsOf(evs, func(e searchEvent) bool { return e.Type == "Warning" && e.Namespace == "shop" }))
}
