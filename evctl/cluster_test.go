package evctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/access"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// newFleetEnv serves eventsd on loopback with a fleet of two clusters,
// east and west, its clock at now, writes a few events into each
// through client-go at /clusters/NAME, and returns the server's URL.
func newFleetEnv(t *testing.T) string {
	t.Helper()
	return newFleetEnvWith(t, nil, "")
}

// newFleetEnvWith is newFleetEnv with configure, when not nil, changing
// the server's configuration, and the events written with token, when
// not "": then over HTTPS (client-go sends a kubeconfig's token only over
// TLS).
func newFleetEnvWith(t *testing.T, configure func(*server.Config), token string) string {
	t.Helper()
	clk := clocktesting.NewFakeClock(now)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, DefaultTTL: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: store, EventTTL: 24 * time.Hour, Clock: clk, Logger: slog.New(slog.DiscardHandler),
		BookmarkInterval: time.Minute, Clusters: []server.Cluster{{Name: "east"}, {Name: "west"}}}
	if configure != nil {
		configure(&cfg)
	}
	serve := servertest.Serve
	if token != "" {
		serve = servertest.ServeTLS
	}
	url, _ := serve(t, cfg)
	// east: two events in shop, one in dev; west: one in shop, named as
	// one of east's (kept apart), about a Pod of the same name.
	for _, e := range []struct {
		cluster, ns, name, pod, typ, reason string
		count                               int32
		ago                                 time.Duration
	}{
		{"east", "shop", "web.1", "web", "Warning", "BackOff", 5, 10 * time.Minute},
		{"east", "shop", "web.2", "web", "Normal", "Pulled", 1, 20 * time.Minute},
		{"east", "dev", "api.1", "api", "Normal", "Started", 1, 5 * time.Minute},
		{"west", "shop", "web.1", "web", "Warning", "OOMKilling", 3, 15 * time.Minute},
	} {
		ts := metav1.NewTime(at(e.ago))
		_, err := clusterClientset(t, url, e.cluster, token).CoreV1().Events(e.ns).Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: e.name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.ns, Name: e.pod, UID: types.UID(e.cluster + e.ns + e.pod)},
			Reason:         e.reason, Message: e.cluster + " " + e.reason, Type: e.typ, Source: kubelet,
			FirstTimestamp: ts, LastTimestamp: ts, Count: e.count,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("writing %s/%s/%s: %v", e.cluster, e.ns, e.name, err)
		}
	}
	return url
}

// clusterClientset is a clientset of one cluster of the fleet at url,
// with token when not "".
func clusterClientset(t *testing.T, url, cluster, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url + "/clusters/" + cluster, BearerToken: token, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{Insecure: strings.HasPrefix(url, "https:")}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// clusterEvents reads evctl's -o json as cluster/namespace/name/note.
func clusterEvents(t *testing.T, out string) []string {
	t.Helper()
	var l eventsv1.EventList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("reading evctl's JSON: %v\n%s", err, out)
	}
	got := []string{}
	for _, ev := range l.Items {
		got = append(got, fmt.Sprintf("%s/%s/%s/%s", ev.Annotations[eventapi.ClusterAnnotation], ev.Namespace, ev.Name, ev.Note))
	}
	slices.Sort(got)
	return got
}

// TestClusterFlags: --cluster reads one cluster of a fleet, --all-clusters
// every one with each event's cluster (a CLUSTER column in get, search,
// watch's list and timeline), top counts across clusters, and what cannot
// be asked is refused with what to do instead: both flags, a bad name, a
// cluster the server does not serve (with those it does), a server
// without a fleet, a family across clusters.
func TestClusterFlags(t *testing.T) {
	url := newFleetEnv(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", "-A", "--cluster", "east"}, []string{"/dev/api.1/east Started", "/shop/web.1/east BackOff", "/shop/web.2/east Pulled"}},
		{[]string{"get", "-n", "shop", "--cluster", "west"}, []string{"/shop/web.1/west OOMKilling"}},
		{[]string{"get", "-n", "shop", "--all-clusters"}, []string{"east/shop/web.1/east BackOff", "east/shop/web.2/east Pulled", "west/shop/web.1/west OOMKilling"}},
		{[]string{"get", "-A", "--cluster", "*", "--type", "Warning"}, []string{"east/shop/web.1/east BackOff", "west/shop/web.1/west OOMKilling"}},
		{[]string{"search", `object.type == "Warning"`, "-A", "--all-clusters", "--since", "12m"}, []string{"east/shop/web.1/east BackOff"}},
		{[]string{"search", "-A", "--all-clusters", "--field-selector", "cluster!=east"}, []string{"west/shop/web.1/west OOMKilling"}},
		{[]string{"search", "-A", "--cluster", "west"}, []string{"/shop/web.1/west OOMKilling"}},
		// The root serves no cluster of the fleet: its own events, none.
		{[]string{"get", "-A"}, []string{}},
	} {
		out, errOut, err := runEvctl(url, append(c.args, "-o", "json")...)
		if err != nil {
			t.Errorf("evctl %q: %v\n%s", c.args, err, errOut)
			continue
		}
		if got := clusterEvents(t, out); !slices.Equal(got, c.want) {
			t.Errorf("evctl %q:\n got %q\nwant %q", c.args, got, c.want)
		}
	}

	// The CLUSTER column, first, in the tables of fleet-wide answers only.
	for _, c := range []struct {
		args     []string
		header   string
		clusters []string
	}{
		{[]string{"get", "-A", "--all-clusters"}, "CLUSTER NAMESPACE LAST SEEN", []string{"east", "west", "east", "east"}},
		{[]string{"search", "-n", "shop", "--all-clusters", "-o", "wide"}, "CLUSTER LAST SEEN TYPE REASON ACTION", []string{"east", "west", "east"}},
		{[]string{"timeline", "pod/web", "-n", "shop", "--all-clusters"}, "CLUSTER TIME UNTIL COUNT", []string{"east", "west", "east"}},
		{[]string{"get", "-A", "--cluster", "east"}, "NAMESPACE LAST SEEN", nil},
	} {
		out, errOut, err := runEvctl(url, c.args...)
		if err != nil {
			t.Errorf("evctl %q: %v\n%s", c.args, err, errOut)
			continue
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := strings.Join(strings.Fields(lines[0]), " "); !strings.HasPrefix(got, c.header) {
			t.Errorf("evctl %q: header %q, want it to start with %q", c.args, got, c.header)
		}
		if c.clusters == nil {
			continue
		}
		var got []string
		for _, l := range lines[1:] {
			got = append(got, strings.Fields(l)[0])
		}
		if !slices.Equal(got, c.clusters) {
			t.Errorf("evctl %q: CLUSTER cells %q, want %q\n%s", c.args, got, c.clusters, out)
		}
		if c.args[0] == "timeline" && !strings.Contains(errOut, "families are answered for one cluster") {
			t.Errorf("evctl %q: stderr %q, want a note that families are one cluster's", c.args, errOut)
		}
	}

	// top counts the occurrences of every cluster.
	out, errOut, err := runEvctl(url, "top", "-A", "--all-clusters", "-o", "json")
	if err != nil {
		t.Fatalf("evctl top --all-clusters: %v\n%s", err, errOut)
	}
	var facets eventapi.FacetList
	if err := json.Unmarshal([]byte(out), &facets); err != nil {
		t.Fatal(err)
	}
	if facets.Occurrences != 5+1+1+3 || facets.Events != 4 {
		t.Errorf("top --all-clusters: %d occurrences in %d events, want 10 in 4", facets.Occurrences, facets.Events)
	}
	out, errOut, err = runEvctl(url, "top", "-A", "--cluster", "west")
	if err != nil || !strings.Contains(out, "OOMKilling") || strings.Contains(out, "BackOff") {
		t.Errorf("evctl top --cluster west: %v\n%s%s", err, out, errOut)
	}

	// Refused, saying why.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--cluster", "east", "--all-clusters"}, "give --cluster or --all-clusters, not both"},
		{[]string{"get", "--cluster", "East_1"}, `--cluster "East_1": a cluster's name must consist of lower case`},
		{[]string{"get", "--cluster", "north"}, `the server serves no cluster "north"; its clusters are: east, west`},
		{[]string{"timeline", "--uid", "u", "--all-clusters"}, "give --cluster NAME instead of --all-clusters"},
		{[]string{"clusters", "--cluster", "east"}, "takes no --cluster or --all-clusters"},
	} {
		_, _, err := runEvctl(url, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("evctl %q: error %v, want one saying %q", c.args, err, c.want)
		}
	}

	// A server without a fleet says so.
	fe := newFamilyEnv(t, true)
	for _, args := range [][]string{{"get", "--cluster", "east"}, {"search", "--all-clusters"}} {
		_, _, err := runEvctl(fe.url, args...)
		if err == nil || !strings.Contains(err.Error(), "the server serves no fleet of clusters") {
			t.Errorf("evctl %q on an eventsd without a fleet: error %v, want one saying it serves no fleet", args, err)
		}
	}
	if _, errOut, err := runEvctl(fe.url, "clusters"); err != nil || !strings.Contains(errOut, "serves no fleet") {
		t.Errorf("evctl clusters on an eventsd without a fleet: %v, stderr %q", err, errOut)
	}
}

// TestGoldenClusters: evctl clusters lists a real fleet's clusters.
func TestGoldenClusters(t *testing.T) {
	url := newFleetEnv(t)
	for _, output := range []string{"", "json"} {
		out, errOut, err := runEvctl(url, "clusters", "-o", output)
		if err != nil {
			t.Fatalf("evctl clusters -o %q: %v\n%s", output, err, errOut)
		}
		golden(t, "clusters"+map[string]string{"": "", "json": "-json"}[output], []byte(out))
	}
}

// TestGoldenFleet: the tables of events read across a fleet's clusters
// have the CLUSTER column first.
func TestGoldenFleet(t *testing.T) {
	evs := fixture()
	for i, ev := range evs {
		ev.Annotations = map[string]string{eventapi.ClusterAnnotation: []string{"east", "west"}[i%2]}
	}
	var buf bytes.Buffer
	p := &printer{out: &buf, output: "", allNamespaces: true, clusters: true, now: func() time.Time { return now }}
	rs := rows(evs)
	sortByLast(rs)
	if err := p.table(rs); err != nil {
		t.Fatal(err)
	}
	golden(t, "get-all-clusters", buf.Bytes())
	buf.Reset()
	p = &printer{out: &buf, output: "wide", clusters: true, now: func() time.Time { return now }}
	var items []eventsv1.Event
	for _, ev := range evs {
		items = append(items, *ev)
	}
	rs = withRoles(items, target{kind: "Node", name: "node-1"})
	sortByFirst(rs)
	if err := p.timeline(rs); err != nil {
		t.Fatal(err)
	}
	golden(t, "timeline-clusters-wide", buf.Bytes())
}

// TestMCPClusters: every MCP tool takes a cluster argument: a cluster's
// name reads that cluster, "*" every one with each event's cluster, and
// a family across clusters or an unknown cluster is a tool error saying
// why.
func TestMCPClusters(t *testing.T) {
	url := newFleetEnv(t)
	cs := mcpSession(t, connFlags{server: url, namespace: "shop", timeout: "0"}, MCPConfig{Clock: clocktesting.NewFakeClock(now)})
	search := func(args map[string]any) []string {
		t.Helper()
		out := call[SearchOutput](t, cs, "search_events", args)
		got := []string{}
		for _, e := range out.Events {
			got = append(got, e.Cluster+"/"+e.Namespace+"/"+e.Note)
		}
		slices.Sort(got)
		return got
	}
	for _, c := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"cluster": "west"}, []string{"/shop/west OOMKilling"}},
		{map[string]any{"cluster": "east", "allNamespaces": true}, []string{"/dev/east Started", "/shop/east BackOff", "/shop/east Pulled"}},
		{map[string]any{"cluster": "*"}, []string{"east/shop/east BackOff", "east/shop/east Pulled", "west/shop/west OOMKilling"}},
		{map[string]any{}, []string{}}, // the root's own events: none
	} {
		if got := search(c.args); !slices.Equal(got, c.want) {
			t.Errorf("search_events %v:\n got %q\nwant %q", c.args, got, c.want)
		}
	}
	tl := call[TimelineOutput](t, cs, "object_timeline", map[string]any{"kind": "pod", "name": "web", "cluster": "*"})
	var got []string
	for _, e := range tl.Events {
		got = append(got, e.Cluster+" "+e.Reason)
	}
	if want := []string{"east Pulled", "west OOMKilling", "east BackOff"}; !slices.Equal(got, want) {
		t.Errorf("object_timeline of pod/web in every cluster: %q, want %q", got, want)
	}
	f := call[FacetsOutput](t, cs, "event_facets", map[string]any{"cluster": "*", "allNamespaces": true})
	if f.Occurrences != 10 {
		t.Errorf("event_facets in every cluster: %d occurrences, want 10", f.Occurrences)
	}
	fam := call[FamilyOutput](t, cs, "family_timeline", map[string]any{"kind": "pod", "name": "web", "cluster": "west"})
	if len(fam.Objects) == 0 || len(fam.Objects[0].Events) != 1 || fam.Objects[0].Events[0].Reason != "OOMKilling" {
		t.Errorf("family_timeline of pod/web in west: %+v", fam)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"family_timeline", map[string]any{"kind": "pod", "name": "web", "cluster": "*"}, "a family is one cluster's"},
		{"search_events", map[string]any{"cluster": "north"}, `the server serves no cluster "north"; its clusters are: east, west`},
		{"event_facets", map[string]any{"cluster": "No!"}, `cluster "No!": a cluster's name must`},
	} {
		if msg := callError(t, cs, c.tool, c.args); !strings.Contains(msg, c.want) {
			t.Errorf("%s %v: %q, want an error saying %q", c.tool, c.args, msg, c.want)
		}
	}
}

// TestClusterListRefused: a user who may read one cluster's namespace but
// not list the fleet's clusters (GET /clusters/, a non-resource path) is
// not stopped by evctl's check: the reading goes ahead, and a cluster the
// server does not serve is the server's own 404, with its message.
func TestClusterListRefused(t *testing.T) {
	dir := t.TempDir()
	tokenFile, policyFile := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "policy.jsonl")
	if err := os.WriteFile(tokenFile, []byte("tok-admin,admin,1\ntok-alice,alice,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "admin", "cluster": "*", "namespace": "*", "apiGroup": "*", "resource": "*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "cluster": "east", "namespace": "shop", "apiGroup": "*", "resource": "events", "readonly": true}}
`
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := access.Build(access.Options{TokenAuthFile: tokenFile, AuthorizationModes: []string{access.ModeABAC}, PolicyFile: policyFile})
	if err != nil {
		t.Fatal(err)
	}
	url := newFleetEnvWith(t, func(c *server.Config) { c.Authenticator, c.Authorizer = b.Authenticator, b.Authorizer }, "tok-admin")
	if _, _, err := runEvctl(url, "clusters", "--insecure-skip-tls-verify", "--token", "tok-alice"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("evctl clusters as alice: %v, want the server's refusal", err)
	}
	out, errOut, err := runEvctl(url, "get", "-n", "shop", "--cluster", "east", "--insecure-skip-tls-verify", "--token", "tok-alice", "-o", "json")
	if err != nil {
		t.Fatalf("evctl get --cluster east as alice: %v\n%s", err, errOut)
	}
	if got, want := clusterEvents(t, out), []string{"/shop/web.1/east BackOff", "/shop/web.2/east Pulled"}; !slices.Equal(got, want) {
		t.Errorf("east's shop as alice: %q, want %q", got, want)
	}
	_, _, err = runEvctl(url, "get", "-n", "shop", "--cluster", "north", "--insecure-skip-tls-verify", "--token", "tok-alice")
	if err == nil || !strings.Contains(err.Error(), `cluster "north" is not served here`) {
		t.Errorf("evctl get --cluster north as alice: %v, want the server's 404", err)
	}
}

// TestWatchAllClusters: evctl watch --all-clusters prints every cluster's
// events, then each new one in any cluster as it is written, each with
// its cluster first.
func TestWatchAllClusters(t *testing.T) {
	url := newFleetEnv(t)
	fe := &familyEnv{t: t, url: url}
	out, waitFor := fe.runLive("watch", "--all-clusters")
	waitFor("OOMKilling")
	ts := metav1.NewTime(at(time.Minute))
	_, err := clusterClientset(t, url, "west", "").CoreV1().Events("shop").Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.9"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web", UID: "westshopweb"},
		Reason:         "Killing", Message: "west Killing", Type: "Normal", Source: kubelet,
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("west Killing")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(l)
		got = append(got, f[0]+" "+f[len(f)-1])
	}
	if want := []string{"CLUSTER MESSAGE", "east Pulled", "west OOMKilling", "east BackOff", "west Killing"}; !slices.Equal(got, want) {
		t.Errorf("evctl watch --all-clusters -n shop printed %q, want %q\n%s", got, want, out.String())
	}
}
