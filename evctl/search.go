package evctl

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// The query parameters of eventsd's searches beyond ListOptions: the
// CEL filter (server/filter.go) and the time range (server/timerange.go).
const (
	filterParam = "filter"
	sinceParam  = "since"
	untilParam  = "until"
)

// searchPageSize is how many events evctl search asks for per request.
const searchPageSize = 500

// searchIn lists one page of the events in ns ("" for all) with opts and
// the parameters of eventsd's extensions that ListOptions lacks.
type searchIn func(ctx context.Context, ns string, opts metav1.ListOptions, extra url.Values) (*eventsv1.EventList, error)

// restSearch is searchIn over rc, a REST client of an events group, whose
// list options pc encodes.
func restSearch(rc rest.Interface, pc runtime.ParameterCodec) searchIn {
	return func(ctx context.Context, ns string, opts metav1.ListOptions, extra url.Values) (*eventsv1.EventList, error) {
		req := rc.Get().Namespace(ns).Resource("events").VersionedParams(&opts, pc)
		req = withParams(req, extra)
		out := &eventsv1.EventList{}
		if err := req.Do(ctx).Into(out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// searchWatchIn opens a watch of the events in ns ("" for all) with opts
// and the parameters of eventsd's extensions that ListOptions lacks.
type searchWatchIn func(ctx context.Context, ns string, opts metav1.ListOptions, extra url.Values) (watch.Interface, error)

// restSearchWatch is searchWatchIn over rc, as restSearch.
func restSearchWatch(rc rest.Interface, pc runtime.ParameterCodec) searchWatchIn {
	return func(ctx context.Context, ns string, opts metav1.ListOptions, extra url.Values) (watch.Interface, error) {
		opts.Watch = true
		return withParams(rc.Get().Namespace(ns).Resource("events").VersionedParams(&opts, pc), extra).Watch(ctx)
	}
}

// withParams adds params to req, in the order of their names.
func withParams(req *rest.Request, params url.Values) *rest.Request {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		for _, v := range params[k] {
			req = req.Param(k, v)
		}
	}
	return req
}

// searchable says why the events read from group on the server disc
// describes cannot be searched, or nil: only eventsd answers filter,
// since and until, and any other server ignores query parameters it does
// not know, which would answer every event as if it matched. eventsd
// serves its own group; a kube-apiserver serves it only when eventsd is
// registered as an APIService, and then its own events.k8s.io is not
// eventsd's.
func searchable(disc discovery.DiscoveryInterface, group string) error {
	groups, err := disc.ServerGroups()
	if err != nil {
		return fmt.Errorf("reading the server's discovery to see whether it is eventsd: %w", err)
	}
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	switch {
	case !slices.Contains(names, groupKubevents):
		return fmt.Errorf("the server does not serve %s: searches (filter, since, until) need eventsd, and this server would ignore them; use evctl get", groupKubevents)
	case group == groupUpstream && slices.Contains(names, aggregatorGroup):
		return fmt.Errorf("the server is a kube-apiserver whose %s is its own, not eventsd's, and would ignore the search: use --api-group=%s (or auto)", groupUpstream, groupKubevents)
	}
	return nil
}

// searchSpec is one search: eventsd's CEL filter and time range, and the
// selectors every server takes.
type searchSpec struct {
	// filter is a CEL expression over object, the event in
	// events.k8s.io/v1's shape; "" for none.
	filter string
	// since and until bound the events' last observation: RFC 3339
	// times or durations back from now, as the server reads them; ""
	// for unbounded.
	since, until string
	// fieldSelector and labelSelector are a list's selectors.
	fieldSelector, labelSelector string
}

// params returns the parameters of s that ListOptions lacks.
func (s searchSpec) params() url.Values {
	v := url.Values{}
	for _, p := range []struct{ k, v string }{{filterParam, s.filter}, {sinceParam, s.since}, {untilParam, s.until}} {
		if p.v != "" {
			v.Set(p.k, p.v)
		}
	}
	return v
}

// searchPage returns one page of at most limit (0: the server's choice)
// of the events in ns ("" for all) that s selects, from the continue
// token cont on. A search the server refuses (400: a filter that does not
// compile or costs too much, a malformed time) is an error saying so
// with the server's message.
func (q *querier) searchPage(ctx context.Context, ns string, s searchSpec, limit int64, cont string) (*eventsv1.EventList, error) {
	opts := metav1.ListOptions{FieldSelector: s.fieldSelector, LabelSelector: s.labelSelector, Limit: limit, Continue: cont}
	l, err := q.search(ctx, ns, opts, s.params())
	if apierrors.IsBadRequest(err) {
		return nil, fmt.Errorf("the server refused the search: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// searchFlags are search's own flags.
type searchFlags struct {
	since, until, fieldSelector, labelSelector string
	limit                                      int64
	follow                                     bool
}

func (e *env) searchCommand() *cobra.Command {
	sf := &searchFlags{}
	cmd := &cobra.Command{
		Use:   "search [EXPR]",
		Short: "Find events with a CEL expression over a time range (eventsd's filter, since and until)",
		Long: `search lists the events that EXPR selects, a CEL expression over object, the
event in events.k8s.io/v1's shape (object.note, object.reason, object.type,
object.regarding.kind, object.regarding.name, object.series.count (a
series' repeats), object.deprecatedCount (a core/v1 recorder's),
object.eventTime, object.reportingController, ...), with the string,
regex and timestamp functions of Kubernetes' CEL libraries. eventsd
evaluates it (its filter parameter); the indexes serve the namespace,
--field-selector and the time range first. Without EXPR, every event of
the time range.

--since and --until bound when the events were last observed: an RFC 3339
time or a duration back from now (30m, 2h). The events are printed as
evctl get prints them, by last occurrence. search needs eventsd (directly,
or registered as an APIService of a cluster): other servers ignore
filters, so evctl refuses to ask them.`,
		Example: `  evctl search 'object.note.contains("OOM")' -A --since 1h
  evctl search 'object.type == "Warning" && object.regarding.kind == "Pod"' -n shop
  evctl search 'object.note.matches("Back-off") && object.deprecatedCount > 5' -o wide
  evctl search 'object.type == "Warning" && object.regarding.kind == "Node"' -A -w
  evctl search --since 2026-11-29T09:00:00Z --until 2026-11-29T10:00:00Z --field-selector reason=FailedScheduling`,
		Args: cobra.MaximumNArgs(1),
		RunE: e.runE(func(cmd *cobra.Command, args []string) error {
			return e.search(cmd.Context(), args, sf)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&sf.since, "since", "", "Only events last observed at or after this: a duration back from now (e.g. 30m, 2h) or an RFC3339 time.")
	fl.StringVar(&sf.until, "until", "", "Only events last observed before this: a duration back from now (e.g. 10m) or an RFC3339 time.")
	fl.StringVar(&sf.fieldSelector, "field-selector", "", "A field selector, as kubectl's (e.g. type=Warning,reason=BackOff); eventsd's extension fields too.")
	fl.StringVarP(&sf.labelSelector, "selector", "l", "", "A label selector, as kubectl's.")
	fl.BoolVarP(&sf.follow, "watch", "w", false, "After the list, print every new or changed event EXPR selects as it happens (resumes after disconnects); --since bounds the list only, and --until and --limit cannot go with it.")
	fl.Int64Var(&sf.limit, "limit", 0, "Read at most this many matching events (0: all); the server returns them by namespace and name, not by time, and evctl says when more matched.")
	return cmd
}

// search runs evctl search.
func (e *env) search(ctx context.Context, args []string, sf *searchFlags) error {
	s := searchSpec{since: sf.since, until: sf.until, fieldSelector: sf.fieldSelector, labelSelector: sf.labelSelector}
	if len(args) == 1 {
		if strings.TrimSpace(args[0]) == "" {
			return fmt.Errorf("EXPR is empty: give a CEL expression such as 'object.reason == \"BackOff\"', or no EXPR for every event")
		}
		s.filter = args[0]
	}
	switch {
	case sf.limit < 0:
		return fmt.Errorf("--limit must not be negative")
	case sf.follow && sf.until != "":
		return fmt.Errorf("--until bounds a list, and a watch goes on from now: it cannot go with -w")
	case sf.follow && sf.limit > 0:
		return fmt.Errorf("--limit bounds a list, and a watch prints every match: it cannot go with -w")
	}
	q, _, ns, _, err := e.setup(&filterFlags{})
	if err != nil {
		return err
	}
	if err := searchable(q.cs.Discovery(), q.group); err != nil {
		return err
	}
	rows, rv, more, err := q.searchAll(ctx, ns, s, sf.limit)
	if err != nil {
		return err
	}
	if more {
		fmt.Fprintf(e.errOut, "Note: showing the first %d matching events the server returned (by namespace and name); more match: raise --limit or narrow the search.\n", len(rows))
	}
	if sf.follow {
		return e.followSearch(ctx, q, ns, s, rows, rv)
	}
	sortByLast(rows)
	if len(rows) == 0 && (e.output == "" || e.output == "wide") {
		e.noEvents(ns)
		return nil
	}
	return e.printer(ns == "").table(rows)
}

// searchAll returns the events in ns ("" for all) that s selects, page
// by page, at most limit of them (0: all), with the resourceVersion of
// the list, and whether more matched beyond limit.
func (q *querier) searchAll(ctx context.Context, ns string, s searchSpec, limit int64) (rows []*row, rv string, more bool, err error) {
	cont := ""
	for {
		size := int64(searchPageSize)
		if left := limit - int64(len(rows)); limit > 0 && left < size {
			size = left
		}
		l, err := q.searchPage(ctx, ns, s, size, cont)
		if err != nil {
			return nil, "", false, err
		}
		if rv == "" {
			rv = l.ResourceVersion
		}
		for i := range l.Items {
			rows = append(rows, newRow(&l.Items[i]))
		}
		cont = l.Continue
		if cont == "" {
			return rows, rv, false, nil
		}
		if limit > 0 && int64(len(rows)) >= limit {
			// A filtered page may end with a continue token and nothing
			// after it: one more event says whether more match.
			next, err := q.searchPage(ctx, ns, s, 1, cont)
			if err != nil {
				return nil, "", false, err
			}
			return rows, rv, len(next.Items) > 0, nil
		}
	}
}

// followSearch prints rows, the search's list, then every change the
// watch of s's filter and selectors delivers from rv on, until ctx ends.
// The watch has no time range (the server refuses one: a watch reports
// changes as they happen); after a 410 the search is listed again.
func (e *env) followSearch(ctx context.Context, q *querier, ns string, s searchSpec, rows []*row, rv string) error {
	sortByLast(rows)
	p := e.printer(ns == "")
	q.watchParams = searchSpec{filter: s.filter}.params()
	fw := &follower{q: q, ns: ns, log: klog.Background(), labelSelector: s.labelSelector,
		selector: func() string { return s.fieldSelector },
		match:    func(ev *eventsv1.Event) (*row, bool) { return newRow(ev), true },
		relist: func(ctx context.Context) ([]*row, string, error) {
			rows, rv, _, err := q.searchAll(ctx, ns, s, 0)
			return rows, rv, err
		},
		print: func(rows []*row) error { return p.stream(rows, false) },
	}
	if err := fw.print(fw.fresh(rows)); err != nil {
		return err
	}
	return fw.run(ctx, rv)
}
