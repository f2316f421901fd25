package evctl

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/access"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// mcpSession serves evctl's MCP server for the clients cf builds over an
// in-memory transport and returns the SDK's client session to it, closed
// (and the server's session waited for) when the test ends.
func mcpSession(t *testing.T, cf connFlags, cfg MCPConfig) *mcp.ClientSession {
	t.Helper()
	c, err := cf.client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := newMCPServer(c, cfg).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "evctl-test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// call calls tool with args and returns its structured result as a T;
// it fails the test on a protocol error or a tool error.
func call[T any](t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) T {
	t.Helper()
	var out T
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("%s %v: tool error %s", tool, args, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: reading %s: %v", tool, b, err)
	}
	return out
}

// callError calls tool with args and returns the text of the tool error
// it must answer (not a protocol error).
func callError(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: a protocol error %v, want a tool error", tool, args, err)
	}
	if !res.IsError {
		t.Fatalf("%s %v: no error, want one: %s", tool, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// summaryKey identifies an event by what EventSummary shows of it.
func summaryKey(e EventSummary) string {
	return strings.Join([]string{e.Namespace, e.Object, e.Type, e.Reason, e.LastSeen, e.Note}, "|")
}

func fixtureKey(e searchEvent) string {
	return strings.Join([]string{e.ns, e.kind + "/" + e.object, e.typ, e.reason, e.last.UTC().Format(time.RFC3339), e.note}, "|")
}

// searchAll calls search_events with args, following the continue
// tokens, and returns every event's key; pages counts the calls.
func searchAll(t *testing.T, cs *mcp.ClientSession, args map[string]any) (keys []string, pages int) {
	t.Helper()
	keys = []string{}
	for {
		out := call[SearchOutput](t, cs, "search_events", args)
		pages++
		for _, e := range out.Events {
			keys = append(keys, summaryKey(e))
		}
		if out.Continue == "" {
			break
		}
		args = mapsWith(args, "continue", out.Continue)
	}
	slices.Sort(keys)
	return keys, pages
}

func mapsWith(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for k2, v2 := range m {
		if k2 != k {
			out[k2] = v2
		}
	}
	return out
}

// TestMCPTools: the SDK's client lists evctl's four read-only tools, and
// each answers from a real eventsd what was written to it: searches
// equal to a brute-force evaluation, page by page through continue
// tokens; an object's and a family's timelines, bounded with what was
// left out said; bad arguments and refused filters as tool errors.
func TestMCPTools(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	evs := writeSearchFixture(t, fe, 300)
	// evctl's stderr, where the server's warnings go outside a tool call.
	var stderr syncbuf.Buffer
	cs := mcpSession(t, connFlags{server: fe.url, namespace: "shop", timeout: "0", warnings: &stderr}, MCPConfig{Clock: clocktesting.NewFakeClock(now)})

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || tl.Description == "" {
			t.Errorf("tool %s: annotations %+v, want read-only and described", tl.Name, tl.Annotations)
		}
	}
	slices.Sort(names)
	if want := []string{"event_facets", "family_timeline", "object_timeline", "search_events"}; !slices.Equal(names, want) {
		t.Errorf("tools %q, want %q", names, want)
	}

	// search_events against a brute-force evaluation, 50 at a time.
	for _, c := range []struct {
		args map[string]any
		want func(searchEvent) bool
	}{
		{map[string]any{"filter": `object.note.contains("OOM")`, "allNamespaces": true, "since": "2h"}, func(e searchEvent) bool {
			return strings.Contains(e.note, "OOM") && !e.last.Before(at(2*time.Hour))
		}},
		// The context's namespace, shop, by default.
		// The context's namespace, shop, by default; the fixture's, not
		// the family's.
		{map[string]any{"fieldSelector": "type=Warning", "filter": `object.regarding.kind == "Pod" && !object.regarding.name.startsWith("web-1-")`, "limit": 10},
			func(e searchEvent) bool { return e.ns == "shop" && e.typ == "Warning" && e.kind == "Pod" }},
	} {
		want := []string{}
		for _, e := range evs {
			if c.want(e) {
				want = append(want, fixtureKey(e))
			}
		}
		slices.Sort(want)
		got, pages := searchAll(t, cs, c.args)
		if !slices.Equal(got, want) {
			t.Errorf("search_events %v: %d events, want %d\n got %q\nwant %q", c.args, len(got), len(want), got, want)
		}
		if pages < 2 {
			t.Errorf("search_events %v: %d events in %d calls; the case must take several", c.args, len(want), pages)
		}
	}
	one := call[SearchOutput](t, cs, "search_events", map[string]any{"allNamespaces": true, "limit": 3})
	if len(one.Events) != 3 || one.Continue == "" || len(one.Notes) == 0 {
		t.Errorf("search_events limit 3: %d events, continue %q, notes %q; want 3, a token and the truncation said", len(one.Events), one.Continue, one.Notes)
	}

	// An object's timeline, in time order.
	tl := call[TimelineOutput](t, cs, "object_timeline", map[string]any{"kind": "pod", "name": "web-1-a"})
	if got := reasons(tl.Events); tl.Object != "Pod/web-1-a" || tl.Namespace != "shop" || !slices.Equal(got, []string{"Pulled", "Started"}) {
		t.Errorf("object_timeline pod/web-1-a: %+v, want Pod/web-1-a in shop with Pulled, Started", tl)
	}
	tl = call[TimelineOutput](t, cs, "object_timeline", map[string]any{"kind": "Pod", "name": "web-1-a", "limit": 1})
	if got := reasons(tl.Events); !slices.Equal(got, []string{"Started"}) || tl.Omitted != 1 {
		t.Errorf("object_timeline limit 1: %+v, want the latest (Started) and 1 omitted", tl)
	}

	// The family: the Deployment, its ReplicaSet, their Pods, each with
	// its owner and events; bounded to the latest events.
	fam := call[FamilyOutput](t, cs, "family_timeline", map[string]any{"kind": "deployment", "name": "web"})
	want := []string{"Deployment/web<: ScalingReplicaSet", "ReplicaSet/web-1<Deployment/web: SuccessfulCreate SuccessfulCreate",
		"Pod/web-1-a<ReplicaSet/web-1: Pulled Started", "Pod/web-1-b<ReplicaSet/web-1: BackOff"}
	if got := familyLines(fam); !slices.Equal(got, want) || fam.Omitted != 0 {
		t.Errorf("family_timeline deployment/web:\n got %q\nwant %q (omitted %d)", got, want, fam.Omitted)
	}
	fam = call[FamilyOutput](t, cs, "family_timeline", map[string]any{"kind": "deployment", "name": "web", "limit": 2})
	want = []string{"Deployment/web<: ", "ReplicaSet/web-1<Deployment/web: ", "Pod/web-1-a<ReplicaSet/web-1: Started", "Pod/web-1-b<ReplicaSet/web-1: BackOff"}
	if got := familyLines(fam); !slices.Equal(got, want) || fam.Omitted != 4 {
		t.Errorf("family_timeline limit 2:\n got %q\nwant %q (omitted %d, want 4)", got, want, fam.Omitted)
	}
	fam = call[FamilyOutput](t, cs, "family_timeline", map[string]any{"kind": "deployment", "name": "web", "since": "30m"})
	if got := familyLines(fam); !slices.Equal(got, []string{"Deployment/web<: ", "ReplicaSet/web-1<Deployment/web: ", "Pod/web-1-b<ReplicaSet/web-1: BackOff"}) {
		t.Errorf("family_timeline since 30m: %q", got)
	}

	// The server's warnings are the call's notes, not evctl's stderr.
	fam = call[FamilyOutput](t, cs, "family_timeline", map[string]any{"kind": "deployment", "name": "ghost"})
	if len(fam.Notes) != 1 || !strings.HasPrefix(fam.Notes[0], "Warning: ") || !strings.Contains(fam.Notes[0], "is not in eventsd's ownership lineage") {
		t.Errorf("family_timeline of an unknown Deployment: notes %q, want the server's warning", fam.Notes)
	}
	if stderr.String() != "" {
		t.Errorf("the server's warnings went to stderr too: %q", stderr.String())
	}

	// Facets: occurrences (each fixture event counts 2) and events by
	// reason, against a brute-force count.
	facets := call[FacetsOutput](t, cs, "event_facets", map[string]any{"namespace": "dev", "since": "1h", "filter": `object.type == "Warning"`, "bucket": "30m"})
	wantEvents := map[string]int64{}
	var total int64
	for _, e := range evs {
		if e.ns == "dev" && e.typ == "Warning" && !e.last.Before(at(time.Hour)) {
			wantEvents[e.reason]++
			total++
		}
	}
	gotEvents := map[string]int64{}
	var buckets int
	for _, f := range facets.Fields {
		for _, v := range f.Values {
			switch f.Field {
			case "reason":
				gotEvents[v.Value] = v.Events
				if v.Occurrences != 2*v.Events {
					t.Errorf("event_facets reason %s: %d occurrences of %d events, want twice as many", v.Value, v.Occurrences, v.Events)
				}
			case "time":
				buckets++
			}
		}
	}
	if !maps.Equal(gotEvents, wantEvents) || facets.Events != total || facets.Occurrences != 2*total || total == 0 ||
		facets.BucketSeconds != 1800 || buckets < 2 {
		t.Errorf("event_facets: %+v\nwant by reason %v, %d events in 30-minute buckets", facets, wantEvents, total)
	}

	// Errors are tool errors with the reason, the server's included.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search_events", map[string]any{"filter": "object.note.contains("}, "Syntax error"},
		{"search_events", map[string]any{"filter": "object.note"}, "bool"},
		{"search_events", map[string]any{"since": "yesterday"}, `"yesterday"`},
		{"search_events", map[string]any{"limit": 1000}, "limit must be between 1 and 200"},
		{"search_events", map[string]any{"namespace": "shop", "allNamespaces": true}, "not both"},
		{"object_timeline", map[string]any{"kind": "gadget", "name": "x"}, `doesn't have a resource type "gadget"`},
		{"object_timeline", map[string]any{"kind": "pod", "name": "x", "since": "soon"}, "neither a duration"},
		{"family_timeline", map[string]any{}, "name the object"},
		{"family_timeline", map[string]any{"kind": "pod", "name": "x", "uid": "u"}, "not both"},
		{"event_facets", map[string]any{"top": 1000}, "top must be between"},
		{"event_facets", map[string]any{"filter": "object.note"}, "bool"},
	} {
		if got := callError(t, cs, c.tool, c.args); !strings.Contains(got, c.want) {
			t.Errorf("%s %v: %q, want it to contain %q", c.tool, c.args, got, c.want)
		}
	}
}

func reasons(evs []EventSummary) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}

// familyLines renders fam as "Object<OwnedBy: reasons" per object.
func familyLines(fam FamilyOutput) []string {
	var out []string
	for _, o := range fam.Objects {
		out = append(out, fmt.Sprintf("%s<%s: %s", o.Object, o.OwnedBy, strings.Join(reasons(o.Events), " ")))
	}
	return out
}

// TestFacetsOutput: event_facets groups the values by field in the
// server's order and keeps, of the time buckets, the latest non-empty
// ones, saying how many it left out.
func TestFacetsOutput(t *testing.T) {
	l := &eventapi.FacetList{Events: 9, Occurrences: 12, BucketSeconds: 60, Items: []eventapi.Facet{
		{Field: "reason", Value: "BackOff", Occurrences: 10, Events: 7}, {Field: "reason", Value: "Pulled", Occurrences: 2, Events: 2},
		{Field: "type", Value: "Warning", Occurrences: 12, Events: 9},
		{Field: "time", Value: "t1", Occurrences: 1, Events: 1}, {Field: "time", Value: "t2"}, {Field: "time", Value: "t3", Occurrences: 2, Events: 1},
		{Field: "time", Value: "t4"}, {Field: "time", Value: "t5", Occurrences: 9, Events: 7},
	}}
	got := facetsOutput(l, 2)
	var lines []string
	for _, f := range got.Fields {
		for _, v := range f.Values {
			lines = append(lines, fmt.Sprintf("%s=%s %d/%d", f.Field, v.Value, v.Occurrences, v.Events))
		}
	}
	want := []string{"reason=BackOff 10/7", "reason=Pulled 2/2", "type=Warning 12/9", "time=t3 2/1", "time=t5 9/7"}
	if !slices.Equal(lines, want) || got.Events != 9 || got.Occurrences != 12 || got.BucketSeconds != 60 ||
		len(got.Notes) != 1 || !strings.HasPrefix(got.Notes[0], "1 earlier non-empty time buckets left out") {
		t.Errorf("facetsOutput: %q, notes %q; want %q and one bucket said left out", lines, got.Notes, want)
	}
}

// TestMCPNote: a long note is cut on a rune boundary and marked.
func TestMCPNote(t *testing.T) {
	for _, c := range []struct {
		note string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abcdef", 10, "0123 [cut]"},
		{"ééééééé", 9, "é [cut]"}, // 2 bytes each: 3 bytes left, one é
	} {
		if got := cutNote(c.note, c.max); got != c.want || len(got) > c.max {
			t.Errorf("cutNote(%q, %d) = %q, want %q", c.note, c.max, got, c.want)
		}
	}
}

// authEnv is an eventsd on loopback over HTTPS (client-go sends a
// kubeconfig's token only over TLS) with static tokens and
// docs/examples/abac-policy.jsonl: root (group sre) reads and writes
// events everywhere, bob reads those of namespace prod only.
func authEnv(t *testing.T) (url string, root kubernetes.Interface) {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("tok-root,root,1,\"sre\"\ntok-bob,bob,1002\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := access.Build(access.Options{TokenAuthFile: tokens, AuthorizationModes: []string{"ABAC"},
		PolicyFile: filepath.Join("..", "docs", "examples", "abac-policy.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(now)
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, DefaultTTL: 24 * time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	url, _ = servertest.ServeTLS(t, server.Config{Store: store, EventTTL: 24 * time.Hour, Clock: clk, Logger: log,
		BookmarkInterval: time.Minute, Authenticator: b.Authenticator, Authorizer: b.Authorizer})
	root, err = kubernetes.NewForConfig(&rest.Config{Host: url, BearerToken: "tok-root", QPS: -1, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return url, root
}

// TestMCPForbidden: the tools read with the user's own credentials: what
// RBAC refuses the user is a tool error with the server's reason, and a
// timeline the user may read only in part says so.
func TestMCPForbidden(t *testing.T) {
	url, root := authEnv(t)
	for i, ns := range []string{"prod", "staging"} {
		ts := metav1.NewTime(at(time.Duration(i+1) * time.Minute))
		_, err := root.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web." + ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "web"},
			Reason:         "BackOff", Message: "Back-off restarting failed container web in " + ns, Type: "Warning",
			FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	cs := mcpSession(t, connFlags{server: url, insecure: true, token: "tok-bob", namespace: "prod", timeout: "0"}, MCPConfig{})

	out := call[SearchOutput](t, cs, "search_events", map[string]any{"filter": `object.reason == "BackOff"`})
	if len(out.Events) != 1 || out.Events[0].Namespace != "prod" {
		t.Errorf("bob's search in prod: %+v, want prod's event", out.Events)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"namespace": "staging"}, `User "bob" cannot list resource "events" in API group "events.k8s.io" in the namespace "staging"`},
		{map[string]any{"allNamespaces": true}, `User "bob" cannot list resource "events" in API group "events.k8s.io" at the cluster scope`},
	} {
		got := callError(t, cs, "search_events", c.args)
		if !strings.Contains(got, c.want) || !strings.Contains(got, "searching the events") {
			t.Errorf("bob's search_events %v: %q, want it to contain %q", c.args, got, c.want)
		}
	}
	tl := call[TimelineOutput](t, cs, "object_timeline", map[string]any{"kind": "pod", "name": "web"})
	if len(tl.Events) != 1 || tl.Events[0].Namespace != "prod" || len(tl.Notes) != 1 ||
		!strings.Contains(tl.Notes[0], `only the events in namespace "prod" are shown`) {
		t.Errorf("bob's object_timeline pod/web: %+v, want prod's event and the narrowing said", tl)
	}
	if got := callError(t, cs, "object_timeline", map[string]any{"kind": "pod", "name": "web", "namespace": "staging"}); !strings.Contains(got, `in the namespace "staging"`) {
		t.Errorf("bob's object_timeline in staging: %q, want the namespace's refusal", got)
	}
}

// TestMCPStdio: evctl mcp, the real binary, serves the SDK's client over
// its stdin and stdout, and ends when the client closes them.
func TestMCPStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds evctl")
	}
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	bin := filepath.Join(t.TempDir(), "evctl")
	build := exec.Command(buildcache.GoTool(), "build", "-o", bin, "../cmd/evctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build evctl: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "mcp", "--server", fe.url, "-n", "shop")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "evctl-test", Version: "v0"}, nil).Connect(ctx,
		// Closing waits this long for evctl to exit before a SIGTERM: it
		// must end on its own when its stdin closes.
		&mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if init := cs.InitializeResult(); init.ServerInfo.Name != "evctl" || !strings.Contains(init.Instructions, "why did my pod restart") {
		t.Errorf("initialize: %+v, want evctl with its instructions", init.ServerInfo)
	}
	out := call[SearchOutput](t, cs, "search_events", map[string]any{"filter": `object.type == "Warning"`})
	if len(out.Events) != 1 || out.Events[0].Object != "Pod/web-1-b" || out.Events[0].Reason != "BackOff" ||
		out.Events[0].Note != "Back-off restarting failed container web" || out.Events[0].LastSeen != at(10*time.Minute).Format(time.RFC3339) {
		t.Errorf("search_events over stdio: %+v, want web-1-b's BackOff", out.Events)
	}
	start := time.Now()
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("evctl mcp took %s to exit after its stdin closed", d)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("evctl mcp after the client closed: %v, want a clean exit; stderr:\n%s", cmd.ProcessState, stderr.String())
	}
}

// TestMCPWithoutExtensions: against eventsd --extensions=false (as
// against a server without eventsd's family queries and filters), the
// object's own timeline still answers, and what needs the extensions is a
// tool error that says why and what to use instead.
func TestMCPWithoutExtensions(t *testing.T) {
	fe := newFamilyEnv(t, false)
	fe.writeFamily()
	cs := mcpSession(t, connFlags{server: fe.url, namespace: "shop", timeout: "0"}, MCPConfig{Clock: clocktesting.NewFakeClock(now)})
	tl := call[TimelineOutput](t, cs, "object_timeline", map[string]any{"kind": "pod", "name": "web-1-a"})
	if got := reasons(tl.Events); !slices.Equal(got, []string{"Pulled", "Started"}) {
		t.Errorf("object_timeline without extensions: %q, want Pulled, Started", got)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"family_timeline", map[string]any{"kind": "deployment", "name": "web"}, []string{"does not answer family queries", "use object_timeline"}},
		{"search_events", map[string]any{"filter": "true"}, []string{"the server refused the search", "extensions are disabled"}},
	} {
		got := callError(t, cs, c.tool, c.args)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s without extensions: %q, want it to contain %q", c.tool, got, w)
			}
		}
	}
}
