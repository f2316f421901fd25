package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTimeRangeLists: since and until select the events last observed in
// [since, until), as RFC 3339 times or durations back from the server's
// clock, in each group, with field selectors, filters and pages.
func TestTimeRangeLists(t *testing.T) {
	e := newEnv(t, 24*time.Hour)
	t0 := e.clock.Now()
	const n = 300
	for i := range n {
		// Event i was last observed i minutes before t0; every third as a
		// series, whose last observation is the series' own.
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%04d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("web-%d", i%7), Namespace: "default"},
			Reason:         "Started", Message: "m", Type: corev1.EventTypeNormal,
		}
		at := t0.Add(-time.Duration(i) * time.Minute)
		if i%3 == 0 {
			ev.EventTime = metav1.NewMicroTime(at.Add(-time.Hour))
			ev.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(at)}
			ev.ReportingController, ev.ReportingInstance, ev.Action = "c", "i", "a"
		} else {
			ev.LastTimestamp = metav1.NewTime(at)
		}
		if _, err := e.cs.CoreV1().Events("default").Create(e.ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(cond func(i int) bool) []string {
		var out []string
		for i := range n {
			if cond(i) {
				out = append(out, fmt.Sprintf("e%04d", i))
			}
		}
		return out
	}
	rfc := func(d time.Duration) string { return t0.Add(-d).UTC().Format(time.RFC3339) }
	for _, c := range []struct {
		path  string
		q     url.Values
		limit int
		want  []string
	}{
		{"/api/v1/events", url.Values{"since": {"30m"}}, 0, want(func(i int) bool { return i <= 30 })},
		{"/api/v1/namespaces/default/events", url.Values{"since": {rfc(100 * time.Minute)}, "until": {rfc(40 * time.Minute)}}, 7, want(func(i int) bool { return i > 40 && i <= 100 })},
		{"/apis/events.k8s.io/v1/events", url.Values{"until": {"4h"}, "fieldSelector": {"regarding.name=web-3"}}, 5, want(func(i int) bool { return i >= 240 && i%7 == 3 })},
		{"/apis/events.kubevents.io/v1/events", url.Values{"since": {"2h"}, "filter": {`has(object.series)`}}, 0, want(func(i int) bool { return i <= 120 && i%3 == 0 })},
	} {
		got, code, body := e.listNames(c.path, c.q, c.limit)
		if code != http.StatusOK || !slices.Equal(got, c.want) {
			t.Fatalf("%s %v: %d %.200s: got %d names %v, want %d", c.path, c.q, code, body, len(got), got, len(c.want))
		}
		if len(c.want) == 0 {
			t.Fatalf("%v selects nothing: the case tests nothing", c.q)
		}
	}
}

// TestTimeRangeRefused: a bound that is neither a time nor a duration
// (not negative), an empty range, a time range on a watch, or any time range
// with extensions off, is 400 saying why.
func TestTimeRangeRefused(t *testing.T) {
	e := newEnv(t, time.Hour)
	for _, c := range []struct{ path, query, msg string }{
		{"/api/v1/events", "since=yesterday", "give an RFC 3339 time"},
		{"/api/v1/events", "until=-5m", "must not be negative"},
		{"/api/v1/events", "since=1h&since=2h", "at most one"},
		{"/api/v1/events", "since=1h&until=2h", "must be after since"},
		{"/api/v1/watch/events", "since=1h", "since applies to lists"},
		{"/apis/events.kubevents.io/v1/lineages", "since=1h&fieldSelector=family.kind%3DPod,family.name%3Dp,family.namespace%3Ddefault", "time range"},
	} {
		code, body := e.do(http.MethodGet, c.path+"?"+c.query, "", "", "")
		if code != http.StatusBadRequest || !strings.Contains(body, c.msg) || !strings.Contains(body, `"reason":"BadRequest"`) {
			t.Errorf("%s?%s: %d %s, want 400 saying %q", c.path, c.query, code, body, c.msg)
		}
	}
	off := newEnvWith(t, time.Hour, func(c *server.Config) { c.DisableExtensions = true })
	if code, body := off.do(http.MethodGet, "/api/v1/events?since=1h", "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "extensions are disabled") {
		t.Fatalf("extensions off: %d %s", code, body)
	}
}
