package evctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
)

// TestTop: evctl top ranks reasons (or another field) by the occurrences
// of the events eventsd selects in the namespace, the time range and the
// type asked for, and draws the occurrences over time.
func TestTop(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	for _, c := range []struct {
		name string
		args []string
		want []string // lines, after the header, with runs of spaces as one
	}{
		{"the last hour's reasons in shop", []string{"top"}, []string{
			"ScalingReplicaSet 2 2 29%", "SuccessfulCreate 2 2 29%", "BackOff 1 1 14%", "Pulled 1 1 14%", "Started 1 1 14%"}},
		{"the last 15 minutes", []string{"top", "--since", "15m"}, []string{"BackOff 1 1 100%"}},
		{"warnings", []string{"top", "--type", "warning"}, []string{"BackOff 1 1 100%"}},
		{"kinds everywhere, top 2", []string{"top", "kind", "-A", "--top", "2"}, []string{
			"Pod 3 3 38%", "Deployment 2 2 25%", "(other) 3 3 38%"}},
		{"a filter", []string{"top", "namespace", "-A", "--filter", `object.regarding.name.startsWith("web")`}, []string{"shop 6 6 100%"}},
		{"over time", []string{"top", "time", "--since", "40m", "--until", "0s", "--bucket", "10m"}, []string{
			"2026-11-20T09:50:00Z 0 0", "2026-11-20T10:00:00Z 0 0",
			"2026-11-20T10:10:00Z 1 1 " + strings.Repeat("#", topBarWidth), "2026-11-20T10:20:00Z 1 1 " + strings.Repeat("#", topBarWidth)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := fe.run(c.args...)
			if err != nil {
				t.Fatalf("%v: %s", err, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var got []string
			for _, l := range lines[1:] {
				got = append(got, strings.Join(strings.Fields(l), " "))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", out, strings.Join(c.want, "\n"))
			}
		})
	}

	out, _, err := fe.run("top", "-o", "json", "--since", "")
	var l eventapi.FacetList
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || l.Kind != "FacetList" || l.Events != 7 || l.Occurrences != 7 {
		t.Fatalf("-o json: %v %s", err, out)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"top", "pods"}, `not "pods"`},
		{[]string{"top", "--type", "loud"}, "Normal or Warning"},
		{[]string{"top", "--top", "0"}, "--top must be at least 1"},
		{[]string{"top", "--since", "1h", "--until", "2h"}, "must be after since"},
		{[]string{"top", "--filter", "object.note"}, "must evaluate to a bool"},
	} {
		if _, _, err := fe.run(c.args...); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.msg)
		}
	}
}

// TestTopNeedsEventsd: a server without facets (any API server but
// eventsd) gets an error that says evctl top needs eventsd.
func TestTopNeedsEventsd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	cmd := NewCommand(&strings.Builder{}, &strings.Builder{})
	cmd.SetArgs([]string{"--server", srv.URL, "--api-group", "events.k8s.io", "top"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "evctl top needs eventsd") {
		t.Fatalf("%v", err)
	}
}
