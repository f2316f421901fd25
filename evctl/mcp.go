package evctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/buildinfo"
)

// MCPConfig bounds what one tool call of evctl mcp returns, so that an
// answer fits an assistant's context. Zero fields take the defaults.
type MCPConfig struct {
	// DefaultEvents is how many events a call returns when it does not
	// say (default 50); MaxEvents the most it may ask for (default 200).
	DefaultEvents, MaxEvents int
	// MaxObjects is the most objects family_timeline lists (default 200).
	MaxObjects int
	// MaxNoteBytes cuts each event's note (default 512 bytes), marked.
	MaxNoteBytes int
	// MaxFacetTop is the most values per field event_facets may ask for
	// (default 100); MaxBuckets the most time buckets it returns, the
	// latest, leaving out the empty ones (default 100).
	MaxFacetTop, MaxBuckets int
	// Clock is what durations back from now are counted from in the
	// timelines' since and until (default the real clock; searches and
	// facets send them to the server, which counts on its own).
	Clock clock.PassiveClock
}

func (c MCPConfig) withDefaults() MCPConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.DefaultEvents, 50)
	def(&c.MaxEvents, 200)
	def(&c.MaxObjects, 200)
	def(&c.MaxNoteBytes, 512)
	def(&c.MaxFacetTop, 100)
	def(&c.MaxBuckets, 100)
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.DefaultEvents > c.MaxEvents {
		c.DefaultEvents = c.MaxEvents
	}
	return c
}

// mcpInstructions tell an assistant what the server is for and how to
// use its tools together.
const mcpInstructions = `Read-only access to a Kubernetes cluster's events, through the user's own kubeconfig and permissions.
Events are what controllers and the kubelet report about objects: scheduling, image pulls, container starts,
probe failures, back-offs, OOM kills, evictions, scaling. To answer "why did my pod restart" or "what happened
to my deployment": start with family_timeline on the object the user names (a Deployment shows its ReplicaSets
and Pods, deleted ones included), or object_timeline for the object alone; use search_events for text or
conditions across objects (a CEL filter such as object.note.contains("out of memory")), and event_facets for which reasons,
kinds or namespaces are loudest. A series (the same event repeated) is one event with a count and first and last
times. Times are UTC, RFC 3339. On an eventsd serving a fleet of clusters, every tool takes cluster: a cluster's
name, or "*" for every cluster at once (family_timeline excepted: a family is one cluster's).`

// newMCPServer returns the MCP server of evctl mcp: its tools read through
// c, each call with a fresh querier.
func newMCPServer(c *clients, cfg MCPConfig) *mcp.Server {
	t := &mcpTools{c: c, cfg: cfg.withDefaults()}
	s := mcp.NewServer(&mcp.Implementation{Name: "evctl", Title: "Kubernetes events (evctl)", Version: buildinfo.Get().GitVersion},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(s, &mcp.Tool{Name: "search_events", Annotations: ro, Description: fmt.Sprintf(
		`Search the cluster's events with a CEL filter, a time range and selectors. Use it for conditions across objects:
"OOM kills in namespace shop in the last hour" is filter object.reason.startsWith("OOM") ||
object.note.contains("out of memory"), namespace shop, since 1h.
The filter is a CEL expression over object, the event in events.k8s.io/v1's shape: object.reason, object.type
("Normal" or "Warning"), object.note (the message), object.regarding.kind/.name/.namespace (the object it is about),
object.related, object.reportingController, object.eventTime, and how often it repeated: object.series.count
(events.k8s.io recorders; test has(object.series) first) or object.deprecatedCount (core/v1 recorders such as the
kubelet); with CEL's string functions (contains, startsWith, matches for regular expressions, lowerAscii) and
timestamps. Returns at most limit events (default %d, at most %d), ordered by when they last happened within the
call, and a continue token when more may match: call again with it, and the same other arguments, for the next ones.`, t.cfg.DefaultEvents, t.cfg.MaxEvents)}, t.searchEvents)
	mcp.AddTool(s, &mcp.Tool{Name: "object_timeline", Annotations: ro, Description: fmt.Sprintf(
		`Everything that happened to one object, in time order: the events about it and those where it is the related
object (a Node's events include the Pods scheduled on it). Use it for "why did pod X restart" when only the Pod
matters: look for BackOff, Killing, Unhealthy (failed probes), OOMKilling, Evicted, FailedScheduling, Pulled/Failed.
Kind is as kubectl takes it (pod, Deployment, node). Returns the latest limit events (default %d, at most %d).`,
		t.cfg.DefaultEvents, t.cfg.MaxEvents)}, t.objectTimeline)
	mcp.AddTool(s, &mcp.Tool{Name: "family_timeline", Annotations: ro, Description: fmt.Sprintf(
		`Everything that happened to an object and to all it owns, transitively, deleted objects included: a Deployment,
its ReplicaSets and their Pods (withNodes adds the Nodes the Pods ran on), each object with its events in time
order and the object that owns it. The best first call for "why did my pod restart" or "what went wrong with my
deployment": a rollout, a crashing or evicted Pod, a Node problem show together. Name the object by kind and
name (namespace defaults to the user's), or by uid (for a deleted object). Returns the latest limit events
(default %d, at most %d) across the family.`, t.cfg.DefaultEvents, t.cfg.MaxEvents)}, t.familyTimeline)
	mcp.AddTool(s, &mcp.Tool{Name: "event_facets", Annotations: ro, Description: fmt.Sprintf(
		`Counts of occurrences (a series counts all its repeats) of the selected events, by reason, type, kind,
namespace and reporting controller (the top values of each, most first; top at most %d), and over time buckets.
Use it to find what is loudest ("which reasons dominate in the last hour", "which namespace has the most
warnings") before searching for the events themselves. Takes the same filter, time range and selectors as
search_events; bucket is the width of the time buckets (e.g. 5m, 1h).`, t.cfg.MaxFacetTop)}, t.eventFacets)
	return s
}

// mcpTools are the tool handlers of evctl mcp.
type mcpTools struct {
	c   *clients
	cfg MCPConfig

	// mu guards byCluster, the clients of the clusters calls named
	// (their cluster argument), made on first use.
	mu        sync.Mutex
	byCluster map[string]*clients
}

// clients returns the clients of a call's cluster argument: evctl's own
// for none (or the one it was started with), else that cluster's (checked
// against the server's clusters).
func (t *mcpTools) clients(cluster string) (*clients, error) {
	if cluster == "" {
		return t.c, nil
	}
	name, err := clusterArg("cluster", cluster, false, "")
	if err != nil {
		return nil, err
	}
	if name == t.c.cluster {
		return t.c, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.byCluster[name]; ok {
		return c, nil
	}
	conn := t.c.conn
	conn.cluster, conn.allClusters = name, false
	c, err := conn.client()
	if err != nil {
		return nil, err
	}
	if t.byCluster == nil {
		t.byCluster = map[string]*clients{}
	}
	t.byCluster[name] = c
	return c, nil
}

// EventSummary is an event as the MCP tools return it: what an assistant
// needs, in few tokens.
type EventSummary struct {
	LastSeen  string `json:"lastSeen" jsonschema:"when it last happened (RFC 3339, UTC)"`
	FirstSeen string `json:"firstSeen,omitempty" jsonschema:"when it first happened, for an event that happened more than once"`
	Count     int32  `json:"count" jsonschema:"how many times it happened"`
	Type      string `json:"type" jsonschema:"Normal or Warning"`
	Reason    string `json:"reason"`
	Object    string `json:"object" jsonschema:"the object it is about, Kind/name"`
	Namespace string `json:"namespace,omitempty"`
	Related   string `json:"related,omitempty" jsonschema:"a second object it involves, Kind/name"`
	Role      string `json:"role,omitempty" jsonschema:"related when the timeline's object is the event's related object, not the one it is about"`
	Source    string `json:"source,omitempty" jsonschema:"who reported it: the controller (and instance or host)"`
	Note      string `json:"note" jsonschema:"the message; cut and marked [cut] when very long"`
	State     string `json:"seriesState,omitempty" jsonschema:"for a series its recorder tracks: ongoing, finished or unknown"`
	Cluster   string `json:"cluster,omitempty" jsonschema:"the cluster of the fleet it happened in, when read across clusters ('*')"`
}

// summary returns r as an EventSummary.
func (t *mcpTools) summary(r *row, role string) EventSummary {
	ev := r.ev
	s := EventSummary{LastSeen: r.last.UTC().Format(time.RFC3339), Count: r.count, Type: ev.Type, Reason: ev.Reason,
		Object: objectRef(ev.Regarding.Kind, ev.Regarding.Name), Namespace: ev.Namespace, Related: related(ev), Role: role,
		Source: source(ev), Note: cutNote(trimmed(ev.Note), t.cfg.MaxNoteBytes), State: r.state, Cluster: clusterOf(r)}
	if !r.first.Equal(r.last) {
		s.FirstSeen = r.first.UTC().Format(time.RFC3339)
	}
	return s
}

// cutNote returns note cut to at most max bytes (on a rune boundary)
// and marked, when longer.
func cutNote(note string, max int) string {
	if len(note) <= max {
		return note
	}
	const mark = " [cut]"
	n := max - len(mark)
	for n > 0 && !utf8.RuneStart(note[n]) {
		n--
	}
	return note[:n] + mark
}

// limit returns the number of events a call asked for, checked.
func (t *mcpTools) limit(n int) (int, error) {
	switch {
	case n == 0:
		return t.cfg.DefaultEvents, nil
	case n < 0 || n > t.cfg.MaxEvents:
		return 0, fmt.Errorf("limit must be between 1 and %d, not %d", t.cfg.MaxEvents, n)
	}
	return n, nil
}

// namespace returns the namespace a call reads ("" for all): the one it
// names, all of them, or the kubeconfig context's.
func (t *mcpTools) namespace(ns string, all bool) (string, error) {
	switch {
	case all && ns != "":
		return "", fmt.Errorf("give namespace or allNamespaces, not both")
	case all:
		return metav1.NamespaceAll, nil
	case ns == "":
		return t.c.ns, nil
	}
	return ns, nil
}

// SearchInput is search_events' arguments.
type SearchInput struct {
	Filter        string `json:"filter,omitempty" jsonschema:"a CEL expression over object (the event, events.k8s.io/v1 shape) that must be true, e.g. object.type == 'Warning' && object.note.contains('OOM'); empty for every event"`
	Namespace     string `json:"namespace,omitempty" jsonschema:"the namespace to search; default the user's current namespace"`
	AllNamespaces bool   `json:"allNamespaces,omitempty" jsonschema:"search every namespace (the user may not be allowed to)"`
	Since         string `json:"since,omitempty" jsonschema:"only events last seen at or after this: a duration back from now (30m, 2h) or an RFC 3339 time"`
	Until         string `json:"until,omitempty" jsonschema:"only events last seen before this: a duration back from now or an RFC 3339 time"`
	FieldSelector string `json:"fieldSelector,omitempty" jsonschema:"a Kubernetes field selector, e.g. type=Warning,reason=BackOff,regarding.name=web-1"`
	Limit         int    `json:"limit,omitempty" jsonschema:"the most events to return"`
	Continue      string `json:"continue,omitempty" jsonschema:"the continue token of the previous call, for the next events of the same search"`
	Cluster       string `json:"cluster,omitempty" jsonschema:"for an eventsd serving a fleet of clusters: the cluster to read, or '*' for every cluster at once (each event then says its cluster); default the one evctl was started with"`
}

// SearchOutput is search_events' result.
type SearchOutput struct {
	Events   []EventSummary `json:"events"`
	Continue string         `json:"continue,omitempty" jsonschema:"set when more events match: pass it as continue, with the same other arguments, for the next ones"`
	Notes    []string       `json:"notes,omitempty"`
}

func (t *mcpTools) searchEvents(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, SearchOutput, error) {
	ctx, warnings := collectWarnings(ctx)
	out := SearchOutput{Events: []EventSummary{}}
	n, err := t.limit(in.Limit)
	if err != nil {
		return nil, out, err
	}
	ns, err := t.namespace(in.Namespace, in.AllNamespaces)
	if err != nil {
		return nil, out, err
	}
	c, err := t.clients(in.Cluster)
	if err != nil {
		return nil, out, err
	}
	q := c.querier()
	if err := searchable(q.cs.Discovery(), q.group); err != nil {
		return nil, out, err
	}
	s := searchSpec{filter: in.Filter, since: in.Since, until: in.Until, fieldSelector: in.FieldSelector}
	l, err := q.searchPage(ctx, ns, s, int64(n), in.Continue)
	if err != nil {
		return nil, out, fmt.Errorf("searching the events%s: %w", inNamespace(ns), err)
	}
	rows := make([]*row, 0, len(l.Items))
	for i := range l.Items {
		rows = append(rows, newRow(&l.Items[i]))
	}
	// A server may answer more than asked; what is left out is said.
	if len(rows) > n {
		out.Notes = append(out.Notes, fmt.Sprintf("the server answered %d events; %d are shown", len(rows), n))
		rows = rows[:n]
	}
	sortByLast(rows)
	for _, r := range rows {
		out.Events = append(out.Events, t.summary(r, ""))
	}
	out.Continue = l.Continue
	if out.Continue != "" {
		out.Notes = append(out.Notes, "more events may match: call again with this continue token")
	}
	out.Notes = append(out.Notes, warnings.notes()...)
	return nil, out, nil
}

// inNamespace is " in namespace NS", or " in every namespace" for "".
func inNamespace(ns string) string {
	if ns == "" {
		return " in every namespace"
	}
	return " in namespace " + strconv.Quote(ns)
}

// ObjectInput is object_timeline's arguments.
type ObjectInput struct {
	Kind      string `json:"kind" jsonschema:"the object's kind or resource as kubectl takes it: pod, Deployment, deployment.apps, node"`
	Name      string `json:"name" jsonschema:"the object's name"`
	Namespace string `json:"namespace,omitempty" jsonschema:"the object's namespace; default the user's current namespace"`
	Since     string `json:"since,omitempty" jsonschema:"only events that happened after this: a duration back from now (30m, 2h) or an RFC 3339 time"`
	Until     string `json:"until,omitempty" jsonschema:"only events that happened before this: a duration back from now or an RFC 3339 time"`
	Limit     int    `json:"limit,omitempty" jsonschema:"the most events to return (the latest)"`
	Cluster   string `json:"cluster,omitempty" jsonschema:"for an eventsd serving a fleet of clusters: the cluster to read, or '*' for every cluster at once (each event then says its cluster); default the one evctl was started with"`
}

// TimelineOutput is object_timeline's result.
type TimelineOutput struct {
	Object    string         `json:"object"`
	Namespace string         `json:"namespace,omitempty"`
	Events    []EventSummary `json:"events" jsonschema:"in time order (first occurrence)"`
	Omitted   int            `json:"omitted,omitempty" jsonschema:"how many earlier events were left out by limit"`
	Notes     []string       `json:"notes,omitempty"`
}

// window reads a call's since and until.
func callWindow(since, until string, now time.Time) (window, error) {
	var w window
	var err error
	if w.since, err = parseWhen("since", since, now); err != nil {
		return w, err
	}
	if w.until, err = parseWhen("until", until, now); err != nil {
		return w, err
	}
	if !w.since.IsZero() && !w.until.IsZero() && w.until.Before(w.since) {
		return w, fmt.Errorf("until (%s) is before since (%s)", w.until.UTC().Format(time.RFC3339), w.since.UTC().Format(time.RFC3339))
	}
	return w, nil
}

// timelineCall is what a timeline tool's call reads from its arguments:
// how many events, the window, the namespace of the object, and a
// querier whose remarks go to the call's notes.
type timelineCall struct {
	limit  int
	window window
	ns     string
	q      *querier
}

// timelineCall checks a timeline call's common arguments: the namespace
// defaults to the kubeconfig context's.
func (t *mcpTools) timelineCall(cluster string, limit int, since, until, ns string, out *[]string) (timelineCall, error) {
	n, err := t.limit(limit)
	if err != nil {
		return timelineCall{}, err
	}
	w, err := callWindow(since, until, t.cfg.Clock.Now())
	if err != nil {
		return timelineCall{}, err
	}
	c, err := t.clients(cluster)
	if err != nil {
		return timelineCall{}, err
	}
	if ns == "" {
		ns = c.ns
	}
	q := c.querier()
	notes(q, out)
	return timelineCall{limit: n, window: w, ns: ns, q: q}, nil
}

// notes collects what a querier says while it answers: a timeline
// narrowed to one namespace, a family shown without its lineage.
func notes(q *querier, out *[]string) {
	q.narrowed = func(ns string, err error) {
		*out = append(*out, fmt.Sprintf("%v; only the events in namespace %q are shown", err, ns))
	}
	q.noLineage = func(err error) {
		*out = append(*out, fmt.Sprintf("%v; the events are shown without who owns what", err))
	}
}

func (t *mcpTools) objectTimeline(ctx context.Context, _ *mcp.CallToolRequest, in ObjectInput) (*mcp.CallToolResult, TimelineOutput, error) {
	ctx, warnings := collectWarnings(ctx)
	out := TimelineOutput{Events: []EventSummary{}}
	tc, err := t.timelineCall(in.Cluster, in.Limit, in.Since, in.Until, in.Namespace, &out.Notes)
	if err != nil {
		return nil, out, err
	}
	n, w, ns, q := tc.limit, tc.window, tc.ns, tc.q
	tg, err := resolveTarget(q.cs, in.Kind+"/"+in.Name, ns)
	if err != nil {
		return nil, out, err
	}
	out.Object, out.Namespace = tg.String(), tg.namespace
	rows, _, err := q.timeline(ctx, tg, ns)
	if err != nil {
		return nil, out, fmt.Errorf("reading the events of %s: %w", tg, err)
	}
	rows = keepRows(rows, w.contains)
	sortByFirst(rows)
	if len(rows) > n {
		out.Omitted = len(rows) - n
		out.Notes = append(out.Notes, fmt.Sprintf("%d earlier events left out: narrow with since/until, or raise limit", out.Omitted))
		rows = rows[out.Omitted:]
	}
	for _, r := range rows {
		out.Events = append(out.Events, t.summary(r, r.role))
	}
	out.Notes = append(out.Notes, warnings.notes()...)
	return nil, out, nil
}

// FamilyInput is family_timeline's arguments.
type FamilyInput struct {
	Kind      string `json:"kind,omitempty" jsonschema:"the object's kind or resource as kubectl takes it: deployment, statefulset, job, pod, node"`
	Name      string `json:"name,omitempty" jsonschema:"the object's name"`
	Namespace string `json:"namespace,omitempty" jsonschema:"the object's namespace; default the user's current namespace"`
	UID       string `json:"uid,omitempty" jsonschema:"the object's uid, instead of kind and name (a deleted object's, for one)"`
	WithNodes bool   `json:"withNodes,omitempty" jsonschema:"add the Nodes the family's Pods ran on, with their events"`
	Since     string `json:"since,omitempty" jsonschema:"only events that happened after this: a duration back from now (30m, 2h) or an RFC 3339 time"`
	Until     string `json:"until,omitempty" jsonschema:"only events that happened before this: a duration back from now or an RFC 3339 time"`
	Limit     int    `json:"limit,omitempty" jsonschema:"the most events to return across the family (the latest)"`
	Cluster   string `json:"cluster,omitempty" jsonschema:"for an eventsd serving a fleet of clusters: the cluster to read, or '*' for every cluster at once (each event then says its cluster); default the one evctl was started with"`
}

// FamilyObject is one object of a family and its events.
type FamilyObject struct {
	Object    string         `json:"object" jsonschema:"Kind/name"`
	Namespace string         `json:"namespace,omitempty"`
	UID       string         `json:"uid,omitempty"`
	OwnedBy   string         `json:"ownedBy,omitempty" jsonschema:"the object of the family that owns it, Kind/name"`
	Deleted   bool           `json:"deleted,omitempty"`
	Events    []EventSummary `json:"events" jsonschema:"in time order (first occurrence)"`
}

// FamilyOutput is family_timeline's result.
type FamilyOutput struct {
	Objects []FamilyObject `json:"objects" jsonschema:"the object first, then what it owns, each after its owner"`
	Omitted int            `json:"omitted,omitempty" jsonschema:"how many earlier events (or objects) were left out by the bounds"`
	Notes   []string       `json:"notes,omitempty"`
}

func (t *mcpTools) familyTimeline(ctx context.Context, _ *mcp.CallToolRequest, in FamilyInput) (*mcp.CallToolResult, FamilyOutput, error) {
	ctx, warnings := collectWarnings(ctx)
	out := FamilyOutput{Objects: []FamilyObject{}}
	named := in.Kind != "" || in.Name != ""
	switch {
	case !named && in.UID == "":
		return nil, out, fmt.Errorf("name the object: kind and name (e.g. deployment and web), or uid")
	case named && in.UID != "":
		return nil, out, fmt.Errorf("name the object once: kind and name, or uid, not both")
	case in.Cluster == fleetCluster || in.Cluster == "" && t.c.cluster == fleetCluster:
		return nil, out, fmt.Errorf("a family is one cluster's: give cluster a cluster's name, or use object_timeline for the object in every cluster")
	}
	tc, err := t.timelineCall(in.Cluster, in.Limit, in.Since, in.Until, in.Namespace, &out.Notes)
	if err != nil {
		return nil, out, err
	}
	n, w, ns, q := tc.limit, tc.window, tc.ns, tc.q
	spec := familySpec{uid: in.UID, withNodes: in.WithNodes}
	if named {
		tg, err := resolveTarget(q.cs, in.Kind+"/"+in.Name, ns)
		if err != nil {
			return nil, out, err
		}
		spec.target = &tg
	}
	objs, rows, _, err := q.family(ctx, spec, ns)
	var nf *noFamilyError
	if errors.As(err, &nf) {
		return nil, out, fmt.Errorf("%w: use object_timeline for the object alone", err)
	}
	if err != nil {
		return nil, out, fmt.Errorf("reading the family of %s: %w", spec, err)
	}
	tree := buildTree(withRoot(objs, spec), rows, spec.withNodes)
	if w.set() {
		tree.prune(w)
	}
	all := tree.rows()
	left := map[*row]bool{}
	if len(all) > n {
		for _, r := range all[:len(all)-n] {
			left[r] = true
		}
		out.Omitted = len(left)
		out.Notes = append(out.Notes, fmt.Sprintf("%d earlier events left out: narrow with since/until, or raise limit", len(left)))
	}
	objsLeft := 0
	var walk func(nodes []*treeNode, owner string)
	walk = func(nodes []*treeNode, owner string) {
		for _, nd := range nodes {
			if len(out.Objects) == t.cfg.MaxObjects {
				objsLeft++
			} else {
				o := FamilyObject{Object: objectRef(nd.obj.Object.Kind, nd.obj.Object.Name), Namespace: nd.obj.Object.Namespace,
					UID: string(nd.obj.Object.UID), OwnedBy: owner, Deleted: nd.obj.Deleted, Events: []EventSummary{}}
				for i, r := range nd.rows {
					if !left[r] {
						o.Events = append(o.Events, t.summary(r, nd.roles[i]))
					}
				}
				out.Objects = append(out.Objects, o)
			}
			walk(nd.children, objectRef(nd.obj.Object.Kind, nd.obj.Object.Name))
		}
	}
	walk(tree.top, "")
	if objsLeft > 0 {
		out.Omitted += objsLeft
		out.Notes = append(out.Notes, fmt.Sprintf("%d more objects of the family left out (at most %d are listed)", objsLeft, t.cfg.MaxObjects))
	}
	out.Notes = append(out.Notes, warnings.notes()...)
	return nil, out, nil
}

// FacetsInput is event_facets' arguments.
type FacetsInput struct {
	Namespace     string `json:"namespace,omitempty" jsonschema:"the namespace to summarize; default the user's current namespace"`
	AllNamespaces bool   `json:"allNamespaces,omitempty" jsonschema:"summarize every namespace (the user may not be allowed to)"`
	Filter        string `json:"filter,omitempty" jsonschema:"a CEL expression over object, as search_events takes"`
	Since         string `json:"since,omitempty" jsonschema:"only events last seen at or after this: a duration back from now (1h) or an RFC 3339 time"`
	Until         string `json:"until,omitempty" jsonschema:"only events last seen before this: a duration back from now or an RFC 3339 time"`
	FieldSelector string `json:"fieldSelector,omitempty" jsonschema:"a Kubernetes field selector, e.g. type=Warning"`
	Top           int    `json:"top,omitempty" jsonschema:"how many values per field, most first (default the server's, 10)"`
	Bucket        string `json:"bucket,omitempty" jsonschema:"the width of the time buckets, e.g. 5m or 1h (default the server's choice)"`
	Cluster       string `json:"cluster,omitempty" jsonschema:"for an eventsd serving a fleet of clusters: the cluster to read, or '*' for every cluster at once (each event then says its cluster); default the one evctl was started with"`
}

// FacetValue is one value of a field and what its events report.
type FacetValue struct {
	Value       string `json:"value" jsonschema:"the field's value (a time bucket's start, for time)"`
	Occurrences int64  `json:"occurrences" jsonschema:"occurrences, a series' repeats included"`
	Events      int64  `json:"events" jsonschema:"distinct events (series count once)"`
}

// FacetField is one field's values.
type FacetField struct {
	Field  string       `json:"field" jsonschema:"reason, type, kind, namespace, reportingController or time"`
	Values []FacetValue `json:"values"`
}

// FacetsOutput is event_facets' result.
type FacetsOutput struct {
	Since         string       `json:"since,omitempty"`
	Until         string       `json:"until,omitempty"`
	BucketSeconds int64        `json:"bucketSeconds,omitempty"`
	Occurrences   int64        `json:"occurrences"`
	Events        int64        `json:"events"`
	Fields        []FacetField `json:"fields" jsonschema:"per field its top values, most first; time's buckets in time order, empty ones left out"`
	Notes         []string     `json:"notes,omitempty"`
}

func (t *mcpTools) eventFacets(ctx context.Context, _ *mcp.CallToolRequest, in FacetsInput) (*mcp.CallToolResult, FacetsOutput, error) {
	ctx, warnings := collectWarnings(ctx)
	out := FacetsOutput{Fields: []FacetField{}}
	if in.Top < 0 || in.Top > t.cfg.MaxFacetTop {
		return nil, out, fmt.Errorf("top must be between 1 and %d, not %d", t.cfg.MaxFacetTop, in.Top)
	}
	ns, err := t.namespace(in.Namespace, in.AllNamespaces)
	if err != nil {
		return nil, out, err
	}
	params := map[string]string{"fieldSelector": in.FieldSelector, "filter": in.Filter, "since": in.Since, "until": in.Until, "bucket": in.Bucket}
	if in.Top > 0 {
		params["top"] = strconv.Itoa(in.Top)
	}
	c, err := t.clients(in.Cluster)
	if err != nil {
		return nil, out, err
	}
	l, err := c.facets(ctx, ns, params)
	switch {
	case apierrors.IsNotFound(err):
		return nil, out, fmt.Errorf("the server does not serve %s (not eventsd, or an eventsd without them): %w", eventapi.FacetResource, err)
	case apierrors.IsBadRequest(err):
		return nil, out, fmt.Errorf("the server refused the summary: %w", err)
	case err != nil:
		return nil, out, fmt.Errorf("summarizing the events%s: %w", inNamespace(ns), err)
	}
	out = facetsOutput(l, t.cfg.MaxBuckets)
	out.Notes = append(warnings.notes(), out.Notes...)
	return nil, out, nil
}

// facetsOutput returns l as event_facets returns it: values grouped by
// field, in the server's order; of the time buckets, the non-empty ones,
// at most maxBuckets (the latest), saying how many were left out.
func facetsOutput(l *eventapi.FacetList, maxBuckets int) FacetsOutput {
	out := FacetsOutput{Fields: []FacetField{}, BucketSeconds: l.BucketSeconds, Occurrences: l.Occurrences, Events: l.Events}
	if l.Since != nil {
		out.Since = l.Since.UTC().Format(time.RFC3339)
	}
	if l.Until != nil {
		out.Until = l.Until.UTC().Format(time.RFC3339)
	}
	at := map[string]int{}
	for _, f := range l.Items {
		if f.Field == eventapi.FacetTime && f.Events == 0 {
			continue
		}
		i, ok := at[f.Field]
		if !ok {
			i = len(out.Fields)
			at[f.Field] = i
			out.Fields = append(out.Fields, FacetField{Field: f.Field, Values: []FacetValue{}})
		}
		out.Fields[i].Values = append(out.Fields[i].Values, FacetValue{Value: f.Value, Occurrences: f.Occurrences, Events: f.Events})
	}
	if i, ok := at[eventapi.FacetTime]; ok && len(out.Fields[i].Values) > maxBuckets {
		vs := out.Fields[i].Values
		out.Notes = append(out.Notes, fmt.Sprintf("%d earlier non-empty time buckets left out: narrow since, or widen bucket", len(vs)-maxBuckets))
		out.Fields[i].Values = vs[len(vs)-maxBuckets:]
	}
	return out
}

// warningsKey is the context key of a call's warningCollector.
type warningsKey struct{}

// warningCollector keeps the server's warnings to one tool call, each
// once, for its notes.
type warningCollector struct {
	mu   sync.Mutex
	list []string
}

// collectWarnings returns ctx with a collector of the warnings the
// requests made with it get.
func collectWarnings(ctx context.Context) (context.Context, *warningCollector) {
	c := &warningCollector{}
	return context.WithValue(ctx, warningsKey{}, c), c
}

func (c *warningCollector) add(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.list, text) {
		c.list = append(c.list, text)
	}
}

// notes returns the warnings, as notes ("Warning: ...").
func (c *warningCollector) notes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, w := range c.list {
		out = append(out, "Warning: "+w)
	}
	return out
}

// routedWarnings hands a response's Warning header to the collector of
// its request's context (an MCP tool call's), else to fallback (stderr,
// as kubectl prints them).
type routedWarnings struct{ fallback rest.WarningHandler }

func (r routedWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if c, ok := ctx.Value(warningsKey{}).(*warningCollector); ok {
		if code == 299 && text != "" { // what rest.WarningWriter counts as a warning
			c.add(text)
		}
		return
	}
	r.fallback.HandleWarningHeader(code, agent, text)
}

func (e *env) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the Model Context Protocol over stdio: read-only event tools for an AI assistant",
		Long: `mcp serves the Model Context Protocol (MCP) over stdin and stdout, for an AI
assistant (Claude Desktop, Claude Code, VS Code, ...) to answer "why did my
pod restart" from the cluster's events. Its tools are read-only and read
through the kubeconfig, context and user evctl is given, with that user's
permissions: search_events (a CEL filter, a time range, selectors),
object_timeline (an object's events, as evctl timeline --family=false),
family_timeline (an object and all it owns, as evctl timeline), and
event_facets (occurrences by reason, type, kind, namespace, controller and
over time, from eventsd's facets). Each call returns a bounded number of
events and says what it left out. On an eventsd serving a fleet of
clusters, each tool takes a cluster argument: a cluster's name, or "*" for
every cluster at once; without it, the cluster of --cluster (or
--all-clusters), else the server's root.

Register it with an MCP client as a command, for example:

  {"mcpServers": {"kubernetes-events": {"command": "evctl", "args": ["mcp", "--context", "prod"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := e.conn.client()
			if err != nil {
				return err
			}
			s := newMCPServer(c, MCPConfig{})
			err = s.Run(cmd.Context(), &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{e.out}})
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
				return nil // the client went away, or evctl was stopped
			}
			return fmt.Errorf("serving MCP: %w", err)
		},
	}
}

// nopWriteCloser is an io.WriteCloser whose Close does nothing: stdout
// stays open after the session.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
