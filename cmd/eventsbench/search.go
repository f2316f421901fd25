package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/facet"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// searchBenchConfig configures eventsbench search.
type searchBenchConfig struct {
	Eventsd     string        `json:"-"`
	Out         string        `json:"-"`
	Command     string        `json:"-"`
	Events      int64         `json:"events"`
	NsEvents    int64         `json:"namespace_events"`
	Namespaces  int           `json:"namespaces"`
	Repeats     int           `json:"repeats"`
	Page        int64         `json:"reference_page"`
	FillWorkers int           `json:"fill_workers"`
	DataParent  string        `json:"-"`
	ProfileDir  string        `json:"-"`
	Timeout     time.Duration `json:"-"`
	Log         io.Writer     `json:"-"`
}

// searchFilter is the filter measured: the events whose message says OOM.
const searchFilter = `object.message.contains("OOM")`

// searchReasons are the stored events' reasons, each with its weight (of
// 100), its type and a message; OOMKilling's mentions OOM.
var searchReasons = []struct {
	reason, typ, msg string
	weight           int
}{
	{"BackOff", "Warning", "Back-off restarting failed container app", 25},
	{"Pulled", "Normal", `Container image "app:1.4" already present on machine`, 20},
	{"Started", "Normal", "Started container app", 15},
	{"Created", "Normal", "Created container app", 15},
	{"Scheduled", "Normal", "Successfully assigned the pod to node-1", 10},
	{"FailedScheduling", "Warning", "0/3 nodes are available: 3 Insufficient cpu.", 6},
	{"Unhealthy", "Warning", "Readiness probe failed: HTTP probe failed with statuscode: 503", 6},
	{"OOMKilling", "Warning", "Memory cgroup out of memory (OOM): Killed process 4242 (app)", 3},
}

type searchReport struct {
	Command      string             `json:"command"`
	Started      time.Time          `json:"started"`
	Machine      machine            `json:"machine"`
	LoadAvgStart string             `json:"loadavg_start"`
	LoadAvgEnd   string             `json:"loadavg_end"`
	Settings     searchBenchConfig  `json:"settings"`
	FillS        float64            `json:"fill_s"`
	SettleS      float64            `json:"settle_s"`
	Cases        []searchCaseResult `json:"cases"`
	ElapsedS     float64            `json:"elapsed_s"`
	Error        string             `json:"error,omitempty"`
}

// searchCaseResult is one question asked twice: of eventsd's search
// (filter or facets) and by a plain list whose items the client checks,
// with the same answer.
type searchCaseResult struct {
	Name        string    `json:"name"`
	Request     string    `json:"request"`
	Reference   string    `json:"reference"`
	Answer      string    `json:"answer"`
	Served      latencies `json:"served"`
	PlainList   latencies `json:"plain_list"`
	ListedItems int64     `json:"plain_list_items"`
	Profile     string    `json:"profile,omitempty"`
}

// ask asks eventsd the question of the case named name once, for a
// profile.
func (cfg *searchBenchConfig) ask(ctx context.Context, cs kubernetes.Interface, name string) error {
	req := cs.CoreV1().RESTClient().Get()
	if strings.HasPrefix(name, "filter") {
		req = req.Namespace(namespaceName(0)).Resource("events").Param("filter", searchFilter)
	} else {
		since := "1h"
		if strings.Contains(name, "day") {
			since = "24h"
		}
		req = req.AbsPath("/apis/events.kubevents.io/v1/facets").Param("since", since)
	}
	_, err := req.DoRaw(ctx)
	return err
}

func newSearchCommand() *cobra.Command {
	cfg := searchBenchConfig{Events: 1_000_000, NsEvents: 100_000, Namespaces: 20, Repeats: 5, Page: 10_000, FillWorkers: 2, Timeout: 2 * time.Hour}
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Benchmark search (issue 32): a CEL filter over a namespace, facets over an hour and a day, against plain lists with the same answer",
		Long: `search fills eventsd's pebble store in process with --events events last
observed over the last 24 hours (--namespace-events of them in bench-0, the
rest over --namespaces-1 others; reasons weighted as a cluster's, a quarter
as series), starts eventsd over it, and asks, --repeats times each:

- the filter ` + searchFilter + ` over bench-0, against a plain list of
  bench-0 filtered by the client;
- the facets of the last hour and of the day (every namespace), against a
  plain list (pages of --page) counted by the client: of the last hour's
  events (since=1h), and of every event.

Each pair's answers must be equal: the same events, the same counts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			cfg.Log = cmd.ErrOrStderr()
			rep, err := runSearchBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printSearchReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.Int64Var(&cfg.Events, "events", cfg.Events, "Events stored.")
	f.Int64Var(&cfg.NsEvents, "namespace-events", cfg.NsEvents, "Of which in bench-0, the namespace the filter reads.")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Namespaces.")
	f.IntVar(&cfg.Repeats, "repeats", cfg.Repeats, "Times each question is asked of each side.")
	f.Int64Var(&cfg.Page, "page", cfg.Page, "Page size (limit) of the plain lists.")
	f.IntVar(&cfg.FillWorkers, "fill-workers", cfg.FillWorkers, "Goroutines writing the store.")
	f.StringVar(&cfg.ProfileDir, "profile-dir", "", "Run eventsd with --profiling and write CPU profiles here: of 10 s of each question asked of eventsd over and over, after the measured ones.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directory (default: the system temp dir).")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	return cmd
}

func (cfg *searchBenchConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

func runSearchBench(ctx context.Context, cfg searchBenchConfig) (rep *searchReport, err error) {
	if cfg.Eventsd == "" || cfg.Events < cfg.NsEvents || cfg.Namespaces < 2 || cfg.Repeats < 1 || cfg.Page < 1 {
		return nil, errors.New("give --eventsd, --events >= --namespace-events, --namespaces >= 2, --repeats >= 1, --page >= 1")
	}
	bin, err := eventsdBinary(cfg.Eventsd)
	if err != nil {
		return nil, err
	}
	ctx, parent, done, err := startBench(ctx, cfg.Timeout, cfg.DataParent, "search")
	if err != nil {
		return nil, err
	}
	defer done()
	started := time.Now()
	rep = &searchReport{Command: cfg.Command, Started: started, Machine: machineInfo(parent), LoadAvgStart: loadAvg(), Settings: cfg}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	data := filepath.Join(parent, "data")
	t := time.Now()
	if err := cfg.fill(ctx, data); err != nil {
		return rep, err
	}
	rep.FillS = round3(time.Since(t).Seconds())
	cfg.logf("filled %d events in %.0fs; starting eventsd", cfg.Events, rep.FillS)
	args := []string{"--event-ttl", "48h"}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return rep, err
		}
		args = append(args, "--profiling")
	}
	ev, err := startEventsd(ctx, bin, data, args...)
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, ev.stop()) }()
	// pebble compacts what the fill wrote once it is opened: the
	// questions wait for that, as on a store filled over a day.
	t = time.Now()
	if err := settle(ctx, ev.pid(), 2*time.Second, 3*time.Minute); err != nil {
		return rep, err
	}
	rep.SettleS = round3(time.Since(t).Seconds())
	cs, err := newClientset(ev.URL, wireJSON, nil)
	if err != nil {
		return rep, err
	}
	for _, run := range []func(context.Context, kubernetes.Interface) (searchCaseResult, error){
		cfg.filterCase,
		func(ctx context.Context, cs kubernetes.Interface) (searchCaseResult, error) {
			return cfg.facetCase(ctx, cs, "facets of the last hour", "1h", true)
		},
		func(ctx context.Context, cs kubernetes.Interface) (searchCaseResult, error) {
			return cfg.facetCase(ctx, cs, "facets of the last hour", "1h", false)
		},
		func(ctx context.Context, cs kubernetes.Interface) (searchCaseResult, error) {
			return cfg.facetCase(ctx, cs, "facets of the day", "24h", false)
		},
	} {
		c, err := run(ctx, cs)
		if err != nil {
			return rep, err
		}
		if cfg.ProfileDir != "" {
			path := filepath.Join(cfg.ProfileDir, fmt.Sprintf("search-%d.pprof", len(rep.Cases)))
			if err := profileWhile(ctx, ev.URL, path, 10, func() error { return cfg.ask(ctx, cs, c.Name) }); err != nil {
				return rep, err
			}
			c.Profile = path
		}
		cfg.logf("%s: served p50 %.0f ms, plain list p50 %.0f ms (%s)", c.Name, c.Served.P50Ms, c.PlainList.P50Ms, c.Answer)
		rep.Cases = append(rep.Cases, c)
	}
	return rep, nil
}

// fill writes the events into a pebble store at dir, in process.
func (cfg *searchBenchConfig) fill(ctx context.Context, dir string) error {
	st, err := pebblestore.Open(pebblestore.Options{Dir: dir, DefaultTTL: 48 * time.Hour, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan *corev1.Event, 1024)
	var wg sync.WaitGroup
	for range cfg.FillWorkers {
		wg.Go(func() {
			for ev := range ch {
				if _, err := st.Create(ctx, ev, storage.WriteOptions{TTL: 48 * time.Hour}); err != nil {
					cancel(fmt.Errorf("creating %s/%s: %w", ev.Namespace, ev.Name, err))
					for range ch {
					}
					return
				}
			}
		})
	}
	now := time.Now()
	r := rand.New(rand.NewPCG(32, 1))
	last := time.Now()
	for i := int64(0); i < cfg.Events && ctx.Err() == nil; i++ {
		select {
		case ch <- searchEvent(r, i, cfg, now):
		case <-ctx.Done():
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			cfg.logf("  fill: %d/%d events", i, cfg.Events)
		}
	}
	close(ch)
	wg.Wait()
	return errors.Join(context.Cause(ctx), st.Close())
}

// searchEvent is the i-th stored event: in bench-0 for the first
// NsEvents, last observed at a random time of the last 24 hours.
func searchEvent(r *rand.Rand, i int64, cfg *searchBenchConfig, now time.Time) *corev1.Event {
	ns := namespaceName(0)
	if i >= cfg.NsEvents {
		ns = namespaceName(1 + int(i)%(cfg.Namespaces-1))
	}
	w := r.IntN(100)
	rs := searchReasons[0]
	for _, c := range searchReasons {
		if w < c.weight {
			rs = c
			break
		}
		w -= c.weight
	}
	at := now.Add(-time.Duration(r.Int64N(int64(24 * time.Hour))))
	pod := fmt.Sprintf("app-%d", r.IntN(5000))
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", pod, i)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod},
		Reason:         rs.reason, Message: rs.msg, Type: rs.typ,
	}
	if i%4 == 0 {
		ev.EventTime = metav1.NewMicroTime(at.Add(-time.Minute))
		ev.Series = &corev1.EventSeries{Count: int32(2 + r.IntN(100)), LastObservedTime: metav1.NewMicroTime(at)}
		ev.ReportingController, ev.ReportingInstance, ev.Action = "kubelet", "node-1", "Probe"
	} else {
		ev.Count = int32(1 + r.IntN(5))
		ev.FirstTimestamp, ev.LastTimestamp = metav1.NewTime(at), metav1.NewTime(at)
		ev.Source = corev1.EventSource{Component: "kubelet", Host: "node-1"}
	}
	return ev
}

// plainList lists ns ("" for all) in pages of cfg.Page with the extra
// query parameters, calling each for every item; it returns how many
// items it read.
func (cfg *searchBenchConfig) plainList(ctx context.Context, cs kubernetes.Interface, ns string, params map[string]string, each func(*corev1.Event)) (int64, error) {
	var n int64
	cont := ""
	for {
		req := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("events").Param("limit", fmt.Sprint(cfg.Page))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		for k, v := range params {
			req = req.Param(k, v)
		}
		var l corev1.EventList
		if err := req.Do(ctx).Into(&l); err != nil {
			return n, err
		}
		for i := range l.Items {
			each(&l.Items[i])
		}
		n += int64(len(l.Items))
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}

// timed runs fn cfg.Repeats times and summarizes how long each took.
func (cfg *searchBenchConfig) timed(fn func() error) (latencies, error) {
	var samples []time.Duration
	for range cfg.Repeats {
		t := time.Now()
		if err := fn(); err != nil {
			return latencies{}, err
		}
		samples = append(samples, time.Since(t))
	}
	return summarize(samples), nil
}

// filterCase asks for bench-0's events the filter selects.
func (cfg *searchBenchConfig) filterCase(ctx context.Context, cs kubernetes.Interface) (searchCaseResult, error) {
	ns := namespaceName(0)
	c := searchCaseResult{Name: "filter over one namespace",
		Request:   fmt.Sprintf("GET /api/v1/namespaces/%s/events?filter=%s (client-go, JSON, one list)", ns, searchFilter),
		Reference: fmt.Sprintf("GET /api/v1/namespaces/%s/events in pages of %d, strings.Contains(message, \"OOM\") in the client", ns, cfg.Page)}
	var served, listed []string
	var err error
	c.Served, err = cfg.timed(func() error {
		var l corev1.EventList
		if err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("events").Param("filter", searchFilter).Do(ctx).Into(&l); err != nil {
			return err
		}
		served = served[:0]
		for _, ev := range l.Items {
			served = append(served, ev.Name)
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.Name, err)
	}
	c.PlainList, err = cfg.timed(func() error {
		listed = listed[:0]
		n, err := cfg.plainList(ctx, cs, ns, nil, func(ev *corev1.Event) {
			if strings.Contains(ev.Message, "OOM") {
				listed = append(listed, ev.Name)
			}
		})
		c.ListedItems = n
		return err
	})
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.Name, err)
	}
	slices.Sort(served)
	slices.Sort(listed)
	if !slices.Equal(served, listed) || len(served) == 0 {
		return c, fmt.Errorf("%s: the filter selected %d events, the plain list %d", c.Name, len(served), len(listed))
	}
	c.Answer = fmt.Sprintf("%d of %d events", len(served), c.ListedItems)
	return c, nil
}

// facetCase asks for the facets of every namespace's events of the last
// since; the plain list reads the same range (withSince) or every event.
func (cfg *searchBenchConfig) facetCase(ctx context.Context, cs kubernetes.Interface, name, since string, withSince bool) (searchCaseResult, error) {
	d, err := time.ParseDuration(since)
	if err != nil {
		return searchCaseResult{}, err
	}
	// One absolute range for both sides, so that their answers are equal.
	from := time.Now().Add(-d).UTC().Truncate(time.Second)
	at := from.Format(time.RFC3339)
	c := searchCaseResult{Name: name, Request: "GET /apis/events.kubevents.io/v1/facets?since=<now-" + since + ">"}
	ref := "every event, the range checked in the client"
	params := map[string]string{}
	if withSince {
		ref, params["since"] = "since=<now-"+since+">", at
		c.Name += ", the plain list of the range"
	} else {
		c.Name += ", the plain list of every event"
	}
	c.Reference = fmt.Sprintf("GET /api/v1/events (%s) in pages of %d, counted in the client", ref, cfg.Page)
	var served eventapi.FacetList
	c.Served, err = cfg.timed(func() error {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/events.kubevents.io/v1/facets").Param("since", at).DoRaw(ctx)
		if err != nil {
			return err
		}
		served = eventapi.FacetList{}
		return json.Unmarshal(raw, &served)
	})
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.Name, err)
	}
	var counted *eventapi.FacetList
	c.PlainList, err = cfg.timed(func() error {
		cnt := facet.NewCounter(facet.Options{Since: from, Now: time.Now()})
		var addErr error
		n, err := cfg.plainList(ctx, cs, "", params, func(ev *corev1.Event) {
			if !eventapi.LastObserved(ev).Before(from) && addErr == nil {
				addErr = cnt.Add(ev)
			}
		})
		c.ListedItems = n
		if err = errors.Join(err, addErr); err != nil {
			return err
		}
		counted, _, err = cnt.Result()
		return err
	})
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.Name, err)
	}
	if served.Events == 0 || served.Events != counted.Events || served.Occurrences != counted.Occurrences || !maps.Equal(reasonCounts(&served), reasonCounts(counted)) {
		return c, fmt.Errorf("%s: served %d occurrences of %d events %v, the plain list %d of %d %v (since %s)",
			c.Name, served.Occurrences, served.Events, reasonCounts(&served), counted.Occurrences, counted.Events, reasonCounts(counted), at)
	}
	c.Answer = fmt.Sprintf("%d occurrences of %d events (of %d listed)", served.Occurrences, served.Events, c.ListedItems)
	return c, nil
}

func reasonCounts(l *eventapi.FacetList) map[string]int64 {
	out := map[string]int64{}
	for _, f := range l.Items {
		if f.Field == eventapi.FacetReason && !f.Other {
			out[f.Value] = f.Occurrences
		}
	}
	return out
}

func printSearchReport(w io.Writer, rep *searchReport) {
	fmt.Fprintf(w, "search: %d events (%d in bench-0), filled in %.0f s; eventsd settled in %.0f s\n\n", rep.Settings.Events, rep.Settings.NsEvents, rep.FillS, rep.SettleS)
	fmt.Fprintln(w, "| question | served by eventsd | p50 | max | plain list + client | p50 | max | answer |")
	fmt.Fprintln(w, "|---|---|---:|---:|---|---:|---:|---|")
	for _, c := range rep.Cases {
		fmt.Fprintf(w, "| %s | `%s` | %.0f ms | %.0f ms | %s | %.0f ms | %.0f ms | %s |\n", c.Name, c.Request, c.Served.P50Ms, c.Served.MaxMs, c.Reference, c.PlainList.P50Ms, c.PlainList.MaxMs, c.Answer)
	}
}
