package evctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/internal/duration"
)

// filterFlags are the selection flags of get and watch.
type filterFlags struct {
	forArg, typ, reason, action, controller, instance string
	since                                             time.Duration
}

func (f *filterFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.forArg, "for", "", "Only events about KIND/NAME (as kubectl events --for).")
	fl.StringVar(&f.typ, "type", "", "Only events of this type: Normal or Warning.")
	fl.StringVar(&f.reason, "reason", "", "Only events with this reason.")
	fl.StringVar(&f.action, "action", "", "Only events with this action.")
	fl.StringVar(&f.controller, "controller", "", "Only events reported by this controller (reportingController, or the source component of legacy events).")
	fl.StringVar(&f.instance, "instance", "", "Only events reported by this reporting instance.")
	fl.DurationVar(&f.since, "since", 0, "Only events that last happened within this long (e.g. 10m, 2h).")
	duration.HintFlags(fl) // --since 7d: use hours, e.g. 168h
}

func (f *filterFlags) filter(now func() time.Time) (filter, error) {
	out := filter{reason: f.reason, action: f.action, controller: f.controller, instance: f.instance, since: f.since, now: now}
	switch strings.ToLower(f.typ) {
	case "":
	case "normal":
		out.typ = "Normal"
	case "warning":
		out.typ = "Warning"
	default:
		return out, fmt.Errorf("valid --type values are Normal or Warning, not %q", f.typ)
	}
	if f.since < 0 {
		return out, fmt.Errorf("--since must not be negative")
	}
	return out, nil
}

func checkOutput(o string) error {
	switch o {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml", o)
}

// env is what every command needs: a client, the namespace, the clock,
// where to write.
type env struct {
	conn        connFlags
	output      string
	out, errOut io.Writer
	now         func() time.Time
	// timeout is --request-timeout, parsed, once setup has run.
	timeout time.Duration
}

// NewCommand returns the evctl command writing to out and errOut.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	e := &env{out: out, errOut: errOut, now: time.Now}
	e.conn.warnings = errOut
	root := &cobra.Command{
		Use:   "evctl",
		Short: "Answers the questions about Kubernetes events that kubectl can't",
		Long: `evctl reads Kubernetes events from any API server (kubeconfig, --context, -n,
-A, or --server), and uses eventsd's extensions when the server has them:

  evctl get --for pod/web-1 --since 10m --type Warning
  evctl timeline deployment/web      # it and all it owns (ReplicaSets, Pods), as a tree, with their events
  evctl watch --controller kubelet   # sorted, resumes after disconnects without duplicates or gaps
  evctl search 'object.note.contains("OOM")' -A --since 1h   # eventsd's CEL filter over a time range
  evctl mcp                          # the same questions from an AI assistant, over the Model Context Protocol

On an eventsd serving a fleet of clusters, --cluster NAME reads one of them
and --all-clusters every one at once (evctl clusters lists them):

  evctl get -A --all-clusters --type Warning   # with a CLUSTER column`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	e.conn.add(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&e.output, "output", "o", "", "Output format: wide, json or yaml.")
	root.AddCommand(e.getCommand(), e.timelineCommand(), e.watchCommand(), e.searchCommand(), e.topCommand(), e.clustersCommand(), e.mcpCommand())
	buildinfo.AddVersionFlag(root)
	return root
}

// setup connects, resolves --for and returns the querier, the filter, the
// namespace to list in ("" for all) and the namespace of the context or
// -n, in which KIND/NAME arguments are.
func (e *env) setup(ff *filterFlags) (q *querier, f filter, listNS, ns string, err error) {
	if err = checkOutput(e.output); err != nil {
		return
	}
	if f, err = ff.filter(e.now); err != nil {
		return
	}
	c, err := e.conn.client()
	if err != nil {
		return
	}
	ns, e.timeout = c.ns, c.timeout
	if ff.forArg != "" {
		t, err := resolveTarget(c.cs, ff.forArg, ns)
		if err != nil {
			return nil, f, "", "", err
		}
		f.target = &t
	}
	listNS = ns
	if e.conn.allNamespaces || (f.target != nil && !f.target.namespaced) {
		listNS = metav1.NamespaceAll
	}
	return c.querier(), f, listNS, ns, nil
}

// querier returns a querier of c's clients, with no state yet: one per
// command run, or per MCP tool call.
func (c *clients) querier() *querier {
	return &querier{cs: c.cs, events: c.events, watchEvents: c.watchEvents, lineages: c.lineages,
		search: c.search, searchWatch: c.searchWatch, group: c.group, timeout: c.timeout, clock: clock.RealClock{}}
}

// runE wraps a command's RunE so that a request that ran out of
// --request-timeout says so.
func (e *env) runE(run func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return explainTimeout(run(cmd, args), e.timeout)
	}
}

func (e *env) printer(allNamespaces bool) *printer {
	return &printer{out: e.out, output: e.output, allNamespaces: allNamespaces, clusters: e.conn.fleet(), now: e.now}
}

func (e *env) noEvents(ns string) {
	if ns == "" {
		fmt.Fprintln(e.errOut, "No events found.")
	} else {
		fmt.Fprintf(e.errOut, "No events found in %s namespace.\n", ns)
	}
}

func (e *env) getCommand() *cobra.Command {
	ff := &filterFlags{}
	cmd := &cobra.Command{
		Use:   "get",
		Short: "List events, kubectl style, with series and filters kubectl lacks",
		Args:  cobra.NoArgs,
		RunE: e.runE(func(cmd *cobra.Command, _ []string) error {
			q, f, ns, _, err := e.setup(ff)
			if err != nil {
				return err
			}
			rows, _, err := q.list(cmd.Context(), ns, f)
			if err != nil {
				return err
			}
			sortByLast(rows)
			if len(rows) == 0 && (e.output == "" || e.output == "wide") {
				e.noEvents(ns)
				return nil
			}
			return e.printer(ns == "").table(rows)
		}),
	}
	ff.add(cmd)
	return cmd
}

func (e *env) watchCommand() *cobra.Command {
	ff := &filterFlags{}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print the matching events, then every change as it happens; survives disconnects",
		Args:  cobra.NoArgs,
		RunE: e.runE(func(cmd *cobra.Command, _ []string) error {
			q, f, ns, _, err := e.setup(ff)
			if err != nil {
				return err
			}
			rows, rv, err := q.list(cmd.Context(), ns, f)
			if err != nil {
				return err
			}
			sortByLast(rows)
			p := e.printer(ns == "")
			fw := &follower{q: q, ns: ns, log: klog.Background(),
				selector: func() string { return selectorString(f.selector(q.extensions())) },
				match: func(ev *eventsv1.Event) (*row, bool) {
					r := newRow(ev)
					return r, f.matches(r)
				},
				relist: func(ctx context.Context) ([]*row, string, error) { return q.list(ctx, ns, f) },
				print:  func(rows []*row) error { return p.stream(rows, false) },
			}
			if err := fw.print(fw.fresh(rows)); err != nil {
				return err
			}
			return fw.run(cmd.Context(), rv)
		}),
	}
	ff.add(cmd)
	return cmd
}

// timelineFlags are timeline's own flags.
type timelineFlags struct {
	follow, family, withNodes bool
	uid, since, until         string
}

func (e *env) timelineCommand() *cobra.Command {
	tf := &timelineFlags{}
	cmd := &cobra.Command{
		Use:   "timeline (KIND/NAME | --uid UID)",
		Short: "Everything that happened to an object and to all it owns, as a tree of objects with their events in time order",
		Long: `timeline shows everything that happened to an object and to everything it
owns, transitively, deleted objects included (its family: a Deployment,
its ReplicaSets, their Pods; with --with-nodes the Nodes those Pods ran
on), as a tree of the objects, each marked (deleted) once deleted, with
its events under it in time order. An event where the object is the
related object rather than the regarding one is shown too, with the
object it is about.

The family comes from eventsd's lineage (the family.* field selectors
and the lineages resource). --family=false shows the object alone, as one
list in time order (the timeline of earlier evctl versions), as does a
server that answers no family queries (a kube-apiserver, eventsd with
--extensions=false), with a note on stderr saying so.

The timeline reads every namespace (an object's events may be in any); a
user who may not list events across namespaces gets those of the
namespace of the context or -n, with a warning on stderr.`,
		Example: `  evctl timeline deployment/web -n shop                 # the Deployment, its ReplicaSets and Pods
  evctl timeline deployment/web --with-nodes --since 1h  # and the Nodes its Pods ran on, the last hour
  evctl timeline --uid 6f1c2e0a-0d4e-4b7e-9a57-2d0c3e1f4a10
  evctl timeline pod/web-1 --family=false                # the Pod's own events, one list
  evctl timeline deployment/web -w                       # then every new event as it happens`,
		Args: cobra.MaximumNArgs(1),
		RunE: e.runE(func(cmd *cobra.Command, args []string) error {
			return e.timeline(cmd.Context(), args, tf)
		}),
	}
	fl := cmd.Flags()
	fl.BoolVarP(&tf.follow, "watch", "w", false, "Keep the timeline live: print every new or changed event as it happens, with its object (objects joining the family included).")
	fl.BoolVar(&tf.family, "family", true, "Show the object's family: the object and everything it owns, as a tree. --family=false shows the object alone.")
	fl.BoolVar(&tf.withNodes, "with-nodes", false, "Add the Nodes the family's Pods ran on, with their events.")
	fl.StringVar(&tf.uid, "uid", "", "Name the object by its uid instead of KIND/NAME (a deleted object's, for one).")
	fl.StringVar(&tf.since, "since", "", "Only events that happened after this: a duration back from now (e.g. 30m, 2h) or an RFC3339 time.")
	fl.StringVar(&tf.until, "until", "", "Only events that happened before this: a duration back from now (e.g. 10m) or an RFC3339 time.")
	return cmd
}

// timeline runs evctl timeline.
func (e *env) timeline(ctx context.Context, args []string, tf *timelineFlags) error {
	switch {
	case len(args) == 0 && tf.uid == "":
		return fmt.Errorf("name the object: KIND/NAME (for example deployment/web) or --uid UID")
	case len(args) == 1 && tf.uid != "":
		return fmt.Errorf("name the object once: KIND/NAME or --uid, not both")
	case !tf.family && tf.uid != "":
		return fmt.Errorf("--uid needs the family timeline (--family=false names the object as KIND/NAME)")
	case !tf.family && tf.withNodes:
		return fmt.Errorf("--with-nodes adds to the family timeline: it cannot go with --family=false")
	}
	now := e.now()
	var w window
	var err error
	if w.since, err = parseWhen("since", tf.since, now); err != nil {
		return err
	}
	if w.until, err = parseWhen("until", tf.until, now); err != nil {
		return err
	}
	if w.set() && !w.since.IsZero() && !w.until.IsZero() && w.until.Before(w.since) {
		return fmt.Errorf("--until (%s) is before --since (%s)", w.until.UTC().Format(timeFormat), w.since.UTC().Format(timeFormat))
	}
	q, _, _, ns, err := e.setup(&filterFlags{})
	if err != nil {
		return err
	}
	spec := familySpec{uid: tf.uid, withNodes: tf.withNodes}
	if len(args) == 1 {
		t, err := resolveTarget(q.cs, args[0], ns)
		if err != nil {
			return err
		}
		spec.target = &t
	}
	q.narrowed = func(ns string, err error) {
		fmt.Fprintf(e.errOut, "Warning: %v; showing the events in namespace %q only.\n", err, ns)
	}
	q.noLineage = func(err error) {
		fmt.Fprintf(e.errOut, "Warning: %v; the family's events are shown without who owns what.\n", err)
	}
	if tf.family && e.conn.fleet() {
		// A family is one cluster's: its lineage is.
		if spec.target == nil {
			return fmt.Errorf("--uid names an object of one cluster's family: give --cluster NAME instead of --all-clusters")
		}
		fmt.Fprintf(e.errOut, "Note: families are answered for one cluster (give --cluster NAME); showing %s alone, in every cluster.\n", spec.target)
		tf.family = false
	}
	if tf.family {
		err := e.familyTimeline(ctx, q, spec, ns, w, tf.follow)
		var nf *noFamilyError
		if !errors.As(err, &nf) {
			return err
		}
		if spec.target == nil {
			return fmt.Errorf("%w: --uid needs them; name the object as KIND/NAME", err)
		}
		fmt.Fprintf(e.errOut, "Note: %v; showing %s alone.\n", err, spec.target)
	}
	return e.objectTimeline(ctx, q, *spec.target, ns, w, tf.follow)
}

// familyTimeline prints the timeline of s's family; a *noFamilyError when
// the server answers no family query, before anything is printed.
func (e *env) familyTimeline(ctx context.Context, q *querier, s familySpec, ns string, w window, follow bool) error {
	objs, rows, rv, err := q.family(ctx, s, ns)
	if err != nil {
		return err
	}
	t := buildTree(withRoot(objs, s), rows, s.withNodes)
	if w.set() {
		t.prune(w)
	}
	p := e.printer(false)
	if len(t.rows()) == 0 && !follow && (e.output == "" || e.output == "wide") {
		fmt.Fprintf(e.errOut, "No events found for %s.\n", s)
		return nil
	}
	if err := p.family(t); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	sel := s.selector()
	fw := &follower{q: q, ns: q.narrowedTo, log: klog.Background(),
		selector: func() string { return sel },
		match: func(ev *eventsv1.Event) (*row, bool) {
			r := newRow(ev)
			return r, w.contains(r)
		},
		relist: func(ctx context.Context) ([]*row, string, error) {
			_, rows, rv, err := q.family(ctx, s, ns)
			return keepRows(rows, w.contains), rv, err
		},
		print: p.familyStream,
	}
	fw.fresh(t.rows()) // printed in the tree
	return fw.run(ctx, rv)
}

// objectTimeline prints the timeline of t alone: the events where it is
// the regarding or the related object, in time order.
func (e *env) objectTimeline(ctx context.Context, q *querier, t target, ns string, w window, follow bool) error {
	rows, rv, err := q.timeline(ctx, t, ns)
	if err != nil {
		return err
	}
	rows = keepRows(rows, w.contains)
	sortByFirst(rows)
	p := e.printer(false)
	if len(rows) == 0 && !follow && (e.output == "" || e.output == "wide") {
		fmt.Fprintf(e.errOut, "No events found for %s.\n", t)
		return nil
	}
	if !follow {
		return p.timeline(rows)
	}
	fw := &follower{q: q, ns: q.narrowedTo, log: klog.Background(),
		selector: func() string {
			if q.extensions() {
				return involvesSelector(t)
			}
			return "" // no upstream selector reaches the related object
		},
		match: func(ev *eventsv1.Event) (*row, bool) {
			role := involvement(ev, t)
			r := newRow(ev)
			r.role = role
			return r, role != "" && w.contains(r)
		},
		relist: func(ctx context.Context) ([]*row, string, error) {
			rows, rv, err := q.timeline(ctx, t, ns)
			return keepRows(rows, w.contains), rv, err
		},
		print: func(rows []*row) error { return p.stream(rows, true) },
	}
	if err := fw.print(fw.fresh(rows)); err != nil {
		return err
	}
	return fw.run(ctx, rv)
}

// keepRows returns the rows ok keeps.
func keepRows(rows []*row, ok func(*row) bool) []*row {
	var out []*row
	for _, r := range rows {
		if ok(r) {
			out = append(out, r)
		}
	}
	return out
}
