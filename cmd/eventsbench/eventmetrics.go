package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metricsCreateGoal bounds eventsd's CPU per create with the occurrence
// metrics over without (issue 33: within 3%).
const metricsCreateGoal = 1.03

// metricsBenchConfig configures the event metrics benchmark.
type metricsBenchConfig struct {
	Eventsd        string
	Out            string
	Command        string
	Pairs          int
	Clients        int
	Objects        int
	CreateDuration time.Duration
	CreateWarmup   time.Duration
	// LabelSets is the number of distinct label sets written before the
	// scrapes: the default maximum, plus Overflow beyond it.
	LabelSets, Overflow int
	Scrapes             int
	// Series makes every create's event carry a series (last observed
	// at the create), so that each one is tracked by
	// eventsd_event_series_live: its worst case.
	Series     bool
	DataParent string
	Timeout    time.Duration
	Log        io.Writer
}

// metricsReport is what the event metrics benchmark measured.
type metricsReport struct {
	Command      string         `json:"command"`
	Started      time.Time      `json:"started"`
	ElapsedS     float64        `json:"elapsed_s"`
	Machine      machine        `json:"machine"`
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	Create       *metricsCreate `json:"create,omitempty"`
	Scrape       *metricsScrape `json:"scrape,omitempty"`
	Goals        []goalCheck    `json:"goals,omitempty"`
	Error        string         `json:"error,omitempty"`
}

// metricsCreate is the create phase's result: runs alternating metrics on
// and off, and the means of eventsd's CPU per create.
type metricsCreate struct {
	Runs           []metricsCreateRun `json:"runs"`
	OnMsPerCreate  float64            `json:"on_cpu_ms_per_create"`
	OffMsPerCreate float64            `json:"off_cpu_ms_per_create"`
	Ratio          float64            `json:"ratio"`
}

// metricsCreateRun is one create run.
type metricsCreateRun struct {
	Metrics bool          `json:"metrics"`
	Result  *createResult `json:"result"`
}

// metricsScrape is the scrape phase's result.
type metricsScrape struct {
	// LabelSets is eventsd_event_metrics_label_sets at the scrapes, and
	// Refused its refusals (the writes past the maximum).
	LabelSets float64 `json:"label_sets"`
	Refused   float64 `json:"refused"`
	// Series is the number of eventsd_event_occurrences_total lines,
	// OccurrenceBytes their bytes, Bytes the whole exposition's.
	Series          int   `json:"series"`
	OccurrenceBytes int   `json:"occurrence_bytes"`
	Bytes           int   `json:"bytes"`
	GzipBytes       int64 `json:"gzip_bytes"`
	Scrapes         int   `json:"scrapes"`
	latencies
	// CPUMsPerScrape is eventsd's CPU time over the scrapes per scrape.
	CPUMsPerScrape float64 `json:"eventsd_cpu_ms_per_scrape"`
}

func newMetricsCommand() *cobra.Command {
	cfg := metricsBenchConfig{Pairs: 3, Clients: 8, Objects: 10_000, CreateDuration: 10 * time.Second, CreateWarmup: 2 * time.Second,
		LabelSets: 1000, Overflow: 100, Scrapes: 50, Timeout: 30 * time.Minute, Log: os.Stderr}
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Benchmark the event occurrence metrics (issue 33): create CPU with --event-metrics on against off, a scrape's time and size at the maximum label sets",
		Long: `metrics starts two eventsd on pebble on 127.0.0.1, one with --event-metrics=true
(the default) and one with --event-metrics=false, and:

- create: runs the create load (--clients clients, the kubelet's lifecycle
  events of --objects pods in 10 namespaces, protobuf) against each in
  turn, --pairs alternations (on off, off on, ...) so that drift of the
  machine falls on both, and compares eventsd's CPU per create;
- scrape: writes events of --label-sets distinct reasons plus --overflow
  more into the first (so eventsd_event_occurrences_total holds its
  default maximum of label sets, and the overflow series counts the
  rest), then GETs /metrics --scrapes times one after the other: the
  exposition's size (whole, gzipped, the occurrence series' part) and
  each scrape's time, and eventsd's CPU per scrape.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runMetricsBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printMetricsReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.IntVar(&cfg.Pairs, "pairs", cfg.Pairs, "Alternations of metrics on and off in the create phase.")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "Clients of the create phase.")
	f.IntVar(&cfg.Objects, "objects", cfg.Objects, "Pods the create phase's events are about.")
	f.DurationVar(&cfg.CreateDuration, "create-duration", cfg.CreateDuration, "Measured length of each create run.")
	f.DurationVar(&cfg.CreateWarmup, "create-warmup", cfg.CreateWarmup, "Unmeasured start of each create run.")
	f.IntVar(&cfg.LabelSets, "label-sets", cfg.LabelSets, "Distinct label sets written before the scrapes (eventsd's default maximum is 1000).")
	f.IntVar(&cfg.Overflow, "overflow", cfg.Overflow, "Distinct label sets written beyond --label-sets.")
	f.IntVar(&cfg.Scrapes, "scrapes", cfg.Scrapes, "Scrapes measured.")
	f.BoolVar(&cfg.Series, "series", false, "The create phase's events carry a series (count 2, last observed at the create, with eventTime and the reporting fields), so every create is a live series eventsd_event_series_live tracks: the gauge's worst case.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir).")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

func (c metricsBenchConfig) validate() error {
	if c.Pairs < 1 || c.Clients < 1 || c.Objects < 1 || c.CreateDuration <= 0 || c.CreateWarmup < 0 || c.LabelSets < 0 || c.Overflow < 0 || c.Scrapes < 1 {
		return errors.New("--pairs, --clients, --objects, --create-duration and --scrapes must be positive; --create-warmup, --label-sets and --overflow not negative")
	}
	return nil
}

func (c *metricsBenchConfig) logf(format string, args ...any) {
	logLine(c.Log, format, args...)
}

func runMetricsBench(ctx context.Context, cfg metricsBenchConfig) (rep *metricsReport, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	bin, err := eventsdBinary(cfg.Eventsd)
	if err != nil {
		return nil, err
	}
	ctx, parent, done, err := startBench(ctx, cfg.Timeout, cfg.DataParent, "metrics")
	if err != nil {
		return nil, err
	}
	defer done()
	started := time.Now()
	rep = &metricsReport{Command: cfg.Command, Started: started, Machine: machineInfo(parent), LoadAvgStart: loadAvg(),
		Settings: map[string]any{"pairs": cfg.Pairs, "clients": cfg.Clients, "objects": cfg.Objects, "create_duration": cfg.CreateDuration.String(),
			"create_warmup": cfg.CreateWarmup.String(), "label_sets": cfg.LabelSets, "overflow": cfg.Overflow, "scrapes": cfg.Scrapes,
			"wire": wireProtobuf, "eventsd_args": "--event-ttl=24h", "series": cfg.Series}}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	on, err := startEventsd(ctx, bin, filepath.Join(parent, "on"), "--event-metrics=true")
	if err != nil {
		return rep, err
	}
	defer on.stop()
	off, err := startEventsd(ctx, bin, filepath.Join(parent, "off"), "--event-metrics=false")
	if err != nil {
		return rep, err
	}
	defer off.stop()
	if rep.Create, err = cfg.createPhase(ctx, on, off); err != nil {
		return rep, err
	}
	rep.Goals = append(rep.Goals, goalCheck{Goal: "create CPU with the event metrics", Target: fmt.Sprintf("≤ %.2f× without", metricsCreateGoal),
		Measured: fmt.Sprintf("%.3f×", rep.Create.Ratio), Pass: rep.Create.Ratio <= metricsCreateGoal})
	rep.Scrape, err = cfg.scrapePhase(ctx, on)
	return rep, err
}

// createPhase runs the create load against eventsd with the metrics and
// without, alternating (on off off on ...).
func (cfg *metricsBenchConfig) createPhase(ctx context.Context, on, off *child) (*metricsCreate, error) {
	mc := &metricsCreate{}
	mk := func(ev *child) createConfig {
		return createConfig{Server: ev.URL, Clients: cfg.Clients, Duration: cfg.CreateDuration, Warmup: cfg.CreateWarmup,
			Namespaces: 10, Objects: cfg.Objects, PID: ev.pid(), PodPrefix: "pod", Wire: wireProtobuf, NewEvent: newEventFor(cfg.Series)}
	}
	var err error
	mc.OnMsPerCreate, mc.OffMsPerCreate, mc.Ratio, err = alternateCreates(ctx, cfg.Pairs, on, off, mk, nil, func(metrics bool, res *createResult) {
		mc.Runs = append(mc.Runs, metricsCreateRun{Metrics: metrics, Result: res})
		cfg.logf("create, metrics %v: %.0f creates/s, %.4f ms CPU/create", metrics, res.CreatesPerSec, *res.ServerCPUMsPerReq)
	})
	return mc, err
}

// scrapePhase fills ev's occurrence counter with distinct label sets up
// to (and past) its maximum and measures scrapes of /metrics.
func (cfg *metricsBenchConfig) scrapePhase(ctx context.Context, ev *child) (*metricsScrape, error) {
	cs, err := newClientset(ev.URL, wireProtobuf, nil)
	if err != nil {
		return nil, err
	}
	for i := range cfg.LabelSets + cfg.Overflow {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "scrape", Name: fmt.Sprintf("e.%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "scrape", Name: fmt.Sprintf("pod-%d", i)},
			Type:           corev1.EventTypeWarning, Reason: fmt.Sprintf("Reason%05d", i), Message: "m", Count: 1,
			Source: corev1.EventSource{Component: "bench"}}
		if _, err := cs.CoreV1().Events("scrape").Create(ctx, e, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("filling label sets: %w", err)
		}
	}
	values, err := ev.scrapeMetrics(ctx)
	if err != nil {
		return nil, err
	}
	sc := &metricsScrape{LabelSets: values["eventsd_event_metrics_label_sets"], Refused: values["eventsd_event_metrics_label_sets_refused_total"], Scrapes: cfg.Scrapes}
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	get := func(gzip bool) ([]byte, int64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ev.URL+"/metrics", nil)
		if err != nil {
			return nil, 0, err
		}
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET /metrics: %s", resp.Status)
		}
		return b, int64(len(b)), err
	}
	body, _, err := get(false)
	if err != nil {
		return nil, err
	}
	sc.Bytes = len(body)
	for line := range bytes.Lines(body) {
		if bytes.HasPrefix(line, []byte("eventsd_event_occurrences_total{")) {
			sc.Series++
			sc.OccurrenceBytes += len(line)
		}
	}
	if _, sc.GzipBytes, err = get(true); err != nil {
		return nil, err
	}
	cpu0, err := procCPU(ev.pid())
	if err != nil {
		return nil, err
	}
	samples := make([]time.Duration, 0, cfg.Scrapes)
	for range cfg.Scrapes {
		t0 := time.Now()
		if _, _, err := get(true); err != nil {
			return nil, err
		}
		samples = append(samples, time.Since(t0))
	}
	cpu1, err := procCPU(ev.pid())
	if err != nil {
		return nil, err
	}
	sc.CPUMsPerScrape = round3(float64(cpu1-cpu0) / float64(time.Millisecond) / float64(cfg.Scrapes))
	sc.latencies = summarize(samples)
	cfg.logf("scrape: %d occurrence series, %d bytes (%d gzipped), p50 %.2f ms, %.2f ms CPU/scrape", sc.Series, sc.Bytes, sc.GzipBytes, sc.P50Ms, sc.CPUMsPerScrape)
	return sc, nil
}

func printMetricsReport(w io.Writer, rep *metricsReport) {
	if c := rep.Create; c != nil && len(c.Runs) > 0 {
		fmt.Fprintln(w, "### Create cost: eventsd --event-metrics=true against --event-metrics=false")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| metrics | clients | creates/s | p50 ms | p99 ms | eventsd CPU ms/create | cores |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, r := range c.Runs {
			cores := 0.0
			if r.Result.ServerCPUCores != nil {
				cores = *r.Result.ServerCPUCores
			}
			fmt.Fprintf(w, "| %v | %d | %.0f | %.2f | %.2f | %.4f | %.2f |\n", r.Metrics, r.Result.Clients, r.Result.CreatesPerSec,
				r.Result.P50Ms, r.Result.P99Ms, *r.Result.ServerCPUMsPerReq, cores)
		}
		fmt.Fprintf(w, "\nmean CPU per create: %.4f ms with the metrics, %.4f ms without: %.3f×\n\n", c.OnMsPerCreate, c.OffMsPerCreate, c.Ratio)
	}
	if s := rep.Scrape; s != nil {
		fmt.Fprintf(w, "### Scrape at %.0f label sets (%.0f writes refused into the overflow series)\n\n", s.LabelSets, s.Refused)
		fmt.Fprintln(w, "| occurrence series | their bytes | exposition bytes | gzipped | scrapes | p50 ms | p99 ms | max ms | eventsd CPU ms/scrape |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %.2f | %.2f | %.2f | %.2f |\n\n", s.Series, s.OccurrenceBytes, s.Bytes, s.GzipBytes, s.Scrapes,
			s.P50Ms, s.P99Ms, s.MaxMs, s.CPUMsPerScrape)
	}
	for _, g := range rep.Goals {
		fmt.Fprintf(w, "goal: %s %s: %s (%s)\n", g.Goal, g.Target, g.Measured, map[bool]string{true: "met", false: "NOT met"}[g.Pass])
	}
	if rep.Error != "" {
		fmt.Fprintln(w, "error:", strings.TrimSpace(rep.Error))
	}
}

// newEventFor returns the create load's events: newEvent's, with a
// series when series is set.
func newEventFor(series bool) func(p pod, seq int) *corev1.Event {
	if !series {
		return nil
	}
	return func(p pod, seq int) *corev1.Event {
		ev := newEvent(p, seq)
		now := metav1.NewMicroTime(ev.LastTimestamp.Time)
		ev.EventTime, ev.Action = now, "Observe"
		ev.Series = &corev1.EventSeries{Count: 2, LastObservedTime: now}
		if ev.ReportingInstance == "" {
			ev.ReportingInstance = "node"
		}
		return ev
	}
}
