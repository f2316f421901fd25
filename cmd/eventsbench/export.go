package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/export/otlp/otlptest"
	"github.com/kubevents/kubevents/export/webhook/webhooktest"
)

// exportBenchConfig configures the export benchmark.
type exportBenchConfig struct {
	Eventsd string
	Out     string
	Quick   bool
	Command string
	// Clients, Warmup and Duration are the create benchmark's, run with
	// and without sinks, Rounds times each (alternating).
	Clients          int
	Warmup, Duration time.Duration
	Rounds           int
	// Backlog is the number of changes each sink type drains.
	Backlog int
	// Rate and LagDuration are the paced load the sinks' lag is measured
	// under.
	Rate        int
	LagDuration time.Duration
	DataParent  string
	Timeout     time.Duration
	Log         io.Writer
}

// exportReport is what the export benchmark measured.
type exportReport struct {
	Command      string         `json:"command"`
	Started      time.Time      `json:"started"`
	ElapsedS     float64        `json:"elapsed_s"`
	Machine      machine        `json:"machine"`
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	// Cost pairs a create benchmark without sinks with one with the two
	// sinks (a webhook and an OTLP collector over gRPC), per round.
	Cost []exportCostRound `json:"cost"`
	// CostPercent is 1 - (mean creates/s with sinks / without), in percent;
	// CPUCostPercent the same of eventsd's CPU time per create.
	CostPercent    float64 `json:"cost_percent"`
	CPUCostPercent float64 `json:"cpu_cost_percent"`
	// Drain is each sink type draining a backlog.
	Drain []drainResult `json:"drain"`
	// Lag is each sink's delivery lag under the paced load.
	Lag   []lagResult `json:"lag"`
	Error string      `json:"error,omitempty"`
}

type exportCostRound struct {
	Round   int           `json:"round"`
	Without *createResult `json:"without_sinks"`
	With    *createResult `json:"with_two_sinks"`
}

type drainResult struct {
	Sink    string  `json:"sink"`
	Records int     `json:"records"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"records_per_s"`
	// EventsdCPUMsPerRecord is eventsd's CPU time during the drain per
	// record exported.
	EventsdCPUMsPerRecord float64 `json:"eventsd_cpu_ms_per_record"`
}

type lagResult struct {
	Sink string `json:"sink"`
	// Creates is how many creates were acknowledged, at CreatesPerSec.
	Creates       int     `json:"creates"`
	CreatesPerSec float64 `json:"creates_per_s"`
	// Delivered is how many of them the sink got; lag is from the
	// create's answer to the sink's receipt.
	Delivered int `json:"delivered"`
	latencies
}

func newExportCommand() *cobra.Command {
	cfg := exportBenchConfig{Clients: 64, Warmup: 2 * time.Second, Duration: 10 * time.Second, Rounds: 2,
		Backlog: 50_000, Rate: 1000, LagDuration: 20 * time.Second, Timeout: 30 * time.Minute, Log: os.Stderr}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Benchmark export: create throughput with and without sinks, drain rate per sink type, lag under load",
		Long: `export measures issue 13's figures on eventsd processes on 127.0.0.1, with
loopback receivers in this process (a webhook receiver, an OTLP collector
over gRPC, and for the file sink the file itself):

- cost: the create benchmark (--clients, protobuf) against an eventsd without
  sinks and one exporting to two sinks (webhook and OTLP), alternating for
  --rounds rounds, each on a fresh data directory;
- drain: for each sink type, an eventsd with the sink saves its cursor and
  stops; --backlog events are created with export off; then eventsd starts
  again with the sink, which drains the backlog: records/s from eventsd
  ready to the last record received, and eventsd's CPU per record;
- lag: --rate creates/s for --lag-duration against an eventsd exporting to
  the webhook and OTLP sinks with the default batching (500 records, 1 s):
  the time from each create's answer to its record's receipt.

--quick: 1 round of 3 s, a 10,000-event backlog, 10 s of paced load.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if cfg.Quick {
				if !f.Changed("duration") {
					cfg.Duration = 3 * time.Second
				}
				if !f.Changed("warmup") {
					cfg.Warmup = time.Second
				}
				if !f.Changed("rounds") {
					cfg.Rounds = 1
				}
				if !f.Changed("backlog") {
					cfg.Backlog = 10_000
				}
				if !f.Changed("lag-duration") {
					cfg.LagDuration = 10 * time.Second
				}
			}
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runExportBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printExportReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.BoolVar(&cfg.Quick, "quick", false, "Short intervals and a small backlog.")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "Clients of the create benchmark.")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "Warmup of each create benchmark.")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "Measured interval of each create benchmark.")
	f.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "Rounds of the create benchmark without and with sinks.")
	f.IntVar(&cfg.Backlog, "backlog", cfg.Backlog, "Changes each sink type drains.")
	f.IntVar(&cfg.Rate, "rate", cfg.Rate, "Creates per second of the lag measurement.")
	f.DurationVar(&cfg.LagDuration, "lag-duration", cfg.LagDuration, "How long the paced load of the lag measurement runs.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir).")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

func (cfg *exportBenchConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

// arrivals records when each idempotency key first arrived at a sink.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time
	n  atomic.Int64
}

func newArrivals() *arrivals { return &arrivals{at: map[string]time.Time{}} }

func (a *arrivals) observe(keys []string) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		if _, ok := a.at[k]; !ok {
			a.at[k] = now
		}
	}
	a.n.Store(int64(len(a.at)))
}

func (a *arrivals) get(k string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[k]
	return t, ok
}

// exportSinks are the loopback receivers of one measurement.
type exportSinks struct {
	webhook *webhooktest.Receiver
	otlp    *otlptest.Receiver
	hook    *arrivals
	col     *arrivals
}

func startExportSinks() (*exportSinks, error) {
	s := &exportSinks{hook: newArrivals(), col: newArrivals()}
	var err error
	if s.webhook, err = webhooktest.Start(webhooktest.Options{KeysOnly: true, Observe: s.hook.observe}); err != nil {
		return nil, err
	}
	if s.otlp, err = otlptest.Listen(otlptest.Options{Discard: true, Observe: s.col.observe}); err != nil {
		s.webhook.Close()
		return nil, err
	}
	return s, nil
}

func (s *exportSinks) close() {
	s.webhook.Close()
	s.otlp.Stop()
}

// sinkYAML is the configuration of one sink of the given type.
func (s *exportSinks) sinkYAML(typ, filePath string) string {
	switch typ {
	case "webhook":
		return fmt.Sprintf("- name: hook\n  webhook: {url: %q}\n", s.webhook.URL())
	case "otlp":
		return fmt.Sprintf("- name: collector\n  otlp: {endpoint: %q, insecure: true}\n", s.otlp.GRPCEndpoint())
	default:
		return fmt.Sprintf("- name: archive\n  file: {path: %q, maxSizeBytes: 1073741824}\n", filePath)
	}
}

func writeExportConfig(path string, sinks ...string) error {
	return os.WriteFile(path, []byte("apiVersion: eventsd.kubevents.io/v1alpha1\nkind: ExportConfiguration\nsinks:\n"+strings.Join(sinks, "")), 0o600)
}

// runExportBench runs the three measurements. The report it returns (also
// with an error) holds what was measured until then.
func runExportBench(ctx context.Context, cfg exportBenchConfig) (rep *exportReport, err error) {
	bin, err := eventsdBinary(cfg.Eventsd)
	if err != nil {
		return nil, err
	}
	ctx, parent, done, err := startBench(ctx, cfg.Timeout, cfg.DataParent, "export")
	if err != nil {
		return nil, err
	}
	defer done()
	started := time.Now()
	rep = &exportReport{Command: cfg.Command, Started: started, Machine: machineInfo(parent), LoadAvgStart: loadAvg(),
		Settings: map[string]any{"clients": cfg.Clients, "warmup_s": cfg.Warmup.Seconds(), "duration_s": cfg.Duration.Seconds(),
			"rounds": cfg.Rounds, "backlog": cfg.Backlog, "rate": cfg.Rate, "lag_duration_s": cfg.LagDuration.Seconds(),
			"wire": wireProtobuf, "eventsd_args": "--event-ttl=24h", "batching": "defaults (500 records, 1s)"}}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	sinks, err := startExportSinks()
	if err != nil {
		return rep, err
	}
	defer sinks.close()
	dirN := 0
	newDir := func() string {
		dirN++
		return filepath.Join(parent, strconv.Itoa(dirN))
	}
	two := filepath.Join(parent, "two-sinks.yaml")
	if err := writeExportConfig(two, sinks.sinkYAML("webhook", ""), sinks.sinkYAML("otlp", "")); err != nil {
		return rep, err
	}

	// Cost: without and with two sinks, alternating.
	for round := 1; round <= cfg.Rounds; round++ {
		r := exportCostRound{Round: round}
		for _, with := range []bool{false, true} {
			var extra []string
			if with {
				extra = []string{"--export-config", two}
			}
			cfg.logf("cost round %d: %d clients, sinks %v", round, cfg.Clients, with)
			ev, err := startEventsd(ctx, bin, newDir(), extra...)
			if err != nil {
				return rep, err
			}
			cfg.logf("eventsd at %s", ev.URL)
			res, err := runCreate(ctx, createConfig{Server: ev.URL, Clients: cfg.Clients, Duration: cfg.Duration, Warmup: cfg.Warmup,
				Namespaces: 10, Objects: 1000, PID: ev.pid(), PodPrefix: "pod", Wire: wireProtobuf})
			if serr := ev.stop(); err == nil {
				err = serr
			}
			if err != nil {
				return rep, err
			}
			if with {
				r.With = res
			} else {
				r.Without = res
			}
		}
		rep.Cost = append(rep.Cost, r)
	}
	var without, with, cpuWithout, cpuWith float64
	for _, r := range rep.Cost {
		without += r.Without.CreatesPerSec
		with += r.With.CreatesPerSec
		if r.Without.ServerCPUMsPerReq != nil && r.With.ServerCPUMsPerReq != nil {
			cpuWithout += *r.Without.ServerCPUMsPerReq
			cpuWith += *r.With.ServerCPUMsPerReq
		}
	}
	if without > 0 {
		rep.CostPercent = round3(100 * (1 - with/without))
	}
	if cpuWithout > 0 {
		rep.CPUCostPercent = round3(100 * (cpuWith/cpuWithout - 1))
	}

	// Drain: each sink type catches up with a backlog.
	for _, typ := range []string{"webhook", "otlp", "file"} {
		res, err := cfg.drain(ctx, bin, newDir(), sinks, typ)
		if err != nil {
			return rep, fmt.Errorf("drain %s: %w", typ, err)
		}
		rep.Drain = append(rep.Drain, *res)
	}

	// Lag under a paced load.
	lags, err := cfg.lag(ctx, bin, newDir(), sinks, two)
	rep.Lag = lags
	return rep, err
}

// drain measures one sink type draining cfg.Backlog changes.
func (cfg *exportBenchConfig) drain(ctx context.Context, bin, dir string, sinks *exportSinks, typ string) (*drainResult, error) {
	file := filepath.Join(dir, "export", "events.jsonl")
	config := filepath.Join(filepath.Dir(dir), typ+".yaml")
	if err := writeExportConfig(config, sinks.sinkYAML(typ, file)); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// The sink starts: its cursor is the store's (empty) revision.
	ev, err := startEventsd(ctx, bin, data, "--export-config", config)
	if err != nil {
		return nil, err
	}
	for !strings.Contains(ev.logs.String(), "export: new sink") {
		if err := ev.exited(); err != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := ev.stop(); err != nil {
		return nil, err
	}
	// The backlog, written with export off.
	cfg.logf("drain %s: creating %d events with export off", typ, cfg.Backlog)
	if ev, err = startEventsd(ctx, bin, data); err != nil {
		return nil, err
	}
	if err := createN(ctx, ev.URL, cfg.Backlog, nil); err != nil {
		ev.stop()
		return nil, err
	}
	if err := ev.stop(); err != nil {
		return nil, err
	}
	var count func() (int, error)
	switch typ {
	case "webhook":
		base := sinks.hook.n.Load()
		count = func() (int, error) { return int(sinks.hook.n.Load() - base), nil }
	case "otlp":
		base := sinks.col.n.Load()
		count = func() (int, error) { return int(sinks.col.n.Load() - base), nil }
	default:
		count = func() (int, error) { return countLines(file) }
	}
	cfg.logf("drain %s: exporting the backlog", typ)
	t0 := time.Now()
	if ev, err = startEventsd(ctx, bin, data, "--export-config", config); err != nil {
		return nil, err
	}
	defer ev.stop()
	cpu0, _ := procCPU(ev.pid())
	for {
		n, err := count()
		if err != nil {
			return nil, err
		}
		if n >= cfg.Backlog {
			break
		}
		if err := ev.exited(); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d records: %w", n, cfg.Backlog, ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	secs := time.Since(t0).Seconds()
	cpu1, _ := procCPU(ev.pid())
	return &drainResult{Sink: typ, Records: cfg.Backlog, Seconds: round3(secs), PerSec: round3(float64(cfg.Backlog) / secs),
		EventsdCPUMsPerRecord: round3(ms(cpu1-cpu0) / float64(cfg.Backlog))}, nil
}

// countLines counts the lines of path (0 when it does not exist yet).
func countLines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return bytes.Count(b, []byte{'\n'}), err
}

// createN creates n events with 32 clients; each acknowledged create's
// idempotency key and answer time go to ack when it is set.
func createN(ctx context.Context, server string, n int, ack func(key string, at time.Time)) error {
	return pacedCreates(ctx, server, n, 0, ack)
}

// pacedCreates creates n events with 32 clients, at rate creates/s in all
// when rate > 0.
func pacedCreates(ctx context.Context, server string, n, rate int, ack func(key string, at time.Time)) error {
	const clients = 32
	var next atomic.Int64
	start := time.Now()
	errc := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		cs, err := newClientset(server, wireProtobuf, nil)
		if err != nil {
			return err
		}
		wg.Go(func() {
			p := newPod(namespaceName(c%10), "pod-"+strconv.Itoa(c))
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				if rate > 0 {
					sleepUntil(ctx, start.Add(time.Duration(i)*time.Second/time.Duration(rate)))
				}
				ev, err := cs.CoreV1().Events(p.Namespace).Create(ctx, newEvent(p, int(i)), metav1.CreateOptions{})
				if err != nil {
					errc <- err
					return
				}
				if ack != nil {
					ack(string(ev.UID)+"/"+ev.ResourceVersion, time.Now())
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// lag measures each sink's delivery lag under cfg.Rate creates/s.
func (cfg *exportBenchConfig) lag(ctx context.Context, bin, dir string, sinks *exportSinks, config string) ([]lagResult, error) {
	cfg.logf("lag: %d creates/s for %v, exporting to the webhook and OTLP sinks", cfg.Rate, cfg.LagDuration)
	ev, err := startEventsd(ctx, bin, dir, "--export-config", config)
	if err != nil {
		return nil, err
	}
	defer ev.stop()
	n := int(cfg.LagDuration.Seconds() * float64(cfg.Rate))
	var mu sync.Mutex
	acks := make(map[string]time.Time, n)
	t0 := time.Now()
	err = pacedCreates(ctx, ev.URL, n, cfg.Rate, func(key string, at time.Time) {
		mu.Lock()
		acks[key] = at
		mu.Unlock()
	})
	elapsed := time.Since(t0).Seconds()
	if err != nil {
		return nil, err
	}
	// Wait for the stragglers: at most 30 s.
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range []*arrivals{sinks.hook, sinks.col} {
		for time.Now().Before(deadline) {
			got := 0
			for k := range acks {
				if _, ok := a.get(k); ok {
					got++
				}
			}
			if got == len(acks) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var out []lagResult
	for _, s := range []struct {
		name string
		a    *arrivals
	}{{"webhook", sinks.hook}, {"otlp", sinks.col}} {
		var lags []time.Duration
		for k, at := range acks {
			if got, ok := s.a.get(k); ok {
				lags = append(lags, max(0, got.Sub(at)))
			}
		}
		out = append(out, lagResult{Sink: s.name, Creates: len(acks), CreatesPerSec: round3(float64(len(acks)) / elapsed),
			Delivered: len(lags), latencies: summarize(lags)})
	}
	return out, nil
}

func printExportReport(w io.Writer, rep *exportReport) {
	fmt.Fprintf(w, "## Export (%s, %d cores, %s)\n\n", rep.Machine.CPUModel, rep.Machine.NProc, rep.Started.Format("2006-01-02"))
	fmt.Fprintf(w, "`%s`\n\n", rep.Command)
	fmt.Fprintln(w, "| round | creates/s without sinks | with two sinks | eventsd CPU ms/create without | with |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	cpu := func(r *createResult) string {
		if r == nil || r.ServerCPUMsPerReq == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", *r.ServerCPUMsPerReq)
	}
	for _, r := range rep.Cost {
		if r.Without == nil || r.With == nil {
			continue
		}
		fmt.Fprintf(w, "| %d | %.0f (p99 %.1f ms) | %.0f (p99 %.1f ms) | %s | %s |\n", r.Round,
			r.Without.CreatesPerSec, r.Without.P99Ms, r.With.CreatesPerSec, r.With.P99Ms, cpu(r.Without), cpu(r.With))
	}
	fmt.Fprintf(w, "\nCreate throughput cost of two sinks: %.1f%% (goal < 10%%); eventsd CPU per create: %+.1f%%\n\n", rep.CostPercent, rep.CPUCostPercent)
	fmt.Fprintln(w, "| sink | backlog | drained in | records/s | eventsd CPU ms/record |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, d := range rep.Drain {
		fmt.Fprintf(w, "| %s | %d | %.2f s | %.0f | %.3f |\n", d.Sink, d.Records, d.Seconds, d.PerSec, d.EventsdCPUMsPerRecord)
	}
	fmt.Fprintln(w, "\n| sink | creates | creates/s | delivered | lag p50 | p90 | p99 | max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, l := range rep.Lag {
		fmt.Fprintf(w, "| %s | %d | %.0f | %d | %.0f ms | %.0f ms | %.0f ms | %.0f ms |\n", l.Sink, l.Creates, l.CreatesPerSec, l.Delivered, l.P50Ms, l.P90Ms, l.P99Ms, l.MaxMs)
	}
	fmt.Fprintf(w, "\nload average %s -> %s; %.0f s in all\n", rep.LoadAvgStart, rep.LoadAvgEnd, rep.ElapsedS)
	if rep.Error != "" {
		fmt.Fprintf(w, "\nERROR: %s\n", rep.Error)
	}
}
