package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
)

// kubeventsClient is a client-go REST client of events.kubevents.io/v1,
// decoding into events.k8s.io/v1 types, as evctl reads the group.
func kubeventsClient(t *testing.T, host string) *rest.RESTClient {
	t.Helper()
	s := runtime.NewScheme()
	if err := eventapi.AddKubeventsToScheme(s); err != nil {
		t.Fatal(err)
	}
	gv := eventapi.KubeventsGroupVersion
	rc, err := rest.RESTClientFor(&rest.Config{Host: host, QPS: -1, APIPath: "/apis",
		ContentConfig: rest.ContentConfig{GroupVersion: &gv, NegotiatedSerializer: serializer.NewCodecFactory(s).WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// createAbout creates an event in namespace default about regarding (a
// pod) with related, if given.
func (e *env) createAbout(name, regarding string, related *corev1.ObjectReference) {
	e.t.Helper()
	_, err := e.cs.EventsV1().Events("default").Create(e.ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NewMicroTime(e.clock.Now()),
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: regarding, Namespace: "default"}, Related: related,
		ReportingController: "kubelet", ReportingInstance: "node-1", Action: "Probe", Reason: "Unhealthy",
		Note: "probe failed: " + name, Type: corev1.EventTypeWarning,
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// TestKubeventsGroup: eventsd's own group serves the stored events in the
// events.k8s.io/v1 shape with its own apiVersion (JSON, protobuf, Table,
// watch), takes events.k8s.io/v1's field selectors and the extensions,
// refuses every write with 405 and changes nothing, and is in discovery
// (read verbs, no short names) and in the OpenAPI index.
func TestKubeventsGroup(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.createAbout("web-1.a", "web-1", nil)
	e.createAbout("node-1.b", "web-2", &corev1.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: "default"})
	e.createAbout("web-3.c", "web-3", nil)
	rc := kubeventsClient(t, e.url)

	var l eventsv1.EventList
	err := rc.Get().Resource("events").VersionedParams(&metav1.ListOptions{FieldSelector: "involves.name=web-1"}, metav1.ParameterCodec).
		Do(e.ctx).Into(&l)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range l.Items {
		names = append(names, ev.Name)
	}
	if !cmp.Equal(names, []string{"node-1.b", "web-1.a"}) {
		t.Fatalf("involves.name=web-1 listed %v", names)
	}

	// The wire form: the group's apiVersion on the list and on each item.
	code, body := doRequest(t, http.MethodGet, e.url+"/apis/events.kubevents.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dweb-1", "")
	var raw struct {
		APIVersion, Kind string
		Items            []struct {
			APIVersion, Kind, Note string
			Regarding              corev1.ObjectReference
		}
	}
	if err := json.Unmarshal(body, &raw); err != nil || code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	if raw.APIVersion != "events.kubevents.io/v1" || raw.Kind != "EventList" || len(raw.Items) != 1 ||
		raw.Items[0].APIVersion != "events.kubevents.io/v1" || raw.Items[0].Kind != "Event" ||
		raw.Items[0].Note != "probe failed: web-1.a" || raw.Items[0].Regarding.Name != "web-1" {
		t.Fatalf("list in the events.k8s.io/v1 shape under events.kubevents.io/v1: %s", body)
	}
	// core/v1's field labels are not this group's.
	if code, body := doRequest(t, http.MethodGet, e.url+"/apis/events.kubevents.io/v1/events?fieldSelector=involvedObject.name%3Dweb-1", ""); code != http.StatusBadRequest ||
		!strings.Contains(string(body), "field label not supported: involvedObject.name") {
		t.Fatalf("involvedObject.name: %d %s", code, body)
	}

	// Get, as protobuf: the envelope names the group.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/apis/events.kubevents.io/v1/namespaces/default/events/web-1.a", nil)
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var u runtime.Unknown
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(pb, []byte("k8s\x00")) || u.Unmarshal(pb[4:]) != nil ||
		u.APIVersion != "events.kubevents.io/v1" || u.Kind != "Event" {
		t.Fatalf("protobuf get: %d %q %+v", resp.StatusCode, pb, u.TypeMeta)
	}
	var got eventsv1.Event
	if err := got.Unmarshal(u.Raw); err != nil || got.Name != "web-1.a" || got.ReportingController != "kubelet" {
		t.Fatalf("protobuf Event: %v %+v", err, got)
	}

	// The Table kubectl asks for.
	req, _ = http.NewRequest(http.MethodGet, e.url+"/apis/events.kubevents.io/v1/events?fieldSelector=involves.name%3Dweb-1", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var tbl metav1.Table
	if err := json.Unmarshal(tb, &tbl); err != nil || tbl.Kind != "Table" || len(tbl.Rows) != 2 || tbl.ColumnDefinitions[3].Name != "Object" ||
		tbl.Rows[0].Cells[3] != "pod/web-2" || tbl.Rows[1].Cells[3] != "pod/web-1" {
		t.Fatalf("table: %v %s", err, tb)
	}

	// A watch gets new events in the group's apiVersion.
	w, err := rc.Get().Namespace("default").Resource("events").
		VersionedParams(&metav1.ListOptions{Watch: true, ResourceVersion: l.ResourceVersion, FieldSelector: "involves.name=web-1"}, metav1.ParameterCodec).Watch(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.createAbout("web-1.d", "web-1", nil)
	select {
	case ev := <-w.ResultChan():
		// Decoded with a scheme that knows Event only as
		// events.kubevents.io/v1: the stream carries that apiVersion.
		got, ok := ev.Object.(*eventsv1.Event)
		if ev.Type != watch.Added || !ok || got.Name != "web-1.d" {
			t.Fatalf("watch: %v %#v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}

	// Every write is refused, and nothing changes.
	before := listNames(t, e)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/apis/events.kubevents.io/v1/namespaces/default/events", `{"metadata":{"name":"x"},"eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"c","reportingInstance":"i","action":"A","reason":"R","regarding":{"kind":"Pod","name":"p","namespace":"default"},"type":"Normal"}`},
		{http.MethodPut, "/apis/events.kubevents.io/v1/namespaces/default/events/web-1.a", `{}`},
		{http.MethodPatch, "/apis/events.kubevents.io/v1/namespaces/default/events/web-1.a", `{"note":"changed"}`},
		{http.MethodDelete, "/apis/events.kubevents.io/v1/namespaces/default/events/web-1.a", ""},
		{http.MethodDelete, "/apis/events.kubevents.io/v1/namespaces/default/events", ""},
	} {
		req, _ := http.NewRequest(c.method, e.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/merge-patch+json")
		if c.method != http.MethodPatch {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var st metav1.Status
		_ = json.Unmarshal(b, &st)
		if resp.StatusCode != http.StatusMethodNotAllowed || st.Reason != metav1.StatusReasonMethodNotAllowed ||
			st.Message != "events of events.kubevents.io/v1 are read-only: write events through core/v1 (/api/v1) or events.k8s.io/v1" {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	if after := listNames(t, e); !cmp.Equal(before, after) {
		t.Fatalf("refused writes changed the events: %v, then %v", before, after)
	}
	ev, err := e.cs.CoreV1().Events("default").Get(e.ctx, "web-1.a", metav1.GetOptions{})
	if err != nil || ev.Message != "probe failed: web-1.a" {
		t.Fatalf("after the refused patch: %v %q", err, ev.Message)
	}

	// Discovery: the legacy documents and the aggregated one.
	code, body = doRequest(t, http.MethodGet, e.url+"/apis/events.kubevents.io/v1", "")
	var rl metav1.APIResourceList
	if err := json.Unmarshal(body, &rl); err != nil || code != http.StatusOK || rl.GroupVersion != "events.kubevents.io/v1" || len(rl.APIResources) != 3 ||
		rl.APIResources[0].Name != "events" || !rl.APIResources[0].Namespaced || rl.APIResources[0].Kind != "Event" ||
		!cmp.Equal(rl.APIResources[0].Verbs, metav1.Verbs{"get", "list", "watch"}) || len(rl.APIResources[0].ShortNames) != 0 ||
		rl.APIResources[1].Name != "lineages" || !cmp.Equal(rl.APIResources[1].Verbs, metav1.Verbs{"list"}) ||
		rl.APIResources[2].Name != "facets" || !cmp.Equal(rl.APIResources[2].Verbs, metav1.Verbs{"list"}) {
		t.Fatalf("/apis/events.kubevents.io/v1: %d %s", code, body)
	}
	code, body = doRequest(t, http.MethodGet, e.url+"/apis/events.kubevents.io", "")
	var g metav1.APIGroup
	if err := json.Unmarshal(body, &g); err != nil || code != http.StatusOK || g.PreferredVersion.GroupVersion != "events.kubevents.io/v1" {
		t.Fatalf("/apis/events.kubevents.io: %d %s", code, body)
	}
	agg := aggregatedGroups(t, e.url, nil)
	kg, ok := agg["events.kubevents.io"]
	if !ok || len(kg.Versions) != 1 || kg.Versions[0].Version != "v1" || len(kg.Versions[0].Resources) != 3 ||
		!cmp.Equal(kg.Versions[0].Resources[0].Verbs, []string{"get", "list", "watch"}) || kg.Versions[0].Resources[0].Scope != apidiscoveryv2.ScopeNamespace {
		t.Fatalf("aggregated discovery of events.kubevents.io: %+v", kg)
	}

	// OpenAPI: the group is in the index, its document has reads only.
	paths := openAPIIndex(t, e.url, nil)
	if !cmp.Equal(paths, []string{"api/v1", "apis/events.k8s.io/v1", "apis/events.kubevents.io/v1"}) {
		t.Fatalf("OpenAPI index: %v", paths)
	}
	code, body = doRequest(t, http.MethodGet, e.url+"/openapi/v3/apis/events.kubevents.io/v1", "")
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &doc); err != nil || code != http.StatusOK {
		t.Fatalf("OpenAPI document: %d %s", code, body)
	}
	for p, ops := range doc.Paths {
		for op := range ops {
			if op != "get" && op != "parameters" {
				t.Errorf("OpenAPI %s has %s", p, op)
			}
		}
	}
	if _, ok := doc.Paths["/apis/events.kubevents.io/v1/namespaces/{namespace}/events/{name}"]["get"]; !ok {
		t.Errorf("OpenAPI document without the get of an event: %s", body)
	}
}

// listNames is the names of the events in default, via core/v1.
func listNames(t *testing.T, e *env) []string {
	t.Helper()
	l, err := e.cs.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range l.Items {
		out = append(out, ev.Name+"@"+ev.ResourceVersion)
	}
	return out
}

// get is a GET of url with header set on the request.
func get(t *testing.T, url string, header http.Header) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// aggregatedGroups is url's aggregated discovery of /apis, by group.
func aggregatedGroups(t *testing.T, url string, header http.Header) map[string]apidiscoveryv2.APIGroupDiscovery {
	t.Helper()
	h := http.Header{"Accept": {"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}}
	for k, v := range header {
		h[k] = v
	}
	code, body := get(t, url+"/apis", h)
	var l apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &l); err != nil || code != http.StatusOK {
		t.Fatalf("/apis: %d %s", code, body)
	}
	out := map[string]apidiscoveryv2.APIGroupDiscovery{}
	for _, g := range l.Items {
		out[g.Name] = g
	}
	return out
}

// openAPIIndex is the sorted paths of url's /openapi/v3.
func openAPIIndex(t *testing.T, url string, header http.Header) []string {
	t.Helper()
	code, body := get(t, url+"/openapi/v3", header)
	var idx struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		}
	}
	if err := json.Unmarshal(body, &idx); err != nil || code != http.StatusOK {
		t.Fatalf("/openapi/v3: %d %s", code, body)
	}
	var out []string
	for p, e := range idx.Paths {
		if !strings.HasPrefix(e.ServerRelativeURL, "/openapi/v3/"+p+"?hash=") {
			t.Errorf("index entry %s: %s", p, e.ServerRelativeURL)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// headerAuthenticator authenticates requests carrying its header as the
// user the header names, and fails those carrying "bad": a stand-in for
// the front proxy's and the token authenticators (package access builds
// the real ones, and tests them).
type headerAuthenticator struct{ header string }

func (h headerAuthenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	switch v := r.Header.Get(h.header); v {
	case "":
		return nil, false, nil
	case "bad":
		return nil, false, errors.New(h.header + " is bad")
	default:
		return &authenticator.Response{User: &user.DefaultInfo{Name: v, Groups: []string{"system:authenticated"}}}, true, nil
	}
}

// TestFrontProxy: a request the front proxy authenticator accepts is that
// user's (the authorizer is asked about them) and gets an OpenAPI index of
// eventsd's own group alone, which kube-apiserver merges into its own;
// other requests go to the authenticator and get the whole index; a front
// proxy error counts only when no authenticator accepts the request.
func TestFrontProxy(t *testing.T) {
	authz := &recordingAuthorizer{decide: func(a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "mallory" {
			return authorizer.DecisionDeny, "no", nil
		}
		return authorizer.DecisionAllow, "", nil
	}}
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Registry = reg
		c.FrontProxy = headerAuthenticator{"X-Test-Proxy-User"}
		c.Authenticator = headerAuthenticator{"X-Test-Token-User"}
		c.Authorizer = authz
	})
	proxied := http.Header{"X-Test-Proxy-User": {"alice"}}
	if got := openAPIIndex(t, e.url, proxied); !cmp.Equal(got, []string{"apis/events.kubevents.io/v1"}) {
		t.Fatalf("OpenAPI index through the front proxy: %v", got)
	}
	if u := authz.last(t).User.GetName(); u != "alice" {
		t.Fatalf("the authorizer was asked about %q, want the proxied user", u)
	}
	if got := openAPIIndex(t, e.url, http.Header{"X-Test-Token-User": {"bob"}}); len(got) != 3 {
		t.Fatalf("OpenAPI index for a direct client: %v", got)
	}
	// The group's document is served to the front proxy as to anyone.
	if code, body := get(t, e.url+"/openapi/v3/apis/events.kubevents.io/v1", proxied); code != http.StatusOK {
		t.Fatalf("group document through the front proxy: %d %s", code, body)
	}
	// The aggregator also downloads /openapi/v2 to merge it: a Swagger 2.0
	// document without paths, so that nothing of the cluster's own is
	// shadowed and the aggregator does not retry a 404 for ever.
	code, body := get(t, e.url+"/openapi/v2", proxied)
	var v2 struct {
		Swagger string
		Paths   map[string]any
	}
	if err := json.Unmarshal(body, &v2); err != nil || code != http.StatusOK || v2.Swagger != "2.0" || v2.Paths == nil || len(v2.Paths) != 0 {
		t.Fatalf("/openapi/v2 through the front proxy: %d %s", code, body)
	}
	// Discovery is the same for both.
	if _, ok := aggregatedGroups(t, e.url, proxied)["events.kubevents.io"]; !ok {
		t.Fatal("aggregated discovery through the front proxy lacks events.kubevents.io")
	}
	// Resource requests through the front proxy are authorized as the
	// user it names.
	if code, body := get(t, e.url+"/apis/events.kubevents.io/v1/events", http.Header{"X-Test-Proxy-User": {"mallory"}}); code != http.StatusForbidden ||
		!strings.Contains(string(body), `User \"mallory\" cannot list resource \"events\" in API group \"events.kubevents.io\" at the cluster scope`) {
		t.Fatalf("mallory through the front proxy: %d %s", code, body)
	}
	for _, c := range []struct {
		name   string
		header http.Header
		code   int
	}{
		{"nothing", nil, http.StatusUnauthorized},
		{"front proxy error, no token", http.Header{"X-Test-Proxy-User": {"bad"}}, http.StatusUnauthorized},
		{"front proxy error, a token", http.Header{"X-Test-Proxy-User": {"bad"}, "X-Test-Token-User": {"bob"}}, http.StatusOK},
	} {
		if code, body := get(t, e.url+"/apis/events.kubevents.io/v1/events", c.header); code != c.code {
			t.Errorf("%s: %d %s", c.name, code, body)
		}
	}
	for outcome, want := range map[string]float64{"error": 1, "rejected": 1} {
		if got := metricstest.Sum(t, reg, "eventsd_unauthorized_requests_total", "outcome", outcome); got != want {
			t.Errorf("unauthorized requests %s: %v, want %v", outcome, got, want)
		}
	}
}

// TestDiscoveryWithoutTheStore: with the etcd under the server gone,
// discovery and the OpenAPI documents (what kube-apiserver's aggregator
// asks to tell whether eventsd's APIService is available, and what every
// client's discovery reads) are answered at once from memory, while reads
// of events get 503: the group stays discoverable and its failure stays
// its own.
func TestDiscoveryWithoutTheStore(t *testing.T) {
	dir := t.TempDir()
	e, endpoint := etcdtest.Start(t, dir)
	var killed <-chan struct{}
	// Runs after serveStore's cleanup has closed the store, whose watch
	// would hold the killed etcd's listeners open for seconds.
	t.Cleanup(func() {
		if killed == nil {
			e.Close()
			return
		}
		<-killed
	})
	store, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout,
		RequestTimeout: 2 * time.Second, ReadycheckTimeout: 2 * time.Second, CompactionInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serveStore(t, store)
	killed = etcdtest.Kill(e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range []string{"/api", "/apis", "/apis/events.kubevents.io", "/apis/events.kubevents.io/v1", "/openapi/v2", "/openapi/v3", "/openapi/v3/apis/events.kubevents.io/v1"} {
		for _, accept := range []string{"application/json", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+p, nil)
			req.Header.Set("Accept", accept)
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// The store's requests time out after 2 s: an answer within
			// 500 ms did not wait for it.
			if took := time.Since(start); resp.StatusCode != http.StatusOK || took > 500*time.Millisecond {
				t.Errorf("%s (%s) with etcd down: %d in %v", p, accept, resp.StatusCode, took)
			}
		}
	}
	if code, body := get(t, url+"/apis/events.kubevents.io/v1/events", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("a list with etcd down: %d %s", code, body)
	}
}
