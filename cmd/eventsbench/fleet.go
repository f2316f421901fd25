package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// The phases of "eventsbench fleet".
const (
	fleetPhaseMirror = "mirror"
	fleetPhaseList   = "list"
)

// fleetBenchConfig configures "eventsbench fleet" (issue 34's benchmark:
// one eventsd for a fleet of clusters).
type fleetBenchConfig struct {
	// Phases are fleetPhaseMirror and fleetPhaseList, run in that order.
	Phases []string

	// Sources are the fake sources mirrored at once in the mirroring
	// phase, at a combined Rate changes/s (creates and count updates
	// alternating), measured for Duration after Warmup, against a fleet
	// of one source at the same Rate in the same run; Drain bounds the
	// wait for the measured changes' arrival. Rounds repeats the pair.
	Sources        int
	Rate           int
	Duration       time.Duration
	Warmup         time.Duration
	Drain          time.Duration
	Rounds         int
	SourcePods     int
	SourceNSCount  int
	ReadyTimeout   time.Duration
	CompactEvery   time.Duration
	MirrorsWorkers int

	// Clusters of ClusterEvents events each (over Namespaces namespaces)
	// fill the list phase's fleet store; ListCluster's events alone, at
	// the root, the reference store. Each list is timed Repeat times,
	// the two stores alternating, with Accept; Reason is the field
	// selector's reason.
	Clusters      int
	ClusterEvents int
	Namespaces    int
	ListCluster   int
	Repeat        int
	Reason        string
	Accept        string
	PageSize      int64
	FillWorkers   int

	// StoreDir, when set, keeps the list phase's two stores and reuses
	// them in later runs with the same settings.
	StoreDir string
	// ProfileDir, when set, receives CPU profiles of each mirroring
	// interval and the heap profile at each memory measurement, and a CPU
	// profile of the fleet store's list repetitions.
	ProfileDir string
	DataParent string
	Out        string
	Command    string
	Timeout    time.Duration
	Log        io.Writer
}

func defaultFleetBenchConfig() fleetBenchConfig {
	return fleetBenchConfig{
		Phases:  []string{fleetPhaseMirror, fleetPhaseList},
		Sources: 20, Rate: 2000, Duration: 60 * time.Second, Warmup: 10 * time.Second, Drain: 30 * time.Second, Rounds: 1,
		SourcePods: 200, SourceNSCount: 10, ReadyTimeout: time.Minute, CompactEvery: time.Second,
		Clusters: 20, ClusterEvents: 100_000, Namespaces: 10, ListCluster: 7, Repeat: 10, Reason: "BackOff",
		Accept: "application/vnd.kubernetes.protobuf", PageSize: 500, FillWorkers: 4,
		Timeout: 2 * time.Hour, Log: os.Stderr,
	}
}

func (c *fleetBenchConfig) logf(format string, args ...any) { logLine(c.Log, format, args...) }

func (c *fleetBenchConfig) has(phase string) bool { return slices.Contains(c.Phases, phase) }

// validate refuses settings the run cannot use, naming the flag.
func (c *fleetBenchConfig) validate() error {
	var errs []error
	for _, p := range c.Phases {
		if p != fleetPhaseMirror && p != fleetPhaseList {
			errs = append(errs, fmt.Errorf("--phases: unknown phase %q (mirror, list)", p))
		}
	}
	if len(c.Phases) == 0 {
		errs = append(errs, errors.New("--phases: none given (mirror, list)"))
	}
	if c.has(fleetPhaseMirror) {
		if c.Sources < 2 || c.Sources > 100 {
			errs = append(errs, fmt.Errorf("--sources %d: want 2 to 100 (a fleet; the reference is a fleet of one)", c.Sources))
		}
		if c.Rate < c.Sources {
			errs = append(errs, fmt.Errorf("--rate %d: want at least one change/s per source (--sources %d)", c.Rate, c.Sources))
		}
		if c.Duration <= 0 || c.Warmup < 0 || c.Drain <= 0 || c.ReadyTimeout <= 0 || c.CompactEvery <= 0 {
			errs = append(errs, errors.New("--duration, --drain, --ready-timeout and --compact-every must be positive, --warmup not negative"))
		}
		if c.Rounds < 1 || c.SourcePods < 1 || c.SourceNSCount < 1 || c.MirrorsWorkers < 0 {
			errs = append(errs, errors.New("--rounds, --source-pods and --source-namespaces must be positive, --mirror-workers not negative"))
		}
	}
	if c.has(fleetPhaseList) {
		if c.Clusters < 1 || c.Clusters > 100 {
			errs = append(errs, fmt.Errorf("--clusters %d: want 1 to 100", c.Clusters))
		}
		if c.ListCluster < 0 || c.ListCluster >= c.Clusters {
			errs = append(errs, fmt.Errorf("--list-cluster %d: want one of the clusters, 0 to %d", c.ListCluster, c.Clusters-1))
		}
		if c.ClusterEvents < c.Namespaces || c.Namespaces < 1 {
			errs = append(errs, fmt.Errorf("--cluster-events %d, --namespaces %d: want at least one namespace and one event per namespace", c.ClusterEvents, c.Namespaces))
		}
		if c.Repeat < 1 || c.PageSize < 1 || c.FillWorkers < 1 {
			errs = append(errs, errors.New("--repeat, --page-size and --fill-workers must be positive"))
		}
		if !slices.Contains(lifecycleReasons(), c.Reason) {
			errs = append(errs, fmt.Errorf("--reason %q: the filled events' reasons are %s", c.Reason, strings.Join(lifecycleReasons(), ", ")))
		}
		if c.Accept == "" {
			errs = append(errs, errors.New("--accept: empty"))
		}
	}
	return errors.Join(errs...)
}

// lifecycleReasons are the reasons of newEvent's events.
func lifecycleReasons() []string {
	out := make([]string, 0, len(lifecycle))
	for _, l := range lifecycle {
		if !slices.Contains(out, l.reason) {
			out = append(out, l.reason)
		}
	}
	return out
}

// clusterName is the i-th cluster of the fleet.
func clusterName(i int) string { return fmt.Sprintf("c%02d", i) }

// fleetReport is what "eventsbench fleet" measured.
type fleetReport struct {
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	ElapsedS float64   `json:"elapsed_s"`
	Machine  machine   `json:"machine"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg: other work on the
	// machine skews the figures.
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	// Mirroring are the mirroring phase's runs, in order: a fleet of one,
	// then of Sources, per round.
	Mirroring []*fleetMirrorResult `json:"mirroring,omitempty"`
	// MemoryPerSourceBytes is the live heap and goroutine stacks of the
	// fleet's run less the fleet of one's, the fake sources' fixed watch
	// buffers taken out, over the sources added (last round).
	MemoryPerSourceBytes *float64    `json:"memory_per_source_bytes,omitempty"`
	Lists                *fleetLists `json:"lists,omitempty"`
	// Profiles are the profiles written (--profile-dir), by what they
	// cover.
	Profiles map[string]string `json:"profiles,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	Error    string            `json:"error,omitempty"`
}

func (r *fleetReport) addProfile(what, path string) {
	if r.Profiles == nil {
		r.Profiles = map[string]string{}
	}
	r.Profiles[what] = path
}

// fleetMirrorResult is one mirroring run: Sources fake sources at a
// combined TargetRate, each mirrored into its cluster's view of one
// pebble store.
type fleetMirrorResult struct {
	Round      int     `json:"round"`
	Sources    int     `json:"sources"`
	TargetRate int     `json:"target_rate"`
	WarmupS    float64 `json:"warmup_s"`
	DurationS  float64 `json:"duration_s"`
	// ReadyS is the time from the mirrors' start until every one was
	// ready (an empty source each).
	ReadyS float64 `json:"ready_s"`
	// Changes were made in the sources in the measured interval (Creates
	// + Updates); AchievedPerSec is their rate.
	Changes        int64   `json:"changes"`
	Creates        int64   `json:"creates"`
	Updates        int64   `json:"updates"`
	AchievedPerSec float64 `json:"achieved_per_s"`
	// LateP99Ms is how late the changes were made against their schedule
	// (the generator behind).
	LateP99Ms float64 `json:"late_p99_ms"`
	// Lag is from each measured change in a source to its arrival (name
	// and count) on a watch of that source's cluster through its view of
	// the store, over every source; PerSource each source's.
	Lag       latencies        `json:"lag"`
	PerSource []fleetSourceLag `json:"per_source"`
	Seen      int64            `json:"seen"`
	Missing   int64            `json:"missing"`
	Worst     *fleetSourceLag  `json:"worst_source,omitempty"`
	// CPU of this whole process over the measured interval: the store,
	// the mirrors, and also the fake sources and the lag watches.
	ProcessCores     float64 `json:"process_cores"`
	CPUMsPerChange   float64 `json:"cpu_ms_per_change"`
	MachineBusyCores float64 `json:"machine_busy_cores"`
	// HeapLiveBytes is runtime.MemStats.HeapAlloc right after a GC at
	// the end of the run (the sources, mirrors and watches still open):
	// the live heap; HeapInuseBytes is HeapInuse then (the live heap and
	// the free room of its spans); StackBytes is StackInuse then (the
	// goroutines' stacks); HeapBaselineBytes the live heap before the
	// run's store was opened. SourceBuffersBytes are the fake sources'
	// own fixed watch buffers, counted in HeapLiveBytes; RSSBytes the
	// process's VmRSS at the end.
	HeapLiveBytes      int64 `json:"heap_live_bytes"`
	HeapInuseBytes     int64 `json:"heap_inuse_bytes"`
	StackBytes         int64 `json:"stack_bytes"`
	HeapBaselineBytes  int64 `json:"heap_baseline_bytes"`
	SourceBuffersBytes int64 `json:"source_buffers_bytes"`
	RSSBytes           int64 `json:"rss_bytes"`
	Goroutines         int   `json:"goroutines"`
}

// ownMemory is the run's live heap and stacks less the fake sources'
// fixed watch buffers.
func (r *fleetMirrorResult) ownMemory() int64 {
	return r.HeapLiveBytes + r.StackBytes - r.SourceBuffersBytes
}

// fleetSourceLag is one source's lag in a mirroring run.
type fleetSourceLag struct {
	Source  string    `json:"source"`
	Changes int64     `json:"changes"`
	Seen    int64     `json:"seen"`
	Lag     latencies `json:"lag"`
}

func newFleetCommand() *cobra.Command {
	cfg := defaultFleetBenchConfig()
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Benchmark one eventsd for a fleet (issue 34): mirroring many sources into one store, one cluster's list among many",
		Long: `fleet measures, in this one process, what a fleet costs eventsd:

1. mirror: a pebble store (fsync per commit group, as eventsd) and
   --sources mirrors (package mirror, as eventsd runs it), each from a fake
   source (mirror.FakeSource) into its cluster's view of the store
   (clusterview.New(store, "c00"), ...), the sources making a combined
   --rate changes/s (creates and count updates alternating, paced) for
   --duration after --warmup; then the same total rate from one source
   into the same kind of store, the reference. For each: the lag from a
   change in a source to its arrival on a watch of that cluster through the
   view, per source and over all, p50/p99; this process's CPU per change
   (store, mirrors, and the fake sources and watches too); the live heap
   and the goroutines' stacks after a GC at the end, the difference over
   the sources added (less the fake sources' fixed watch buffers) being the
   memory per source.
2. list: a store holding --clusters clusters of --cluster-events events
   each and one holding only cluster --list-cluster's events at its root
   (filled in this process as fast as it goes; kept with --store-dir),
   each served by an in-process server over loopback HTTP (the fleet's
   with its clusters at /clusters/NAME/); one namespace's list and the
   cluster's every-namespace list, whole and paged (--page-size), without
   and with a reason field selector, timed --repeat times on each store,
   alternating, p50/p99.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.validate(); err != nil {
				return err
			}
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runFleetBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printFleetReport, err)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Phases, "phases", cfg.Phases, "Phases to run, in this order: mirror, list.")
	f.IntVar(&cfg.Sources, "sources", cfg.Sources, "Fake sources mirrored at once (the reference is one).")
	f.IntVar(&cfg.Rate, "rate", cfg.Rate, "Combined changes/s of the sources.")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "Measured interval of each mirroring run.")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "Paced changes before the measured interval.")
	f.DurationVar(&cfg.Drain, "drain", cfg.Drain, "Most wait after the changes for the last of them to arrive.")
	f.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "Pairs of mirroring runs (one source, then --sources).")
	f.IntVar(&cfg.SourcePods, "source-pods", cfg.SourcePods, "Pods each source's events are about.")
	f.IntVar(&cfg.SourceNSCount, "source-namespaces", cfg.SourceNSCount, "Namespaces of each source's pods.")
	f.DurationVar(&cfg.ReadyTimeout, "ready-timeout", cfg.ReadyTimeout, "Most wait for the mirrors to be ready.")
	f.DurationVar(&cfg.CompactEvery, "compact-every", cfg.CompactEvery, "How often each fake source drops its history (it keeps every change otherwise).")
	f.IntVar(&cfg.MirrorsWorkers, "mirror-workers", 0, "Apply workers of each mirror (0: the mirror's default).")
	f.IntVar(&cfg.Clusters, "clusters", cfg.Clusters, "Clusters of the list phase's fleet store.")
	f.IntVar(&cfg.ClusterEvents, "cluster-events", cfg.ClusterEvents, "Events of each cluster in the list phase.")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Namespaces of each cluster's events in the list phase.")
	f.IntVar(&cfg.ListCluster, "list-cluster", cfg.ListCluster, "The cluster whose lists are timed (its index: 7 is c07).")
	f.IntVar(&cfg.Repeat, "repeat", cfg.Repeat, "Repetitions of each list on each store.")
	f.StringVar(&cfg.Reason, "reason", cfg.Reason, "The reason of the lists' field selector.")
	f.StringVar(&cfg.Accept, "accept", cfg.Accept, "Accept header of the lists (client-go's typed clients ask for protobuf).")
	f.Int64Var(&cfg.PageSize, "page-size", cfg.PageSize, "limit of the paged lists.")
	f.IntVar(&cfg.FillWorkers, "fill-workers", cfg.FillWorkers, "Goroutines filling the list phase's stores.")
	f.StringVar(&cfg.StoreDir, "store-dir", "", "Keep the list phase's two filled stores in this directory and reuse them in later runs with the same --clusters, --cluster-events, --namespaces and --list-cluster (while their events are well within their 24h TTL).")
	f.StringVar(&cfg.ProfileDir, "profile-dir", "", "Write CPU profiles of each mirroring interval and of the fleet store's lists, and heap profiles at each memory measurement, here.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	return cmd
}

// runFleetBench runs the phases of cfg.
func runFleetBench(ctx context.Context, cfg fleetBenchConfig) (*fleetReport, error) {
	ctx, dir, done, err := startBench(ctx, cfg.Timeout, cfg.DataParent, "fleet")
	if err != nil {
		return nil, err
	}
	defer done()
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("--profile-dir: %w", err)
		}
	}
	rep := &fleetReport{Command: cfg.Command, Started: time.Now(), Machine: machineInfo(dir), LoadAvgStart: loadAvg(),
		Settings: map[string]any{
			"phases": cfg.Phases, "sources": cfg.Sources, "rate": cfg.Rate, "duration_s": cfg.Duration.Seconds(), "warmup_s": cfg.Warmup.Seconds(),
			"rounds": cfg.Rounds, "source_pods": cfg.SourcePods, "source_namespaces": cfg.SourceNSCount, "mirror_workers": cfg.MirrorsWorkers,
			"clusters": cfg.Clusters, "cluster_events": cfg.ClusterEvents, "namespaces": cfg.Namespaces, "list_cluster": clusterName(cfg.ListCluster),
			"repeat": cfg.Repeat, "reason": cfg.Reason, "accept": cfg.Accept, "page_size": cfg.PageSize,
		}}
	finish := func(err error) (*fleetReport, error) {
		rep.ElapsedS = round3(time.Since(rep.Started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		if err != nil {
			rep.Error = err.Error()
		}
		return rep, err
	}
	if cfg.has(fleetPhaseMirror) {
		for round := 1; round <= cfg.Rounds; round++ {
			var pair [2]*fleetMirrorResult
			for i, n := range []int{1, cfg.Sources} {
				res, err := cfg.mirrorRun(ctx, rep, filepath.Join(dir, fmt.Sprintf("mirror-%d-%d", round, n)), round, n)
				if res != nil {
					rep.Mirroring = append(rep.Mirroring, res)
					pair[i] = res
				}
				if err != nil {
					return finish(fmt.Errorf("mirroring from %d sources: %w", n, err))
				}
			}
			perSource := float64(pair[1].ownMemory()-pair[0].ownMemory()) / float64(cfg.Sources-1)
			perSource = round3(perSource)
			rep.MemoryPerSourceBytes = &perSource
		}
	}
	if cfg.has(fleetPhaseList) {
		lists, err := cfg.listPhase(ctx, rep, dir)
		rep.Lists = lists
		if err != nil {
			return finish(fmt.Errorf("lists: %w", err))
		}
	}
	return finish(nil)
}

// fakeWatchBuffer is what one watch of a mirror.FakeSource holds from
// its start: a channel of 100,000 watch.Events (mirror/fake.go), the
// simulation's cost, not the mirror's.
const fakeWatchBuffer = 100_000 * int64(unsafe.Sizeof(watch.Event{}))

// fleetSource is one fake source of a mirroring run, and what its
// cluster's watch saw.
type fleetSource struct {
	name string
	src  *mirror.FakeSource
	pods []pod

	mu sync.Mutex
	// pending are the changes made and not seen yet.
	pending map[string]pendingChange
	lags    []time.Duration
	seen    int64
	// changes counts the measured changes (scheduled in the measured
	// interval).
	changes, creates, updates int64
	late                      []time.Duration
}

// pendingChange is a change made in a source: when, and whether it is
// one of the measured interval's.
type pendingChange struct {
	at       time.Time
	measured bool
}

// record notes a change about to be made at t.
func (s *fleetSource) record(key string, t time.Time, measured bool) {
	s.mu.Lock()
	s.pending[key] = pendingChange{at: t, measured: measured}
	s.mu.Unlock()
}

// arrived notes the arrival of key at t; it keeps the lag of the
// measured changes.
func (s *fleetSource) arrived(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.pending[key]
	if !ok {
		return
	}
	delete(s.pending, key)
	if c.measured {
		s.seen++
		s.lags = append(s.lags, max(at.Sub(c.at), 0))
	}
}

// missing counts the measured changes not seen.
func (s *fleetSource) missing() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, c := range s.pending {
		if c.measured {
			n++
		}
	}
	return n
}

// mirrorRun mirrors n fake sources into a new store in dir at the
// combined rate and measures it.
func (cfg *fleetBenchConfig) mirrorRun(ctx context.Context, rep *fleetReport, dir string, round, n int) (*fleetMirrorResult, error) {
	res := &fleetMirrorResult{Round: round, Sources: n, TargetRate: cfg.Rate, WarmupS: cfg.Warmup.Seconds(), DurationS: cfg.Duration.Seconds()}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapBaselineBytes = int64(ms.HeapAlloc)

	logger := slog.New(slog.NewTextHandler(logWriter{cfg.Log}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := pebblestore.Open(pebblestore.Options{Dir: dir, DefaultTTL: fillEventTTL, Logger: logger})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	// wg: the mirrors and the lag watches; genWG: the sources' generators
	// and compaction.
	var wg, genWG sync.WaitGroup
	defer func() {
		stop()
		genWG.Wait()
		wg.Wait()
		if err := st.Close(); err != nil {
			cfg.logf("closing the store: %v", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			cfg.logf("removing %s: %v", dir, err)
		}
	}()

	// The measured interval, known before the first change: the lag
	// watches keep only its changes.
	sources := make([]*fleetSource, n)
	mirrors := make([]*mirror.Mirror, n)
	runErrs := make([]error, n)
	for i := range n {
		name := clusterName(i)
		s := &fleetSource{name: name, src: mirror.NewFakeSource(), pending: map[string]pendingChange{}}
		for p := range cfg.SourcePods {
			s.pods = append(s.pods, newPod(namespaceName(p%cfg.SourceNSCount), fmt.Sprintf("pod-%d", p)))
		}
		sources[i] = s
		view, ok := clusterview.New(st, name).(mirror.Store)
		if !ok {
			return nil, fmt.Errorf("cluster %s: the store's view is no mirror.Store", name)
		}
		m, err := mirror.New(mirror.Options{Source: s.src, Store: view, SourceName: name, Workers: cfg.MirrorsWorkers,
			Logger: logger.With("cluster", name)})
		if err != nil {
			return nil, err
		}
		mirrors[i] = m
	}
	// One watch per cluster through its view, from the store's current
	// revision.
	for _, s := range sources {
		w, err := clusterview.New(st, s.name).Watch(runCtx, storage.WatchOptions{Revision: st.Revision()})
		if err != nil {
			return nil, fmt.Errorf("watching cluster %s: %w", s.name, err)
		}
		wg.Go(func() {
			defer w.Stop()
			for e := range w.ResultChan() {
				if e.Err != nil {
					if runCtx.Err() == nil {
						cfg.logf("watch of cluster %s ended: %v", s.name, e.Err)
					}
					return
				}
				if e.Object == nil || (e.Type != watch.Added && e.Type != watch.Modified) {
					continue
				}
				s.arrived(steadyKey(e.Object.Namespace, e.Object.Name, e.Object.Count), time.Now())
			}
		})
	}
	readyStart := time.Now()
	for i, m := range mirrors {
		wg.Go(func() { runErrs[i] = m.Run(runCtx) })
	}
	for {
		notReady := 0
		for _, m := range mirrors {
			if m.Check(nil) != nil {
				notReady++
			}
		}
		if notReady == 0 {
			break
		}
		if time.Since(readyStart) > cfg.ReadyTimeout {
			return res, fmt.Errorf("%d of %d mirrors not ready after %s", notReady, n, cfg.ReadyTimeout)
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return res, ctx.Err()
		}
	}
	res.ReadyS = round3(time.Since(readyStart).Seconds())
	cfg.logf("mirror: %d sources at %d changes/s in all, %d mirrors ready in %.2fs", n, cfg.Rate, n, res.ReadyS)

	start := time.Now().Add(50 * time.Millisecond)
	mStart := start.Add(cfg.Warmup)
	mEnd := mStart.Add(cfg.Duration)

	// Each source's changes, paced: its share of the rate, the sources'
	// schedules staggered.
	for i, s := range sources {
		interval := time.Duration(float64(time.Second) * float64(n) / float64(cfg.Rate))
		offset := interval * time.Duration(i) / time.Duration(n)
		genWG.Go(func() { cfg.generate(runCtx, s, start.Add(offset), interval, mStart, mEnd) })
	}
	// Each source's history, dropped as it grows.
	genWG.Go(func() {
		t := time.NewTicker(cfg.CompactEvery)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case now := <-t.C:
				for _, s := range sources {
					s.src.Compact()
				}
				if now.After(mEnd) {
					return
				}
			}
		}
	})

	sleepUntil(ctx, mStart)
	cpu0, cerr0 := procCPU(0)
	busy0, berr0 := machineCPU()
	var stopProfile func() error
	if cfg.ProfileDir != "" {
		p := filepath.Join(cfg.ProfileDir, fmt.Sprintf("fleet-mirror-%d-sources-round-%d.pprof", n, round))
		if stopProfile, err = startCPUProfile(p); err != nil {
			return res, err
		}
		rep.addProfile(fmt.Sprintf("CPU, mirroring from %d sources, round %d", n, round), p)
	}
	sleepUntil(ctx, mEnd)
	cpu1, cerr1 := procCPU(0)
	busy1, berr1 := machineCPU()
	if stopProfile != nil {
		if err := stopProfile(); err != nil {
			return res, err
		}
	}
	genWG.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := errors.Join(cerr0, cerr1, berr0, berr1); err != nil {
		return res, fmt.Errorf("reading CPU times: %w", err)
	}

	// The measured changes' arrival.
	drainEnd := time.Now().Add(cfg.Drain)
	for {
		var missing int64
		for _, s := range sources {
			missing += s.missing()
		}
		if missing == 0 || time.Now().After(drainEnd) {
			res.Missing = missing
			break
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return res, ctx.Err()
		}
	}

	// Memory, the sources, mirrors and watches still open.
	runtime.GC()
	runtime.ReadMemStats(&ms)
	res.HeapLiveBytes, res.HeapInuseBytes, res.StackBytes = int64(ms.HeapAlloc), int64(ms.HeapInuse), int64(ms.StackInuse)
	res.SourceBuffersBytes = int64(n) * fakeWatchBuffer
	res.Goroutines = runtime.NumGoroutine()
	if rss, err := procStatus(os.Getpid(), "VmRSS"); err == nil {
		res.RSSBytes = rss
	}
	if cfg.ProfileDir != "" {
		p := filepath.Join(cfg.ProfileDir, fmt.Sprintf("fleet-mirror-%d-sources-round-%d.heap.pprof", n, round))
		if err := writeHeapProfile(p); err != nil {
			return res, err
		}
		rep.addProfile(fmt.Sprintf("heap, mirroring from %d sources, round %d", n, round), p)
	}

	var all, late []time.Duration
	for _, s := range sources {
		s.mu.Lock()
		res.Changes += s.changes
		res.Creates += s.creates
		res.Updates += s.updates
		res.Seen += s.seen
		all = append(all, s.lags...)
		late = append(late, s.late...)
		res.PerSource = append(res.PerSource, fleetSourceLag{Source: s.name, Changes: s.changes, Seen: s.seen, Lag: summarize(s.lags)})
		s.mu.Unlock()
	}
	res.Lag = summarize(all)
	res.LateP99Ms = summarize(late).P99Ms
	d := cfg.Duration.Seconds()
	res.AchievedPerSec = round3(float64(res.Changes) / d)
	res.ProcessCores = round3((cpu1 - cpu0).Seconds() / d)
	res.MachineBusyCores = round3((busy1 - busy0).Seconds() / d)
	if res.Changes > 0 {
		res.CPUMsPerChange = round3(ms64(cpu1-cpu0) / float64(res.Changes))
	}
	for i := range res.PerSource {
		if res.Worst == nil || res.PerSource[i].Lag.P99Ms > res.Worst.Lag.P99Ms {
			w := res.PerSource[i]
			res.Worst = &w
		}
	}
	cfg.logf("  %d changes (%.0f/s), lag p50 %.2f ms, p99 %.2f ms, max %.2f ms (worst source %s p99 %.2f ms); %d missing; process %.2f cores, %.3f ms CPU/change; live heap %s (baseline %s, in use %s), stacks %s, RSS %s",
		res.Changes, res.AchievedPerSec, res.Lag.P50Ms, res.Lag.P99Ms, res.Lag.MaxMs, res.Worst.Source, res.Worst.Lag.P99Ms, res.Missing,
		res.ProcessCores, res.CPUMsPerChange, mib(res.HeapLiveBytes), mib(res.HeapBaselineBytes), mib(res.HeapInuseBytes), mib(res.StackBytes), mib(res.RSSBytes))

	stop()
	wg.Wait()
	for i, err := range runErrs {
		if err != nil {
			return res, fmt.Errorf("mirror of %s: %w", sources[i].name, err)
		}
	}
	if res.Changes == 0 {
		return res, errors.New("no change made in the measured interval")
	}
	if res.Missing > 0 {
		return res, fmt.Errorf("%d of %d changes never reached their cluster's watch within %s", res.Missing, res.Changes, cfg.Drain)
	}
	return res, nil
}

// generate makes s's changes, one every interval from start until to:
// creates and count updates of its recent events alternating.
func (cfg *fleetBenchConfig) generate(ctx context.Context, s *fleetSource, start time.Time, interval time.Duration, from, to time.Time) {
	var ring []*corev1.Event
	upd, seq := 0, 0
	for slot := 0; ; slot++ {
		sched := start.Add(time.Duration(slot) * interval)
		if !sched.Before(to) || ctx.Err() != nil {
			return
		}
		if d := time.Until(sched); d > 0 && !sleepCtx(ctx, d) {
			return
		}
		now := time.Now()
		measured := !sched.Before(from)
		create := slot%2 == 0 || len(ring) == 0
		if create {
			ev := newEvent(s.pods[seq%len(s.pods)], seq)
			seq++
			s.record(steadyKey(ev.Namespace, ev.Name, 1), now, measured)
			ring = append(ring, s.src.Create(ev))
			if len(ring) > 64 {
				ring = ring[1:]
			}
		} else {
			ev := ring[upd%len(ring)].DeepCopy()
			upd++
			ev.Count++
			ev.LastTimestamp = metav1.NewTime(now)
			s.record(steadyKey(ev.Namespace, ev.Name, ev.Count), now, measured)
			ring[(upd-1)%len(ring)] = s.src.Update(ev)
		}
		if measured {
			s.mu.Lock()
			s.changes++
			if create {
				s.creates++
			} else {
				s.updates++
			}
			s.late = append(s.late, now.Sub(sched))
			s.mu.Unlock()
		}
	}
}

// sleepCtx sleeps d, or less when ctx ends; it reports whether ctx is
// still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startCPUProfile starts this process's CPU profile into path; the
// function it returns stops it and closes the file.
func startCPUProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("CPU profile: %w", err)
		}
		return nil
	}, nil
}

// writeHeapProfile writes this process's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}

// logWriter writes the mirrors' and store's warnings as progress lines
// (nowhere when w is nil).
type logWriter struct{ w io.Writer }

func (l logWriter) Write(p []byte) (int, error) {
	logLine(l.w, "%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
