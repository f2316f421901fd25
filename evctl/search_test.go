package evctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// searchEvent is one event the search tests write, as the test's
// brute-force evaluation sees it.
type searchEvent struct {
	ns, name, kind, object, typ, reason, note string
	last                                      time.Time
}

// writeSearchFixture writes n events spread over three namespaces, four
// reasons, two kinds, notes some of which mention OOM, and the last three
// hours before now; it returns them.
func writeSearchFixture(t *testing.T, fe *familyEnv, n int) []searchEvent {
	t.Helper()
	rnd := rand.New(rand.NewPCG(32, 5))
	namespaces := []string{"shop", "dev", "kube-system"}
	reasons := []string{"BackOff", "Pulled", "Killing", "FailedScheduling"}
	notes := []string{"Back-off restarting failed container", "Container web was OOMKilled", "Successfully pulled image",
		"0/3 nodes are available: Insufficient cpu", "Memory cgroup out of memory: OOM killer chose web"}
	var out []searchEvent
	for i := range n {
		e := searchEvent{ns: namespaces[rnd.IntN(len(namespaces))], name: fmt.Sprintf("ev-%04d", i),
			kind: []string{"Pod", "Deployment"}[rnd.IntN(2)], typ: []string{"Normal", "Warning"}[rnd.IntN(2)],
			reason: reasons[rnd.IntN(len(reasons))], note: notes[rnd.IntN(len(notes))],
			// Whole minutes and 7 s: never on a bound the cases use.
			last: at(time.Duration(rnd.IntN(180))*time.Minute + 7*time.Second)}
		e.object = fmt.Sprintf("web-%d", rnd.IntN(5))
		ts := metav1.NewTime(e.last)
		_, err := fe.cs.CoreV1().Events(e.ns).Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: e.name},
			InvolvedObject: corev1.ObjectReference{Kind: e.kind, Namespace: e.ns, Name: e.object, UID: types.UID(e.ns + e.object)},
			Reason:         e.reason, Message: e.note, Type: e.typ, Source: kubelet,
			FirstTimestamp: metav1.NewTime(e.last.Add(-time.Minute)), LastTimestamp: ts, Count: 2,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// runEvctl runs evctl against url with args.
func runEvctl(url string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--server", url}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// eventNames reads the events' names from evctl's -o json.
func eventNames(t *testing.T, out string) []string {
	t.Helper()
	var l eventsv1.EventList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("reading evctl's JSON: %v\n%s", err, out)
	}
	names := []string{}
	for _, ev := range l.Items {
		names = append(names, ev.Name)
	}
	slices.Sort(names)
	return names
}

// TestSearch: evctl search answers exactly what a brute-force evaluation
// of the same conditions over the events written selects, with filters,
// time ranges, namespaces and selectors together, across pages.
func TestSearch(t *testing.T) {
	fe := newFamilyEnv(t, true)
	evs := writeSearchFixture(t, fe, 1200)
	for _, c := range []struct {
		args []string
		want func(searchEvent) bool
	}{
		{[]string{`object.note.contains("OOM")`, "-A"}, func(e searchEvent) bool { return strings.Contains(e.note, "OOM") }},
		{[]string{`object.type == "Warning" && object.regarding.kind == "Pod"`, "-n", "shop", "--since", "1h"}, func(e searchEvent) bool {
			return e.typ == "Warning" && e.kind == "Pod" && e.ns == "shop" && !e.last.Before(at(time.Hour))
		}},
		{[]string{"-A", "--since", "2h", "--until", "30m"}, func(e searchEvent) bool {
			return !e.last.Before(at(2*time.Hour)) && e.last.Before(at(30*time.Minute))
		}},
		{[]string{`object.note.matches("^(Back-off|0/3)") && object.regarding.name != "web-1"`, "-A", "--field-selector", "reason=BackOff",
			"--until", now.Add(-time.Hour).Format(time.RFC3339)}, func(e searchEvent) bool {
			return (strings.HasPrefix(e.note, "Back-off") || strings.HasPrefix(e.note, "0/3")) && e.object != "web-1" &&
				e.reason == "BackOff" && e.last.Before(at(time.Hour))
		}},
		{[]string{`object.reason.startsWith("Fail")`, "-n", "dev"}, func(e searchEvent) bool {
			return e.ns == "dev" && strings.HasPrefix(e.reason, "Fail")
		}},
	} {
		out, errOut, err := runEvctl(fe.url, append([]string{"search", "-o", "json"}, c.args...)...)
		if err != nil {
			t.Errorf("evctl search %q: %v\n%s", c.args, err, errOut)
			continue
		}
		want := []string{}
		for _, e := range evs {
			if c.want(e) {
				want = append(want, e.name)
			}
		}
		slices.Sort(want)
		if got := eventNames(t, out); !slices.Equal(got, want) {
			t.Errorf("evctl search %q: %d events, want %d\n got %q\nwant %q", c.args, len(got), len(want), got, want)
		}
		if len(want) == 0 || len(want) == len(evs) {
			t.Errorf("evctl search %q: the case selects %d of %d events; it must select some and not all", c.args, len(want), len(evs))
		}
	}
}

// TestSearchTable: the table is evctl get's, by last occurrence, with
// the namespace column across namespaces; --limit stops early and says
// that more matched.
func TestSearchTable(t *testing.T) {
	fe := newFamilyEnv(t, true)
	evs := writeSearchFixture(t, fe, 40)
	out, errOut, err := runEvctl(fe.url, "search", `object.type == "Warning"`, "-A", "--limit", "7")
	if err != nil {
		t.Fatalf("evctl search --limit 7: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "NAMESPACE") || !strings.Contains(lines[0], "LAST SEEN") {
		t.Errorf("evctl search --limit 7: want a header and 7 rows:\n%s", out)
	}
	if !strings.Contains(errOut, "more match: raise --limit") {
		t.Errorf("evctl search --limit 7: stderr %q, want the truncation said", errOut)
	}
	warnings := 0
	for _, e := range evs {
		if e.typ == "Warning" {
			warnings++
		}
	}
	out, errOut, err = runEvctl(fe.url, "search", `object.type == "Warning"`, "-A", "--limit", fmt.Sprint(warnings))
	if err != nil || errOut != "" || len(strings.Split(strings.TrimSpace(out), "\n")) != warnings+1 {
		t.Errorf("evctl search --limit %d (all the warnings): %v, stderr %q\n%s", warnings, err, errOut, out)
	}
	_, errOut, err = runEvctl(fe.url, "search", `object.reason == "Nothing"`, "-n", "shop")
	if err != nil || errOut != "No events found in shop namespace.\n" {
		t.Errorf("evctl search selecting nothing: %v, stderr %q", err, errOut)
	}
}

// TestSearchErrors: what the server refuses is an error with its message;
// what evctl can tell is wrong is refused before asking.
func TestSearchErrors(t *testing.T) {
	fe := newFamilyEnv(t, true)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"search", `object.note.contains(`}, []string{"the server refused the search", "invalid filter", "Syntax error"}},
		{[]string{"search", `object.note`}, []string{"the server refused the search", "bool"}},
		{[]string{"search", `object.nothing == 1`}, []string{"the server refused the search", "nothing"}},
		{[]string{"search", "--since", "7d"}, []string{"the server refused the search", "since", `"7d"`}},
		{[]string{"search", "--since", "1h", "--until", "2h"}, []string{"until", "must be after since"}},
		{[]string{"search", " "}, []string{"EXPR is empty"}},
		{[]string{"search", "--limit", "-1"}, []string{"--limit must not be negative"}},
		{[]string{"search", "-o", "xml"}, []string{`unknown output format "xml"`}},
	} {
		_, _, err := runEvctl(fe.url, c.args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("evctl %q: %v, want an error containing %q", c.args, err, w)
			}
		}
	}
	// eventsd without its extensions refuses filters, saying so.
	plain := newFamilyEnv(t, false)
	if _, _, err := runEvctl(plain.url, "search", "true"); err == nil || !strings.Contains(err.Error(), "extensions are disabled") {
		t.Errorf("evctl search against eventsd --extensions=false: %v, want the refusal", err)
	}
}

// TestSearchNeedsEventsd: a server that is not eventsd would ignore the
// filter and answer every event, so evctl refuses to ask it, saying why;
// so does a kube-apiserver's own events.k8s.io when eventsd is
// registered beside it.
func TestSearchNeedsEventsd(t *testing.T) {
	for _, c := range []struct {
		what   string
		groups []string
		args   []string
		want   string
	}{
		{"kube-apiserver without eventsd", []string{"apiregistration.k8s.io", "events.k8s.io"}, nil,
			"the server does not serve events.kubevents.io: searches (filter, since, until) need eventsd"},
		{"kube-apiserver with eventsd, events.k8s.io asked for", []string{"apiregistration.k8s.io", "events.k8s.io", "events.kubevents.io"},
			[]string{"--api-group", "events.k8s.io"}, "use --api-group=events.kubevents.io"},
	} {
		srv := discoveryServer(t, c.groups...)
		_, _, err := runEvctl(srv.URL, append([]string{"search", "true"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.what, err, c.want)
		}
	}
}

// TestSearchWatch: search -w prints the list, then each new event the
// filter and selectors select as it is written, once, and no other; it
// refuses what only bounds a list.
func TestSearchWatch(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	out, waitFor := fe.runLive("search", `object.type == "Warning" || object.note.contains("restart")`,
		"-A", "-w", "--since", "30m", "--field-selector", "regarding.kind=Pod")
	waitFor("Back-off restarting failed container web")
	fe.event(famPodA, 3*time.Minute, corev1.EventTypeNormal, "Started", "Started container web again", kubelet)
	fe.event(famNode, 2*time.Minute, corev1.EventTypeWarning, "NodeNotReady", "Node node-1 status is now: NodeNotReady", kubelet)
	fe.event(famPodA, time.Minute, corev1.EventTypeNormal, "Killing", "Stopping container web: will restart", kubelet)
	fe.event(famPodA, 50*time.Second, corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed", kubelet)
	waitFor("Liveness probe failed")
	got := out.String()
	for _, want := range []string{"Back-off restarting failed container web", "Stopping container web: will restart", "Liveness probe failed"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("search -w: want %q once:\n%s", want, got)
		}
	}
	for _, not := range []string{"Started container web again", "NodeNotReady", "Pulled"} {
		if strings.Contains(got, not) {
			t.Errorf("search -w printed %q, which the search does not select:\n%s", not, got)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--until", "1h"}, "--until bounds a list"},
		{[]string{"--limit", "5"}, "--limit bounds a list"},
	} {
		if _, _, err := fe.run(append([]string{"search", "true", "-w"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("search -w %q: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
