package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// foldBenchConfig configures the fold benchmark.
type foldBenchConfig struct {
	Eventsd    string
	Out        string
	Command    string
	Repeats    int // of the crashloop
	Objects    int // of the Kyverno-like storm
	PerObject  int // repeats per object of the storm
	Clients    int // of the storm
	DataParent string
	Timeout    time.Duration
	Log        io.Writer
}

// foldReport is what the fold benchmark measured.
type foldReport struct {
	Command      string         `json:"command"`
	Started      time.Time      `json:"started"`
	ElapsedS     float64        `json:"elapsed_s"`
	Machine      machine        `json:"machine"`
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	Results      []foldResult   `json:"results"`
	Error        string         `json:"error,omitempty"`
}

// foldResult is one workload against one eventsd, folding or not.
type foldResult struct {
	Workload string  `json:"workload"`
	Folding  bool    `json:"folding"`
	Creates  int     `json:"creates"`
	Seconds  float64 `json:"seconds"`
	// Stored is the events stored at the end, and Occurrences the sum of
	// their counts (every create must be one).
	Stored      int   `json:"stored"`
	Occurrences int64 `json:"occurrences"`
	// ObjectBytes is the sum of the stored events' protobuf sizes;
	// StoreBytes the store's own measure (eventsd_storage_bytes: on
	// pebble its files, change log included).
	ObjectBytes int64 `json:"object_bytes"`
	StoreBytes  int64 `json:"store_bytes"`
	// CPUMsPerCreate is eventsd's CPU time over the workload per create.
	CPUMsPerCreate float64 `json:"eventsd_cpu_ms_per_create"`
}

func newFoldCommand() *cobra.Command {
	cfg := foldBenchConfig{Repeats: 600, Objects: 1000, PerObject: 20, Clients: 16, Timeout: 30 * time.Minute, Log: os.Stderr}
	cmd := &cobra.Command{
		Use:   "fold",
		Short: "Benchmark server-side folding (--fold-config): objects, bytes and create CPU with folding against without",
		Long: `fold runs two workloads of naive clients (a typed Create of a new Event per
occurrence, protobuf) against eventsd on pebble on 127.0.0.1, each once
without and once with --fold-config (one rule folding everything within
an hour), each on a fresh data directory:

- crashloop: one client, one pod, --repeats BackOff events (core/v1);
- storm: a Kyverno-like storm, --objects objects with --per-object
  PolicyViolation events each (events.k8s.io/v1), the objects' rounds
  interleaved, from --clients clients.

For each: the events stored and the sum of their counts, the bytes of
the stored events (their protobuf sizes, from a list) and the store's
eventsd_storage_bytes, eventsd's CPU per create, wall time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runFoldBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printFoldReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.IntVar(&cfg.Repeats, "repeats", cfg.Repeats, "Occurrences of the crashloop.")
	f.IntVar(&cfg.Objects, "objects", cfg.Objects, "Objects of the storm.")
	f.IntVar(&cfg.PerObject, "per-object", cfg.PerObject, "Occurrences per object of the storm.")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "Clients of the storm.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir).")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

func runFoldBench(ctx context.Context, cfg foldBenchConfig) (rep *foldReport, err error) {
	bin, err := eventsdBinary(cfg.Eventsd)
	if err != nil {
		return nil, err
	}
	ctx, parent, done, err := startBench(ctx, cfg.Timeout, cfg.DataParent, "fold")
	if err != nil {
		return nil, err
	}
	defer done()
	started := time.Now()
	rep = &foldReport{Command: cfg.Command, Started: started, Machine: machineInfo(parent), LoadAvgStart: loadAvg(),
		Settings: map[string]any{"repeats": cfg.Repeats, "objects": cfg.Objects, "per_object": cfg.PerObject, "clients": cfg.Clients,
			"wire": wireProtobuf, "eventsd_args": "--event-ttl=24h", "fold_window": "1h"}}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	foldFile := filepath.Join(parent, "fold.yaml")
	if err := os.WriteFile(foldFile, []byte("apiVersion: eventsd.kubevents.io/v1alpha1\nkind: FoldConfiguration\nrules:\n- name: all\n  window: 1h\n"), 0o600); err != nil {
		return rep, err
	}
	n := 0
	for _, w := range []string{"crashloop", "storm"} {
		for _, folding := range []bool{false, true} {
			n++
			var extra []string
			if folding {
				extra = []string{"--fold-config", foldFile}
			}
			ev, err := startEventsd(ctx, bin, filepath.Join(parent, strconv.Itoa(n)), extra...)
			if err != nil {
				return rep, err
			}
			cfg.logf("%s, folding %v: eventsd at %s", w, folding, ev.URL)
			res, err := runFoldWorkload(ctx, cfg, ev, w, folding)
			if serr := ev.stop(); err == nil {
				err = serr
			}
			if err != nil {
				return rep, err
			}
			rep.Results = append(rep.Results, *res)
		}
	}
	return rep, nil
}

func (cfg *foldBenchConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

// runFoldWorkload runs workload w against ev and measures it.
func runFoldWorkload(ctx context.Context, cfg foldBenchConfig, ev *child, w string, folding bool) (*foldResult, error) {
	clients := 1
	if w == "storm" {
		clients = cfg.Clients
	}
	css := make([]kubernetes.Interface, clients)
	for i := range css {
		// Every folded create is answered with a Warning, which client-go
		// would log.
		rc := restConfigAuth(ev.URL, wireProtobuf, "", nil)
		rc.WarningHandler = rest.NoWarnings{}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		css[i] = cs
	}
	cpu0, err := procCPU(ev.pid())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &foldResult{Workload: w, Folding: folding}
	base := time.Now()
	if w == "crashloop" {
		ref := corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "uid-web", APIVersion: "v1"}
		for i := range cfg.Repeats {
			at := base.Add(time.Duration(i) * 100 * time.Millisecond)
			_, err := css[0].CoreV1().Events("default").Create(ctx, &corev1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web.%x", at.UnixNano())}, InvolvedObject: ref,
				Reason: "BackOff", Type: corev1.EventTypeWarning, Message: "Back-off restarting failed container app in pod web_default(uid-web)",
				Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, Count: 1,
				FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
			}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("crashloop create %d: %w", i, err)
			}
		}
		res.Creates = cfg.Repeats
	} else {
		var wg sync.WaitGroup
		errc := make(chan error, clients)
		for c, cs := range css {
			wg.Go(func() {
				// Round r of every object, then round r+1: a policy
				// re-applied to every object again and again.
				for r := range cfg.PerObject {
					for o := c; o < cfg.Objects; o += clients {
						at := base.Add(time.Duration(r)*time.Second + time.Duration(o)*time.Microsecond)
						name := fmt.Sprintf("deploy-%d", o)
						_, err := cs.EventsV1().Events("apps").Create(ctx, &eventsv1.Event{
							ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, at.UnixNano())}, EventTime: metav1.NewMicroTime(at),
							Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: "apps", Name: name, UID: types.UID("uid-" + name), APIVersion: "apps/v1"},
							Related:   &corev1.ObjectReference{Kind: "ClusterPolicy", Name: "require-labels", UID: "uid-policy", APIVersion: "kyverno.io/v1"},
							Reason:    "PolicyViolation", Action: "Resource Passed", Type: corev1.EventTypeWarning,
							Note:                "policy require-labels/check-for-labels fail: validation error: label 'app.kubernetes.io/name' is required. rule check-for-labels failed at path /metadata/labels/app.kubernetes.io/name/",
							ReportingController: "kyverno-admission", ReportingInstance: "kyverno-admission-kyverno-7c8f9d6b5-x2k4p",
						}, metav1.CreateOptions{})
						if err != nil {
							errc <- fmt.Errorf("storm create: %w", err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			return nil, err
		}
		res.Creates = cfg.Objects * cfg.PerObject
	}
	res.Seconds = round3(time.Since(start).Seconds())
	cpu1, err := procCPU(ev.pid())
	if err != nil {
		return nil, err
	}
	res.CPUMsPerCreate = round3(float64(cpu1-cpu0) / float64(time.Millisecond) / float64(res.Creates))
	ns := "default"
	if w == "storm" {
		ns = "apps"
	}
	l, err := css[0].CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	res.Stored = len(l.Items)
	for i := range l.Items {
		e := &l.Items[i]
		res.ObjectBytes += int64(e.Size())
		n := e.Count
		if e.Series != nil {
			n = e.Series.Count
		}
		res.Occurrences += int64(max(n, 1))
	}
	m, err := ev.scrapeMetrics(ctx)
	if err != nil {
		return nil, err
	}
	res.StoreBytes = int64(m["eventsd_storage_bytes"])
	if res.Occurrences != int64(res.Creates) {
		return res, fmt.Errorf("%s, folding %v: %d occurrences stored of %d creates", w, folding, res.Occurrences, res.Creates)
	}
	return res, nil
}

func printFoldReport(w io.Writer, rep *foldReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tfolding\tcreates\tstored\toccurrences\tobject bytes\tstore bytes\tCPU ms/create\tseconds\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%d\t%.3f\t%.2f\t\n", r.Workload, r.Folding, r.Creates, r.Stored, r.Occurrences, r.ObjectBytes, r.StoreBytes, r.CPUMsPerCreate, r.Seconds)
	}
	tw.Flush()
	if rep.Error != "" {
		fmt.Fprintln(w, "error:", rep.Error)
	}
}
