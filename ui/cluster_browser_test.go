package ui_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/server"
)

// startFleet serves eventsd with the UI and a fleet of two clusters, east
// and west, and writes into each, through client-go at /clusters/NAME,
// events about Pod default/web-1 (same-named in both; a Warning in each)
// whose reasons name their cluster, and one about Deployment default/web
// in east.
func startFleet(t *testing.T) *eventsd {
	t.Helper()
	srv := startEventsdWith(t, true, false, func(c *server.Config) {
		c.Clusters = []server.Cluster{{Name: "east"}, {Name: "west"}}
	})
	now := time.Now()
	for _, e := range []struct{ cluster, name, typ, reason, kind, object string }{
		{"east", "web-1.a", corev1.EventTypeNormal, "EastScheduled", "Pod", "web-1"},
		{"east", "web-1.b", corev1.EventTypeWarning, "EastBackOff", "Pod", "web-1"},
		{"west", "web-1.a", corev1.EventTypeWarning, "WestScheduled", "Pod", "web-1"},
		{"east", "web.a", corev1.EventTypeNormal, "EastScaled", "Deployment", "web"},
	} {
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.url + "/clusters/" + e.cluster, QPS: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.EventsV1().Events("default").Create(context.Background(), &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: e.name}, EventTime: metav1.NewMicroTime(now.Add(-time.Duration(len(e.reason)) * time.Minute)),
			Type: e.typ, Reason: e.reason, Action: "Test", Note: e.reason + " for the test",
			ReportingController: "test", ReportingInstance: "test-1",
			Regarding: corev1.ObjectReference{Kind: e.kind, Namespace: "default", Name: e.object},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("writing %s's %s: %v", e.cluster, e.name, err)
		}
	}
	return srv
}

// evalJS evaluates a JavaScript expression on the page.
func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// pickCluster picks cluster in the page's cluster picker.
func pickCluster(t *testing.T, ctx context.Context, cluster string) {
	t.Helper()
	pick := chromedp.Evaluate[bool](`(() => { const s = document.querySelector('#cluster'); s.value = ` + jsString(cluster) + `; s.dispatchEvent(new Event('change')); return true; })()`)
	// The page goes to the picked cluster's URL: wait for it to load.
	if _, err := chromedp.RunResponse(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := pick(ctx, tg)
		return err
	})); err != nil {
		t.Fatalf("picking cluster %q: %v", cluster, err)
	}
}

const laneReasonsJS = `[...document.querySelectorAll('#lanes .reason')].map(r => r.textContent).sort()`

// TestClusterPicker: on an eventsd serving a fleet, the timeline and
// search pages offer its clusters; picking one shows that cluster's
// events only, the cluster kept in the page's URL (and in its links);
// every cluster at once shows a Cluster column on the search page and
// each event's cluster in the timeline's details, and no family. Without
// a fleet, the picker stays hidden.
func TestClusterPicker(t *testing.T) {
	ctx := browser(t)
	srv := startFleet(t)
	ready := `document.querySelector('#timeline').dataset.status === 'ready' && document.querySelector('#timeline').dataset.live === 'watching' && !document.querySelector('#cluster-picker').hidden`

	// east's Pod: east's events only; the picker lists the fleet.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?object=default/pod/web-1&cluster=east")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "east's timeline", ready+` && document.querySelectorAll('#lanes .lane[data-lane]').length === 2`)
	if got, want := evalJS[[]string](t, ctx, laneReasonsJS), []string{"EastBackOff", "EastScheduled"}; !slices.Equal(got, want) {
		t.Errorf("east's web-1: lanes %q, want %q", got, want)
	}
	opts := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#cluster option')].map(o => o.value + '=' + o.textContent)`)
	if want := []string{"=Server root", "east=east", "west=west", "*=All clusters"}; !slices.Equal(opts, want) {
		t.Errorf("the picker offers %q, want %q", opts, want)
	}
	if got := evalJS[string](t, ctx, `document.querySelector('#cluster').value + ' ' + document.querySelector('#search-link').getAttribute('href') + ' ' + document.querySelector('#home').getAttribute('href')`); got != "east search.html?cluster=east ./?cluster=east" {
		t.Errorf("picked cluster, search and home links: %q, want east and the search and overview of east", got)
	}

	// Picking west: west's events only, named in the URL.
	pickCluster(t, ctx, "west")
	waitPage(t, ctx, "west's timeline", ready+` && location.search.includes('cluster=west') && document.querySelectorAll('#lanes .lane[data-lane]').length === 1`)
	if got, want := evalJS[[]string](t, ctx, laneReasonsJS), []string{"WestScheduled"}; !slices.Equal(got, want) {
		t.Errorf("west's web-1: lanes %q, want %q", got, want)
	}
	if got := evalJS[string](t, ctx, `location.search`); got != "?object=default%2FPod%2Fweb-1&cluster=west" {
		t.Errorf("west's URL: %q", got)
	}

	// Every cluster: both clusters' events, each with its cluster in the
	// details; a Deployment (a family by default) shown alone, the family
	// view disabled with a note.
	pickCluster(t, ctx, "*")
	waitPage(t, ctx, "every cluster's timeline", ready+` && location.search.includes('cluster=*') && document.querySelectorAll('#lanes .lane[data-lane]').length === 3`)
	if got, want := evalJS[[]string](t, ctx, laneReasonsJS), []string{"EastBackOff", "EastScheduled", "WestScheduled"}; !slices.Equal(got, want) {
		t.Errorf("every cluster's web-1: lanes %q, want %q", got, want)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#lanes .item[data-reason="WestScheduled"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the event's details with its cluster", `[...document.querySelectorAll('#details dt')].some(d => d.textContent === 'cluster' && d.nextElementSibling.textContent === 'west') && location.search.includes('event=') && location.search.endsWith('&cluster=*')`)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?object=default/deployment/web&cluster=*")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the Deployment across clusters", ready+` && document.querySelectorAll('#lanes .lane[data-lane]').length === 1`)
	got := evalJS[string](t, ctx, `document.querySelector('#timeline').dataset.view + ' ' + document.querySelector('#view button[data-view="family"]').disabled + ' ' + !document.querySelector('#family-note').hidden`)
	if got != "object true true" {
		t.Errorf("a Deployment across clusters: view, family disabled, note shown: %q, want object true true", got)
	}

	// The overview of every cluster: web-1 of each cluster apart, with its
	// cluster, linked to its timeline there.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?cluster=*")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "every cluster's overview", `document.querySelector('#overview').dataset.status === 'ready' && document.querySelectorAll('#top-objects tbody tr').length === 2`)
	top := evalJS[[]string](t, ctx, `[document.querySelector('#top-objects thead th').textContent, ...[...document.querySelectorAll('#top-objects tbody tr')].map(r => r.cells[0].textContent + ' ' + r.querySelector('a').getAttribute('href')).sort()]`)
	if want := []string{"Cluster", "east /ui/?object=default%2FPod%2Fweb-1&cluster=east", "west /ui/?object=default%2FPod%2Fweb-1&cluster=west"}; !slices.Equal(top, want) {
		t.Errorf("every cluster's overview: %q, want %q", top, want)
	}

	// The search page: every cluster with a Cluster column, each row's
	// object linked to its timeline in its own cluster; then east alone.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/search.html?cluster=*")); err != nil {
		t.Fatal(err)
	}
	searchReady := `document.querySelector('#search-view').dataset.status === 'ready' && !document.querySelector('#cluster-picker').hidden`
	waitPage(t, ctx, "every cluster's search", searchReady+` && document.querySelectorAll('#results tbody tr').length === 4`)
	if got := evalJS[string](t, ctx, `document.querySelector('#results thead th').textContent`); got != "Cluster" {
		t.Errorf("every cluster's results: first column %q, want Cluster", got)
	}
	rows := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#results tbody tr')].map(r => r.cells[0].textContent + ' ' + r.querySelector('td.reason').textContent + ' ' + r.querySelector('a').getAttribute('href')).sort()`)
	want := []string{
		"east EastBackOff ./?object=default%2FPod%2Fweb-1&cluster=east",
		"east EastScaled ./?object=default%2FDeployment%2Fweb&cluster=east",
		"east EastScheduled ./?object=default%2FPod%2Fweb-1&cluster=east",
		"west WestScheduled ./?object=default%2FPod%2Fweb-1&cluster=west",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("every cluster's results:\n got %q\nwant %q", rows, want)
	}
	pickCluster(t, ctx, "east")
	waitPage(t, ctx, "east's search", searchReady+` && location.search === '?cluster=east' && document.querySelectorAll('#results tbody tr').length === 3`)
	reasons := evalJS[[]string](t, ctx, `[...document.querySelectorAll('#results tbody td.reason')].map(r => r.textContent).sort()`)
	if want := []string{"EastBackOff", "EastScaled", "EastScheduled"}; !slices.Equal(reasons, want) {
		t.Errorf("east's results: %q, want %q", reasons, want)
	}
	if got := evalJS[string](t, ctx, `document.querySelector('#results thead th').textContent + ' ' + document.querySelector('#timeline-link').getAttribute('href') + ' ' + document.querySelector('header .brand').getAttribute('href')`); got != "Last seen ./?cluster=east ./?cluster=east" {
		t.Errorf("east's results: first column and timeline link %q, want Last seen and the timeline of east", got)
	}

	// Without a fleet: no picker.
	plain := startEventsd(t, true, false)
	if err := chromedp.Do(ctx, chromedp.Navigate(plain.url+"/ui/search.html")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the search without a fleet, its clusters read", `document.querySelector('#search-view').dataset.status === 'ready' && document.querySelector('#cluster-picker').dataset.clusters === '0'`)
	if got := evalJS[bool](t, ctx, `document.querySelector('#cluster-picker').hidden && document.querySelector('#cluster').options.length === 0`); !got {
		t.Errorf("without a fleet the picker shows")
	}
}
