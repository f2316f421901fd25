package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/server"
)

// familyEnv is a server with a lineage holding a Deployment web (two
// ReplicaSets, three Pods, one Pod deleted) and an unrelated Deployment
// api, and an event about each object.
type familyEnv struct {
	*env
	g *lineage.Graph
}

func newFamilyEnv(t *testing.T) *familyEnv {
	t.Helper()
	var g *lineage.Graph
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		g = lineage.New(lineage.Options{Clock: c.Clock.(*clocktesting.FakeClock)})
		g.SetLearning("")
		c.Lineage = g
	})
	fe := &familyEnv{env: e, g: g}
	objs := []lineage.Object{
		{ID: "d", Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "web"},
		{ID: "rs1", Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "shop", Name: "web-1", Owners: []lineage.ID{"d"}},
		{ID: "rs2", Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "shop", Name: "web-2", Owners: []lineage.ID{"d"}},
		{ID: "p1", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-1-a", Owners: []lineage.ID{"rs1"}},
		{ID: "p2", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-2-a", Owners: []lineage.ID{"rs2"}},
		{ID: "e", Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "api"},
		{ID: "p3", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "api-1-a", Owners: []lineage.ID{"e"}},
	}
	for _, o := range objs {
		o.FirstSeen = e.clock.Now().Add(-time.Hour)
		g.Observe(o)
		fe.create(o.Kind, o.Name, types.UID(o.ID), "shop")
	}
	g.MarkDeleted("p1", time.Time{})
	// A same-named Deployment elsewhere, and an event naming a family
	// Pod without its uid.
	fe.create("Deployment", "web", "other-web", "elsewhere")
	fe.create("Pod", "web-2-a", "", "shop")
	return fe
}

// create writes a core/v1 event about kind/name in ns.
func (fe *familyEnv) create(kind, name string, uid types.UID, ns string) {
	fe.t.Helper()
	now := metav1.NewTime(fe.clock.Now())
	_, err := fe.cs.CoreV1().Events(ns).Create(fe.ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: strings.ToLower(name) + "."},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, UID: uid},
		Reason:         "Seen", Message: "about " + name, Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "test"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		fe.t.Fatal(err)
	}
}

// regarding returns the regarding names of evs, sorted, with a "*" for
// events without a uid.
func regarding(evs []corev1.Event) []string {
	var out []string
	for _, ev := range evs {
		n := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
		if ev.InvolvedObject.UID == "" {
			n += "*"
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestFamilyList(t *testing.T) {
	fe := newFamilyEnv(t)
	want := []string{"shop/web", "shop/web-1", "shop/web-1-a", "shop/web-2", "shop/web-2-a", "shop/web-2-a*"}
	for _, c := range []struct {
		name, ns, sel string
		want          []string
	}{
		{"namespaced", "shop", "family.kind=Deployment,family.name=web", want},
		{"kind in any case", "shop", "family.kind=deployment,family.name=web", want},
		{"across namespaces", "", "family.kind=Deployment,family.namespace=shop,family.name=web", want},
		{"across namespaces, any namespace's web", "", "family.kind=Deployment,family.name=web", append([]string{"elsewhere/web"}, want...)},
		{"by uid", "", "family.uid=rs2", []string{"shop/web-2", "shop/web-2-a", "shop/web-2-a*"}},
		{"with another selector", "shop", "family.kind=Deployment,family.name=web,involvedObject.kind=Pod", []string{"shop/web-1-a", "shop/web-2-a", "shop/web-2-a*"}},
		{"unrelated", "shop", "family.kind=Deployment,family.name=api", []string{"shop/api", "shop/api-1-a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := fe.cs.CoreV1().Events(c.ns).List(fe.ctx, metav1.ListOptions{FieldSelector: c.sel})
			if err != nil {
				t.Fatal(err)
			}
			if got := regarding(l.Items); !slices.Equal(got, c.want) {
				t.Errorf("core/v1 %q: %v, want %v", c.sel, got, c.want)
			}
			// events.k8s.io/v1, in pages of 2.
			var got []string
			opts := metav1.ListOptions{FieldSelector: strings.ReplaceAll(c.sel, "involvedObject.", "regarding."), Limit: 2}
			for {
				l, err := fe.cs.EventsV1().Events(c.ns).List(fe.ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range l.Items {
					n := ev.Regarding.Namespace + "/" + ev.Regarding.Name
					if ev.Regarding.UID == "" {
						n += "*"
					}
					got = append(got, n)
				}
				if opts.Continue = l.Continue; opts.Continue == "" {
					break
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("events.k8s.io/v1 paged %q: %v, want %v", c.sel, got, c.want)
			}
		})
	}
}

func TestFamilyBadSelectors(t *testing.T) {
	fe := newFamilyEnv(t)
	for _, sel := range []string{
		"family.kind=Deployment",
		"family.name=web",
		"family.kind=Deployment,family.name=web,family.withNodes=yes",
		"family.kind!=Deployment,family.name=web",
	} {
		_, err := fe.cs.CoreV1().Events("shop").List(fe.ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil || !strings.Contains(err.Error(), "family") {
			t.Errorf("%q: %v, want a 400 naming the family selector", sel, err)
		}
	}
}

// TestFamilyWarnings: a family the lineage cannot answer fully says so in
// a Warning header, and still lists the object's own events.
func TestFamilyWarnings(t *testing.T) {
	fe := newFamilyEnv(t)
	get := func(sel string) (int, string) {
		resp, err := http.Get(fe.url + "/api/v1/namespaces/shop/events?fieldSelector=" + url.QueryEscape(sel))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, strings.Join(resp.Header.Values("Warning"), "; ")
	}
	if code, w := get("family.kind=Deployment,family.name=web"); code != 200 || w != "" {
		t.Errorf("known family: %d, warnings %q", code, w)
	}
	if _, w := get("family.kind=Deployment,family.name=nothing"); !strings.Contains(w, "not in eventsd's ownership lineage") {
		t.Errorf("unknown object: warning %q", w)
	}
	fe.g.SetLearning("the source refuses to list pods")
	if _, w := get("family.kind=Deployment,family.name=web"); !strings.Contains(w, "the source refuses to list pods") {
		t.Errorf("ownership not learned: warning %q", w)
	}
	// Without a lineage, a family is its object's own events.
	plain := newEnv(t, time.Hour)
	(&familyEnv{env: plain}).create("Deployment", "web", "d", "default")
	resp, err := http.Get(plain.url + "/api/v1/namespaces/default/events?fieldSelector=" + url.QueryEscape("family.kind=Deployment,family.name=web"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if w := resp.Header.Get("Warning"); !strings.Contains(w, "no source cluster") {
		t.Errorf("no lineage: warning %q", w)
	}
}

// TestFamilyWatchSeesJoiningObjects: a watch of a family sees the events
// of a Pod whose ownership was learned after its first event, once it is
// learned, and nothing of other families.
func TestFamilyWatchSeesJoiningObjects(t *testing.T) {
	fe := newFamilyEnv(t)
	l, err := fe.cs.CoreV1().Events("shop").List(fe.ctx, metav1.ListOptions{FieldSelector: "family.kind=Deployment,family.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := fe.cs.CoreV1().Events("shop").Watch(fe.ctx, metav1.ListOptions{
		FieldSelector: "family.kind=Deployment,family.name=web", ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func() (watch.EventType, string) {
		t.Helper()
		select {
		case e := <-w.ResultChan():
			ev, ok := e.Object.(*corev1.Event)
			if !ok {
				t.Fatalf("watch sent %v %T", e.Type, e.Object)
			}
			return e.Type, ev.InvolvedObject.Name
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event in 10s")
		}
		return "", ""
	}
	// A new Pod's event before its ownership is known, then an unrelated
	// one, then ownership: the Pod's event comes, once.
	fe.create("Pod", "web-2-b", "p9", "shop")
	fe.create("Pod", "api-1-b", "p8", "shop")
	fe.g.Observe(lineage.Object{ID: "p9", Kind: "Pod", Namespace: "shop", Name: "web-2-b", Owners: []lineage.ID{"rs2"}})
	if typ, name := next(); typ != watch.Added || name != "web-2-b" {
		t.Errorf("after the Pod joined: %s %s, want ADDED web-2-b", typ, name)
	}
	// Its later events come as any member's; the unrelated Pod, learned
	// too, never does.
	fe.g.Observe(lineage.Object{ID: "p8", Kind: "Pod", Namespace: "shop", Name: "api-1-b", Owners: []lineage.ID{"e"}})
	fe.create("Pod", "api-1-b", "p8", "shop")
	fe.create("Pod", "web-2-b", "p9", "shop")
	if typ, name := next(); typ != watch.Added || name != "web-2-b" {
		t.Errorf("a joined Pod's next event: %s %s", typ, name)
	}
	fe.create("ReplicaSet", "web-2", "rs2", "shop")
	if typ, name := next(); typ != watch.Added || name != "web-2" {
		t.Errorf("after that: %s %s, want the ReplicaSet's event (nothing sent twice, nothing unrelated)", typ, name)
	}
}

// TestLineagesTable: kubectl's Table of a family's lineage shows the tree
// by indentation, owners, and deletions; a list without a family
// selector is refused.
func TestLineagesTable(t *testing.T) {
	fe := newFamilyEnv(t)
	get := func(path, accept string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, fe.url+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	sel := "?fieldSelector=" + url.QueryEscape("family.kind=Deployment,family.name=web")
	code, body := get("/apis/events.kubevents.io/v1/namespaces/shop/lineages"+sel, "application/json;as=Table;v=v1;g=meta.k8s.io")
	var tbl metav1.Table
	if err := json.Unmarshal([]byte(body), &tbl); err != nil || code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var rows []string
	for _, r := range tbl.Rows {
		rows = append(rows, fmt.Sprintf("%v|%v|%v", r.Cells[0], r.Cells[1], r.Cells[4] != ""))
	}
	want := []string{"deployment/web||false", "  replicaset/web-1|deployment/web|false", "    pod/web-1-a|replicaset/web-1|true",
		"  replicaset/web-2|deployment/web|false", "    pod/web-2-a|replicaset/web-2|false"}
	if !slices.Equal(rows, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if code, body := get("/apis/events.kubevents.io/v1/namespaces/shop/lineages", "application/json"); code != 400 || !strings.Contains(body, "family") {
		t.Errorf("without a family selector: %d %s", code, body)
	}
	if code, _ := get("/apis/events.kubevents.io/v1/namespaces/shop/lineages"+sel+"&watch=true", "application/json"); code != 405 {
		t.Errorf("watch of lineages: %d", code)
	}
}
