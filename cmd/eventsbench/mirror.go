package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// Initial sync modes of eventsd's --source-initial-sync that the
// benchmark compares.
const (
	syncWatchList = "watchlist"
	syncList      = "list"
)

// mirrorUser is the kube-apiserver user eventsd mirrors as, with only
// deploy/kustomize/mirror/rbac.yaml's ClusterRole (list and watch events), as a
// real set-up: its requests go through RBAC and priority and fairness
// like any workload's.
const mirrorUser = "eventsd-mirror"

// mirrorLagGoal is issue 20's goal for the steady state's lag p99.
const mirrorLagGoal = 250 * time.Millisecond

// mirrorBenchConfig configures "eventsbench mirror".
type mirrorBenchConfig struct {
	// Eventsd is the eventsd binary.
	Eventsd string
	// KubeAPIServer is a kube-apiserver binary, or kubeAPIServerBuilt.
	KubeAPIServer string
	// Out is the JSON report's path; none when empty.
	Out     string
	Quick   bool
	Command string

	// Events are filled into kube-apiserver before the syncs, by
	// FillClients client-go clients over Namespaces namespaces,
	// TargetCount of them about the pod the read benchmark lists.
	Events      int64
	FillClients int
	Namespaces  int
	TargetCount int64
	// Syncs are the --source-initial-sync modes measured, in order; the
	// eventsd of the last one stays for the read and steady phases.
	Syncs       []string
	SyncTimeout time.Duration
	// FillTimeout bounds the fill.
	FillTimeout time.Duration
	// SourceQPS and SourceBurst, when positive, are eventsd's
	// --source-qps and --source-burst (its defaults otherwise).
	SourceQPS   float64
	SourceBurst int

	// ReadClients list the target pod's events for ReadDuration after
	// ReadWarmup, through kube-apiserver and then through eventsd.
	ReadClients              int
	ReadDuration, ReadWarmup time.Duration

	// Rates are the steady states measured, each Rate writes/s (creates
	// and count updates, alternating) by Writers clients into
	// kube-apiserver for SteadyDuration after SteadyWarmup; then up to
	// Drain for the last ones to reach eventsd's watch.
	Rates                        []int
	Writers                      int
	SteadyDuration, SteadyWarmup time.Duration
	Drain                        time.Duration
	// ProfileDir, when set, receives CPU profiles of eventsd and
	// kube-apiserver over each steady state's measured interval and over
	// the first SyncProfile of each initial sync.
	ProfileDir  string
	SyncProfile time.Duration

	DataParent string
	KeepData   bool
	Timeout    time.Duration
	Log        io.Writer
}

// mirrorReport is what "eventsbench mirror" measured.
type mirrorReport struct {
	Command       string    `json:"command"`
	Eventsd       string    `json:"eventsd"`
	KubeAPIServer string    `json:"kube_apiserver"`
	Started       time.Time `json:"started"`
	ElapsedS      float64   `json:"elapsed_s"`
	Quick         bool      `json:"quick"`
	Machine       machine   `json:"machine"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg: other work on the
	// machine skews the figures.
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	// Fill is the fill of kube-apiserver; its server CPU is
	// kube-apiserver's.
	Fill   *fillResult     `json:"fill,omitempty"`
	Syncs  []*syncResult   `json:"syncs,omitempty"`
	Reads  *mirrorReads    `json:"reads,omitempty"`
	Steady []*steadyResult `json:"steady,omitempty"`
	Notes  []string        `json:"notes,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Profiles are the CPU profiles written (--profile-dir), by what
	// they cover.
	Profiles map[string]string `json:"profiles,omitempty"`
}

func (r *mirrorReport) addProfile(what, path string) {
	if r.Profiles == nil {
		r.Profiles = map[string]string{}
	}
	r.Profiles[what] = path
}

// syncResult is one initial sync: a fresh eventsd reading kube-apiserver's
// events.
type syncResult struct {
	Mode string `json:"mode"`
	// Events is what eventsd stored (eventsd_stored_events) at the end.
	Events int64 `json:"events"`
	// Seconds runs from eventsd's start to the first moment /readyz
	// answered 200 with every event stored; ReadyS to /readyz's first
	// 200 alone.
	Seconds float64 `json:"seconds"`
	ReadyS  float64 `json:"ready_s"`
	// CPU seconds spent meanwhile by kube-apiserver, its events etcd and
	// eventsd, and the machine's busy cores.
	KubeAPIServerCPUS float64 `json:"kube_apiserver_cpu_s"`
	EventsEtcdCPUS    float64 `json:"events_etcd_cpu_s"`
	EventsdCPUS       float64 `json:"eventsd_cpu_s"`
	MachineBusyCores  float64 `json:"machine_busy_cores"`
	// KubeAPIServerRSSBefore and KubeAPIServerRSSPeak are kube-apiserver's
	// RSS at the start and its highest sample (every 50 ms) during the
	// sync.
	KubeAPIServerRSSBefore int64 `json:"kube_apiserver_rss_before_bytes"`
	KubeAPIServerRSSPeak   int64 `json:"kube_apiserver_rss_peak_bytes"`
}

// mirrorReads compares listing one pod's events through kube-apiserver
// and through eventsd mirroring it.
type mirrorReads struct {
	KubeAPIServer *listLoadResult `json:"kube_apiserver"`
	Eventsd       *listLoadResult `json:"eventsd"`
	// Ratios are eventsd's over kube-apiserver's.
	RatioListsPerSec float64 `json:"ratio_lists_per_s"`
	RatioCPUPerList  float64 `json:"ratio_cpu_per_list,omitempty"`
}

// steadyResult is the lag of the mirror under a paced write load.
type steadyResult struct {
	TargetRate int     `json:"target_rate"`
	Writers    int     `json:"writers"`
	WarmupS    float64 `json:"warmup_s"`
	DurationS  float64 `json:"duration_s"`
	// Writes were scheduled in the measured interval and acknowledged by
	// kube-apiserver (Creates + Updates); AchievedPerSec counts the
	// acknowledgements within the interval.
	Writes         int64   `json:"writes"`
	Creates        int64   `json:"creates"`
	Updates        int64   `json:"updates"`
	AchievedPerSec float64 `json:"achieved_per_s"`
	// Unwritten are slots of the schedule not started before the
	// interval ended (kube-apiserver too slow for the rate).
	Unwritten int64 `json:"unwritten"`
	// WriteLatency is kube-apiserver's answer time; LateP99Ms how late
	// writes started against their schedule.
	WriteLatency latencies `json:"write_latency"`
	LateP99Ms    float64   `json:"late_p99_ms"`
	Errors       int64     `json:"errors"`
	FirstError   string    `json:"first_error,omitempty"`
	// KeptUp: kube-apiserver took at least 95% of the target rate.
	KeptUp bool `json:"kept_up"`
	// Lag is from each write's acknowledgement by kube-apiserver to the
	// arrival of that name and count on a watch of eventsd, for the
	// writes of the measured interval; Seen of them arrived within the
	// drain, Missing did not. Early counts arrivals before the
	// acknowledgement (lag 0).
	Seen    int64     `json:"seen"`
	Missing int64     `json:"missing"`
	Early   int64     `json:"early"`
	Lag     latencies `json:"lag"`
	// LagKubeAPIServer is the same to a watch of kube-apiserver itself
	// (the reference: what any watcher of the source sees), over the
	// SeenKubeAPIServer writes that arrived on it.
	LagKubeAPIServer  latencies `json:"lag_kube_apiserver"`
	SeenKubeAPIServer int64     `json:"seen_kube_apiserver"`
	// MirrorBacklogAge summarises eventsd_mirror_lag_seconds sampled
	// every 200 ms over the interval: how long the oldest change received
	// from kube-apiserver had been waiting to be applied to the store.
	MirrorBacklogAge     latencies `json:"mirror_backlog_age"`
	MirrorBacklogSamples int       `json:"mirror_backlog_samples"`
	// CPU over the measured interval, in cores.
	KubeAPIServerCores float64 `json:"kube_apiserver_cores"`
	EventsEtcdCores    float64 `json:"events_etcd_cores"`
	EventsdCores       float64 `json:"eventsd_cores"`
	GeneratorCores     float64 `json:"generator_cores"`
	MachineBusyCores   float64 `json:"machine_busy_cores"`
	// EventsdCPUMsPerChange is eventsd's CPU per write mirrored.
	EventsdCPUMsPerChange float64 `json:"eventsd_cpu_ms_per_change"`
}

func newMirrorCommand() *cobra.Command {
	cfg := mirrorBenchConfig{
		KubeAPIServer: kubeAPIServerBuilt, Events: 100_000, FillClients: 64, Namespaces: 10, TargetCount: 50,
		Syncs: []string{syncWatchList, syncList}, SyncTimeout: 10 * time.Minute, FillTimeout: 20 * time.Minute,
		ReadClients: 16, ReadDuration: 20 * time.Second, ReadWarmup: 10 * time.Second,
		Rates: []int{1000}, Writers: 64, SyncProfile: 20 * time.Second, SteadyDuration: 30 * time.Second, SteadyWarmup: 5 * time.Second, Drain: 30 * time.Second,
		Timeout: 45 * time.Minute, Log: os.Stderr,
	}
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Benchmark eventsd mirroring a real kube-apiserver: initial sync, lag under load, reads taken off kube-apiserver",
		Long: `mirror starts a real kube-apiserver (internal/kubeapiserver: its own etcd,
events in a second etcd, --event-ttl=24h, etcd compaction off) on loopback,
fills --events events into it with client-go (protobuf, --fill-clients
clients over --namespaces namespaces, --target-count about one pod), then:

1. initial sync: for each --syncs mode, a fresh eventsd with
   --source-kubeconfig (a user with only list and watch of events) and
   --source-initial-sync=MODE, timed from its start until /readyz answers 200
   with every event stored, with kube-apiserver's, its events etcd's and
   eventsd's CPU time meanwhile (/proc/PID/stat) and kube-apiserver's RSS;
2. reads: --read-clients clients listing the target pod's events with
   kubectl events --for's request (field selector involvedObject.kind,
   apiVersion and name, limit 500) through kube-apiserver, then through the
   last sync's eventsd: lists/s and server CPU per list (kube-apiserver plus
   its events etcd, against eventsd);
3. steady state: --rate writes/s into kube-apiserver (creates and count
   updates alternating, paced, --writers clients) for --steady-duration after
   --steady-warmup; the lag from each write's acknowledgement to that name
   and count arriving on a watch of eventsd, and on a watch of kube-apiserver
   itself (the reference), p50/p90/p99/max; eventsd_mirror_lag_seconds
   sampled; and the rate kube-apiserver took. Several --rate values measure
   one steady state each.

Everything runs on 127.0.0.1 and is stopped at the end.
--quick: 3,000 events, 200 writes/s for 3 s, reads for 2 s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if cfg.Quick {
				for name, set := range map[string]func(){
					"events":          func() { cfg.Events = 3000 },
					"fill-clients":    func() { cfg.FillClients = 16 },
					"rate":            func() { cfg.Rates = []int{200} },
					"sync-profile":    func() { cfg.SyncProfile = 2 * time.Second },
					"writers":         func() { cfg.Writers = 16 },
					"steady-duration": func() { cfg.SteadyDuration = 3 * time.Second },
					"steady-warmup":   func() { cfg.SteadyWarmup = time.Second },
					"read-duration":   func() { cfg.ReadDuration = 2 * time.Second },
					"read-warmup":     func() { cfg.ReadWarmup = 500 * time.Millisecond },
					"drain":           func() { cfg.Drain = 15 * time.Second },
				} {
					if !f.Changed(name) {
						set()
					}
				}
			}
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runMirrorBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printMirrorReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.KubeAPIServer, "kube-apiserver", cfg.KubeAPIServer, "A kube-apiserver binary, or \"built\" for internal/kubeapiserver's build of tools/kube-apiserver (go run ./cmd/devcluster --build-only).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.BoolVar(&cfg.Quick, "quick", false, "A small run: 3,000 events, 200 writes/s for 3 s, reads for 2 s.")
	f.Int64Var(&cfg.Events, "events", cfg.Events, "Events filled into kube-apiserver before the initial syncs.")
	f.IntVar(&cfg.FillClients, "fill-clients", cfg.FillClients, "Concurrent clients of the fill.")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Namespaces the events are spread over.")
	f.Int64Var(&cfg.TargetCount, "target-count", cfg.TargetCount, "Events about the pod the read benchmark lists.")
	f.StringSliceVar(&cfg.Syncs, "syncs", cfg.Syncs, "eventsd --source-initial-sync modes to time, in order (watchlist, list); the last one's eventsd serves the reads and the steady state.")
	f.DurationVar(&cfg.SyncTimeout, "sync-timeout", cfg.SyncTimeout, "Most time one initial sync may take.")
	f.DurationVar(&cfg.FillTimeout, "fill-timeout", cfg.FillTimeout, "Most time the fill of kube-apiserver may take.")
	f.Float64Var(&cfg.SourceQPS, "source-qps", 0, "eventsd's --source-qps (0: its default).")
	f.IntVar(&cfg.SourceBurst, "source-burst", 0, "eventsd's --source-burst (0: its default).")
	f.IntVar(&cfg.ReadClients, "read-clients", cfg.ReadClients, "Clients listing the target pod's events.")
	f.DurationVar(&cfg.ReadDuration, "read-duration", cfg.ReadDuration, "Measured interval of each read benchmark (--quick: 2s).")
	f.DurationVar(&cfg.ReadWarmup, "read-warmup", cfg.ReadWarmup, "Warmup before each read benchmark's interval (--quick: 500ms).")
	f.IntSliceVar(&cfg.Rates, "rate", cfg.Rates, "Writes per second into kube-apiserver in the steady state; several measure one steady state each, in order (--quick: 200).")
	f.IntVar(&cfg.Writers, "writers", cfg.Writers, "Concurrent writers of the steady state (--quick: 16).")
	f.DurationVar(&cfg.SteadyDuration, "steady-duration", cfg.SteadyDuration, "Measured interval of the steady state (--quick: 3s).")
	f.DurationVar(&cfg.SteadyWarmup, "steady-warmup", cfg.SteadyWarmup, "Paced writes before the measured interval (--quick: 1s).")
	f.DurationVar(&cfg.Drain, "drain", cfg.Drain, "Most wait after the writes for the last of them to reach eventsd (--quick: 15s).")
	f.StringVar(&cfg.ProfileDir, "profile-dir", "", "Write CPU profiles of eventsd (run with --profiling) and kube-apiserver here: over each steady state's measured interval, and over the first --sync-profile of each initial sync.")
	f.DurationVar(&cfg.SyncProfile, "sync-profile", cfg.SyncProfile, "Length of the initial syncs' profiles with --profile-dir (--quick: 2s).")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir).")
	f.BoolVar(&cfg.KeepData, "keep-data", false, "Keep the data directories.")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

func (cfg *mirrorBenchConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

func (cfg *mirrorBenchConfig) validate() error {
	switch {
	case cfg.Eventsd == "":
		return errors.New("--eventsd is required")
	case cfg.Events < 1 || cfg.FillClients < 1 || cfg.Namespaces < 1:
		return errors.New("--events, --fill-clients and --namespaces must be at least 1")
	case cfg.TargetCount < 1 || cfg.TargetCount > cfg.Events || cfg.TargetCount > 500:
		return errors.New("--target-count must be between 1 and --events, and at most 500 (one page of kubectl's list)")
	case len(cfg.Syncs) == 0:
		return errors.New("--syncs needs at least one mode")
	case cfg.ReadClients < 1 || cfg.ReadDuration <= 0 || cfg.ReadWarmup < 0:
		return errors.New("--read-clients must be at least 1 and --read-duration positive")
	case len(cfg.Rates) == 0 || slices.Min(cfg.Rates) < 1 || cfg.Writers < 1 || cfg.SteadyDuration <= 0 || cfg.SteadyWarmup < 0 || cfg.Drain <= 0:
		return errors.New("--rate (each) and --writers must be at least 1, --steady-duration and --drain positive")
	case cfg.ProfileDir != "" && cfg.SyncProfile < time.Second:
		return errors.New("--sync-profile must be at least 1s")
	case cfg.SyncTimeout <= 0 || cfg.FillTimeout <= 0 || cfg.Timeout <= 0:
		return errors.New("--sync-timeout, --fill-timeout and --timeout must be positive")
	}
	for _, m := range cfg.Syncs {
		if m != syncWatchList && m != syncList {
			return fmt.Errorf("--syncs: %q is neither %s nor %s", m, syncWatchList, syncList)
		}
	}
	return nil
}

// runMirrorBench runs the three phases. The report it returns (also with
// an error) holds what was measured until then.
func runMirrorBench(ctx context.Context, cfg mirrorBenchConfig) (rep *mirrorReport, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	eventsd, err := eventsdBinary(cfg.Eventsd)
	if err != nil {
		return nil, err
	}
	if cfg.KubeAPIServer != kubeAPIServerBuilt {
		if cfg.KubeAPIServer, err = filepath.Abs(cfg.KubeAPIServer); err != nil {
			return nil, err
		}
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	parent, err := os.MkdirTemp(cfg.DataParent, "eventsbench-mirror-")
	if err != nil {
		return nil, err
	}
	if !cfg.KeepData {
		defer os.RemoveAll(parent)
	}
	started := time.Now()
	rep = &mirrorReport{
		Command: cfg.Command, Eventsd: eventsd, Started: started, Quick: cfg.Quick,
		Machine: machineInfo(parent), LoadAvgStart: loadAvg(),
		Settings: map[string]any{
			"events": cfg.Events, "fill_clients": cfg.FillClients, "namespaces": cfg.Namespaces, "target_count": cfg.TargetCount,
			"syncs": cfg.Syncs, "source_qps": cfg.SourceQPS, "source_burst": cfg.SourceBurst,
			"read_clients": cfg.ReadClients, "read_duration_s": cfg.ReadDuration.Seconds(), "read_warmup_s": cfg.ReadWarmup.Seconds(),
			"rates": cfg.Rates, "writers": cfg.Writers, "steady_duration_s": cfg.SteadyDuration.Seconds(), "steady_warmup_s": cfg.SteadyWarmup.Seconds(),
			"data_parent": parent,
		},
	}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		if err != nil {
			rep.Error = err.Error()
		}
	}()

	opts := kubeAPIServerOptions(cfg.KubeAPIServer, filepath.Join(parent, "kube-apiserver"))
	opts.SeparateEventsEtcd = true
	opts.EventTTL = 24 * time.Hour
	opts.EtcdCompactionInterval = -1
	opts.Users = []kubeapiserver.User{{Name: mirrorUser}}
	cfg.logf("starting kube-apiserver")
	kas, err := kubeapiserver.Launch(ctx, opts)
	if err != nil {
		return rep, fmt.Errorf("kube-apiserver: %w", err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, kas.LogTails(20))
		}
		err = errors.Join(err, kas.Close())
	}()
	rep.KubeAPIServer = fmt.Sprintf("%s (%s)", homeRelative(kas.BinaryPath()), kas.Version())
	rep.Settings["kube_apiserver_flags"] = "internal/kubeapiserver's set-up (HTTPS with its own CA, token authentication, RBAC, service-account keys, --endpoint-reconciler-type=none)" +
		" with events in an etcd of their own (--etcd-servers-overrides=/events#...), --event-ttl=24h, --etcd-compaction-interval=0; otherwise kube-apiserver's defaults"
	rep.Settings["eventsd_args"] = "--event-ttl=24h --source-kubeconfig <user " + mirrorUser + ": list and watch events only> --source-initial-sync=MODE" + cfg.sourceArgsText()
	eventsEtcdPID := kas.EtcdPIDs()[1]
	cfg.logf("kube-apiserver %s at %s (pid %d), events etcd %s (pid %d)", kas.Version(), kas.URL(), kas.PID(), kas.EventsEtcdEndpoint(), eventsEtcdPID)
	if err := setUpMirrorSource(ctx, kas, cfg.Namespaces); err != nil {
		return rep, err
	}

	// Fill.
	fc := fillConfig{
		Total: cfg.Events, Clients: cfg.FillClients, Namespaces: cfg.Namespaces,
		Namespace: namespaceName(0), TargetPod: "target-pod", TargetCount: cfg.TargetCount, PerPod: 50, PodPrefix: "fill-pod",
		PID: kas.PID(), Progress: cfg.Log, ProgressEvery: 15 * time.Second,
		NewCreator: func() (createFunc, error) {
			cs, err := newClientsetAuth(kas.URL(), wireProtobuf, kas.AdminToken(), nil)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, ev *corev1.Event) error {
				_, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
				return err
			}, nil
		},
	}
	cfg.logf("fill: %d events into kube-apiserver (%d about %s/%s), %d clients", fc.Total, fc.TargetCount, fc.Namespace, fc.TargetPod, fc.Clients)
	fillCtx, cancelFill := context.WithTimeout(ctx, cfg.FillTimeout)
	rep.Fill, err = runFill(fillCtx, fc)
	cancelFill()
	if err != nil {
		return rep, fmt.Errorf("filling kube-apiserver: %w", err)
	}
	cfg.logf("  %.0f creates/s, kube-apiserver CPU %s ms/event", rep.Fill.PerSec, fmtPtr(rep.Fill.ServerCPUMsPerEvent, 3))

	// Initial syncs; the last eventsd stays.
	var ev *child
	defer func() {
		if ev != nil {
			err = errors.Join(err, ev.stop())
		}
	}()
	for i, mode := range cfg.Syncs {
		if ev != nil {
			if err := ev.stop(); err != nil {
				return rep, err
			}
			ev = nil
		}
		var res *syncResult
		ev, res, err = cfg.initialSync(ctx, rep, kas, eventsEtcdPID, eventsd, mode, filepath.Join(parent, fmt.Sprintf("eventsd-%d-%s", i, mode)))
		if res != nil {
			rep.Syncs = append(rep.Syncs, res)
		}
		if err != nil {
			return rep, fmt.Errorf("initial sync (%s): %w", mode, err)
		}
		cfg.logf("  %s: %d events in %.2f s (ready at %.2f s); CPU: kube-apiserver %.2f s, events etcd %.2f s, eventsd %.2f s; kube-apiserver RSS %s -> peak %s",
			mode, res.Events, res.Seconds, res.ReadyS, res.KubeAPIServerCPUS, res.EventsEtcdCPUS, res.EventsdCPUS, mib(res.KubeAPIServerRSSBefore), mib(res.KubeAPIServerRSSPeak))
	}

	// Reads, with exactly the filled events stored.
	if rep.Reads, err = cfg.reads(ctx, kas, eventsEtcdPID, ev); err != nil {
		return rep, err
	}

	// Steady states.
	for _, rate := range cfg.Rates {
		res, profiles, err := cfg.steady(ctx, kas, eventsEtcdPID, ev, rate)
		if res != nil {
			rep.Steady = append(rep.Steady, res)
		}
		for k, v := range profiles {
			rep.addProfile(k, v)
		}
		if err != nil {
			return rep, fmt.Errorf("steady state at %d writes/s: %w", rate, err)
		}
	}
	if m, merr := ev.scrapeMetrics(ctx); merr == nil {
		for _, k := range []string{"eventsd_mirror_changes_dropped_total", "eventsd_mirror_reconnects_total"} {
			if v := m[k]; v > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("eventsd's %s is %v", k, v))
			}
		}
	}
	return rep, nil
}

// sourceArgs are eventsd's --source-qps and --source-burst when set.
func (cfg *mirrorBenchConfig) sourceArgs() []string {
	var a []string
	if cfg.SourceQPS > 0 {
		a = append(a, "--source-qps", strconv.FormatFloat(cfg.SourceQPS, 'f', -1, 64))
	}
	if cfg.SourceBurst > 0 {
		a = append(a, "--source-burst", strconv.Itoa(cfg.SourceBurst))
	}
	return a
}

func (cfg *mirrorBenchConfig) sourceArgsText() string {
	if a := cfg.sourceArgs(); len(a) > 0 {
		return " " + shellJoin(a)
	}
	return " (--source-qps and --source-burst at their defaults)"
}

// setUpMirrorSource creates the benchmark's namespaces and gives the
// mirror's user deploy/kustomize/mirror/rbac.yaml's ClusterRole: list and watch of
// core events.
func setUpMirrorSource(ctx context.Context, kas *kubeapiserver.Cluster, namespaces int) error {
	if err := kas.EnsureNamespace(ctx, namespaceNames(namespaces)...); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(kas.RESTConfig())
	if err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "eventsd-mirror"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube-apiserver: the mirror's ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "eventsd-mirror"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eventsd-mirror"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: mirrorUser}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube-apiserver: the mirror's ClusterRoleBinding: %w", err)
	}
	return nil
}

// initialSync starts a fresh eventsd mirroring kas with
// --source-initial-sync=mode and waits until it is ready with every
// event stored, measuring the time and the servers' CPU.
func (cfg *mirrorBenchConfig) initialSync(ctx context.Context, rep *mirrorReport, kas *kubeapiserver.Cluster, eventsEtcdPID int, bin, mode, dataDir string) (*child, *syncResult, error) {
	args := append([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--event-ttl", "24h",
		"--source-kubeconfig", kas.Kubeconfig(), "--source-context", mirrorUser, "--source-initial-sync", mode}, cfg.sourceArgs()...)
	if cfg.ProfileDir != "" {
		args = append(args, "--profiling")
	}
	res := &syncResult{Mode: mode}
	var err error
	if res.KubeAPIServerRSSBefore, err = procStatus(kas.PID(), "VmRSS"); err != nil {
		return nil, nil, err
	}
	res.KubeAPIServerRSSPeak = res.KubeAPIServerRSSBefore
	kas0, err1 := procCPU(kas.PID())
	etcd0, err2 := procCPU(eventsEtcdPID)
	busy0, err3 := machineCPU()
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, nil, err
	}
	cfg.logf("initial sync (%s): a fresh eventsd mirroring kube-apiserver", mode)
	t0 := time.Now()
	ev, err := startChildWithin(ctx, cfg.SyncTimeout, "eventsd (mirror, "+mode+")", bin, args, eventsdURLRE, "http", "")
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = ev.stop()
		}
	}()
	var profWG sync.WaitGroup
	defer profWG.Wait()
	if cfg.ProfileDir != "" {
		profiles := map[string]string{
			fmt.Sprintf("eventsd, first %s of the %s sync", cfg.SyncProfile, mode):        filepath.Join(cfg.ProfileDir, "eventsd.sync-"+mode+".pprof"),
			fmt.Sprintf("kube-apiserver, first %s of the %s sync", cfg.SyncProfile, mode): filepath.Join(cfg.ProfileDir, "kube-apiserver.sync-"+mode+".pprof"),
		}
		profWG.Go(func() {
			if err := cfg.profileBoth(ctx, kas, ev, int(cfg.SyncProfile/time.Second), profiles); err != nil {
				cfg.logf("profiling the %s sync: %v", mode, err)
				return
			}
			for k, v := range profiles {
				rep.addProfile(k, v)
			}
		})
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := t0.Add(cfg.SyncTimeout)
	var readyAt time.Time
	var lastErr string
	for {
		if rss, err := procStatus(kas.PID(), "VmRSS"); err == nil && rss > res.KubeAPIServerRSSPeak {
			res.KubeAPIServerRSSPeak = rss
		}
		resp, err := hc.Get(ev.URL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				now := time.Now()
				if readyAt.IsZero() {
					readyAt = now
				}
				m, err := ev.scrapeMetrics(ctx)
				if err != nil {
					return ev, res, err
				}
				res.Events = int64(m["eventsd_stored_events"])
				if res.Events >= cfg.Events {
					res.Seconds = round3(now.Sub(t0).Seconds())
					res.ReadyS = round3(readyAt.Sub(t0).Seconds())
					break
				}
				lastErr = fmt.Sprintf("ready with %d of %d events stored", res.Events, cfg.Events)
			} else {
				lastErr = fmt.Sprintf("/readyz: %s %s", resp.Status, body)
			}
		} else {
			lastErr = err.Error()
		}
		if err := ev.exited(); err != nil {
			return nil, res, err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return ev, res, fmt.Errorf("not done within %s (%v): %s", cfg.SyncTimeout, ctx.Err(), lastErr)
		}
		sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
	}
	kas1, err1 := procCPU(kas.PID())
	etcd1, err2 := procCPU(eventsEtcdPID)
	busy1, err3 := machineCPU()
	ev1, err4 := procCPU(ev.pid())
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return ev, res, err
	}
	res.KubeAPIServerCPUS = round3((kas1 - kas0).Seconds())
	res.EventsEtcdCPUS = round3((etcd1 - etcd0).Seconds())
	res.EventsdCPUS = round3(ev1.Seconds())
	res.MachineBusyCores = round3((busy1 - busy0).Seconds() / res.Seconds)
	if res.Events != cfg.Events {
		return ev, res, fmt.Errorf("eventsd stored %d events, kube-apiserver has %d", res.Events, cfg.Events)
	}
	ok = true
	return ev, res, nil
}

// reads runs the read benchmark through kube-apiserver, then through
// eventsd.
func (cfg *mirrorBenchConfig) reads(ctx context.Context, kas *kubeapiserver.Cluster, eventsEtcdPID int, ev *child) (*mirrorReads, error) {
	base := listLoadConfig{Clients: cfg.ReadClients, Duration: cfg.ReadDuration, Warmup: cfg.ReadWarmup,
		Namespace: namespaceName(0), Pod: "target-pod", WantItems: int(cfg.TargetCount), Limit: 500}
	r := &mirrorReads{}
	ka := base
	ka.Servers, ka.Token, ka.PIDs = []string{kas.URL()}, kas.AdminToken(), []int{kas.PID(), eventsEtcdPID}
	cfg.logf("reads: %d clients listing %s/target-pod's events through kube-apiserver for %s after %s", cfg.ReadClients, base.Namespace, cfg.ReadDuration, cfg.ReadWarmup)
	var err error
	if r.KubeAPIServer, err = runListLoad(ctx, ka); err != nil {
		return r, fmt.Errorf("reads through kube-apiserver: %w", err)
	}
	cfg.logf("  %.1f lists/s, p50 %.1f ms, p99 %.1f ms, kube-apiserver+etcd CPU %s ms/list, %d errors", r.KubeAPIServer.ListsPerSec,
		r.KubeAPIServer.P50Ms, r.KubeAPIServer.P99Ms, fmtPtr(r.KubeAPIServer.ServerCPUMsPerList, 2), r.KubeAPIServer.Errors)
	ed := base
	ed.Servers, ed.PIDs = []string{ev.URL}, []int{ev.pid()}
	cfg.logf("reads: the same through eventsd")
	if r.Eventsd, err = runListLoad(ctx, ed); err != nil {
		return r, fmt.Errorf("reads through eventsd: %w", err)
	}
	cfg.logf("  %.1f lists/s, p50 %.2f ms, p99 %.2f ms, eventsd CPU %s ms/list, %d errors", r.Eventsd.ListsPerSec,
		r.Eventsd.P50Ms, r.Eventsd.P99Ms, fmtPtr(r.Eventsd.ServerCPUMsPerList, 3), r.Eventsd.Errors)
	r.RatioListsPerSec = ratio(r.Eventsd.ListsPerSec, r.KubeAPIServer.ListsPerSec)
	if a, b := r.Eventsd.ServerCPUMsPerList, r.KubeAPIServer.ServerCPUMsPerList; a != nil && b != nil {
		r.RatioCPUPerList = ratio(*a, *b)
	}
	if r.KubeAPIServer.Errors > 0 || r.Eventsd.Errors > 0 {
		return r, fmt.Errorf("failed lists: kube-apiserver %d (%s), eventsd %d (%s)", r.KubeAPIServer.Errors, r.KubeAPIServer.FirstError, r.Eventsd.Errors, r.Eventsd.FirstError)
	}
	return r, nil
}

// steadyWrite is one write of the steady state.
type steadyWrite struct {
	key       string
	scheduled time.Time
	started   time.Time
	acked     time.Time
	create    bool
}

// steadyEvent is an event a writer created and updates.
type steadyEvent struct {
	ns, name string
	count    int32
}

// watchArrivals records when each name and count first arrives on a
// watch of every namespace's events of cs, from now (resuming across
// disconnects, as client-go's RetryWatcher does); stop ends the watch.
func watchArrivals(ctx context.Context, cs kubernetes.Interface) (seen *arrivals, stop func(), err error) {
	l, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	rw, err := watchtools.NewRetryWatcherWithContext(wctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Events("").Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	seen = newArrivals()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range rw.ResultChan() {
			if o, ok := e.Object.(*corev1.Event); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
				seen.observe([]string{steadyKey(o.Namespace, o.Name, o.Count)})
			}
		}
	}()
	return seen, func() { rw.Stop(); cancel(); <-done }, nil
}

// steady writes into kube-apiserver at rate and measures when each write
// arrives on a watch of eventsd, and on a watch of kube-apiserver itself
// (the reference: no mirror can see a change sooner).
func (cfg *mirrorBenchConfig) steady(ctx context.Context, kas *kubeapiserver.Cluster, eventsEtcdPID int, ev *child, rate int) (*steadyResult, map[string]string, error) {
	ecs, err := newClientsetAuth(ev.URL, wireProtobuf, "", nil)
	if err != nil {
		return nil, nil, err
	}
	seen, stopWatch, err := watchArrivals(ctx, ecs)
	if err != nil {
		return nil, nil, fmt.Errorf("watching eventsd: %w", err)
	}
	defer stopWatch()
	kcs, err := newClientsetAuth(kas.URL(), wireProtobuf, kas.AdminToken(), nil)
	if err != nil {
		return nil, nil, err
	}
	seenKAS, stopKASWatch, err := watchArrivals(ctx, kcs)
	if err != nil {
		return nil, nil, fmt.Errorf("watching kube-apiserver: %w", err)
	}
	defer stopKASWatch()

	cfg.logf("steady: %d writes/s into kube-apiserver by %d writers for %s after %s", rate, cfg.Writers, cfg.SteadyDuration, cfg.SteadyWarmup)
	res := &steadyResult{TargetRate: rate, Writers: cfg.Writers, WarmupS: cfg.SteadyWarmup.Seconds(), DurationS: cfg.SteadyDuration.Seconds()}
	period := time.Second / time.Duration(rate)
	start := time.Now().Add(100 * time.Millisecond)
	mStart, mEnd := start.Add(cfg.SteadyWarmup), start.Add(cfg.SteadyWarmup+cfg.SteadyDuration)
	slots := int64(rate) * int64((cfg.SteadyWarmup+cfg.SteadyDuration)/time.Millisecond) / 1000
	var next, errCount atomic.Int64
	var firstErr error
	var errOnce sync.Once
	writes := make([][]steadyWrite, cfg.Writers)
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		cs, err := newClientsetAuth(kas.URL(), wireProtobuf, kas.AdminToken(), nil)
		if err != nil {
			return nil, nil, err
		}
		p := newPod(namespaceName(w%cfg.Namespaces), fmt.Sprintf("steady%d-pod-%d", rate, w))
		wg.Go(func() {
			var ring []*steadyEvent
			create, upd := true, 0
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= slots {
					return
				}
				sched := start.Add(time.Duration(i) * period)
				sleepUntil(ctx, sched)
				t0 := time.Now()
				if !t0.Before(mEnd) {
					return // too late: the interval is over
				}
				var key string
				var err error
				isCreate := create || len(ring) == 0
				if isCreate {
					e := newEvent(p, int(i))
					_, err = cs.CoreV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
					key = steadyKey(e.Namespace, e.Name, 1)
					if err == nil {
						ring = append(ring, &steadyEvent{ns: e.Namespace, name: e.Name, count: 1})
						if len(ring) > 8 {
							ring = ring[1:]
						}
					}
				} else {
					se := ring[upd%len(ring)]
					upd++
					body := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, se.count+1, time.Now().UTC().Format(time.RFC3339))
					_, err = cs.CoreV1().Events(se.ns).Patch(ctx, se.name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
					key = steadyKey(se.ns, se.name, se.count+1)
					if err == nil {
						se.count++
					}
				}
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errCount.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				writes[w] = append(writes[w], steadyWrite{key: key, scheduled: sched, started: t0, acked: t1, create: isCreate})
				create = !isCreate
			}
		})
	}

	// CPU over the measured interval, and the profiles.
	pids := []int{kas.PID(), eventsEtcdPID, ev.pid(), 0}
	sample := func() ([]time.Duration, time.Duration, error) {
		out := make([]time.Duration, len(pids))
		var errs []error
		for i, pid := range pids {
			var err error
			out[i], err = procCPU(pid)
			errs = append(errs, err)
		}
		busy, err := machineCPU()
		return out, busy, errors.Join(append(errs, err)...)
	}
	sleepUntil(ctx, mStart)
	cpu0, busy0, cerr0 := sample()
	var profiles map[string]string
	var profWG sync.WaitGroup
	var profErr error
	if cfg.ProfileDir != "" {
		profiles = map[string]string{
			fmt.Sprintf("eventsd, steady state at %d/s", rate):        filepath.Join(cfg.ProfileDir, fmt.Sprintf("eventsd.steady-%d.pprof", rate)),
			fmt.Sprintf("kube-apiserver, steady state at %d/s", rate): filepath.Join(cfg.ProfileDir, fmt.Sprintf("kube-apiserver.steady-%d.pprof", rate)),
		}
		secs := int(cfg.SteadyDuration / time.Second)
		profWG.Go(func() {
			profErr = cfg.profileBoth(ctx, kas, ev, secs, profiles)
		})
	}
	// The mirror's own view: eventsd_mirror_lag_seconds, the age of the
	// oldest change received from kube-apiserver and not yet applied.
	var backlog []time.Duration
	for now := time.Now(); now.Before(mEnd) && ctx.Err() == nil; now = time.Now() {
		if m, err := ev.scrapeMetrics(ctx); err == nil {
			backlog = append(backlog, time.Duration(m["eventsd_mirror_lag_seconds"]*float64(time.Second)))
		}
		sleepUntil(ctx, minTime(now.Add(backlogSampleEvery), mEnd))
	}
	cpu1, busy1, cerr1 := sample()
	res.MirrorBacklogAge = summarize(backlog)
	res.MirrorBacklogSamples = len(backlog)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := errors.Join(cerr0, cerr1); err != nil {
		return nil, nil, fmt.Errorf("reading CPU times: %w", err)
	}
	d := cfg.SteadyDuration.Seconds()
	res.KubeAPIServerCores = round3((cpu1[0] - cpu0[0]).Seconds() / d)
	res.EventsEtcdCores = round3((cpu1[1] - cpu0[1]).Seconds() / d)
	res.EventsdCores = round3((cpu1[2] - cpu0[2]).Seconds() / d)
	res.GeneratorCores = round3((cpu1[3] - cpu0[3]).Seconds() / d)
	res.MachineBusyCores = round3((busy1 - busy0).Seconds() / d)
	res.Errors = errCount.Load()
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	if n := next.Load(); n < slots {
		res.Unwritten = slots - n
	}

	// The measured writes, and their arrival on eventsd's watch.
	var measured []steadyWrite
	var inWindow int64
	for _, ws := range writes {
		for _, w := range ws {
			if !w.acked.Before(mStart) && w.acked.Before(mEnd) {
				inWindow++
			}
			if !w.scheduled.Before(mStart) {
				measured = append(measured, w)
			}
		}
	}
	res.AchievedPerSec = round3(float64(inWindow) / d)
	res.KeptUp = res.AchievedPerSec >= 0.95*float64(rate)
	cfg.logf("steady: %d writes scheduled in the interval, %.0f/s acknowledged in it; waiting up to %s for them on eventsd's watch", len(measured), res.AchievedPerSec, cfg.Drain)
	drainEnd := time.Now().Add(cfg.Drain)
	for {
		missing := 0
		for _, w := range measured {
			if _, ok := seen.get(w.key); !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(drainEnd) || ctx.Err() != nil {
			break
		}
		sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
	}
	profWG.Wait()
	lags := make([]time.Duration, 0, len(measured))
	refLags := make([]time.Duration, 0, len(measured))
	writeLat := make([]time.Duration, 0, len(measured))
	late := make([]time.Duration, 0, len(measured))
	for _, w := range measured {
		res.Writes++
		if w.create {
			res.Creates++
		} else {
			res.Updates++
		}
		writeLat = append(writeLat, w.acked.Sub(w.started))
		late = append(late, w.started.Sub(w.scheduled))
		if at, ok := seenKAS.get(w.key); ok {
			res.SeenKubeAPIServer++
			refLags = append(refLags, max(at.Sub(w.acked), 0))
		}
		at, ok := seen.get(w.key)
		if !ok {
			res.Missing++
			continue
		}
		res.Seen++
		lag := at.Sub(w.acked)
		if lag < 0 {
			res.Early++
			lag = 0
		}
		lags = append(lags, lag)
	}
	res.Lag = summarize(lags)
	res.LagKubeAPIServer = summarize(refLags)
	res.WriteLatency = summarize(writeLat)
	res.LateP99Ms = summarize(late).P99Ms
	if res.Writes > 0 {
		res.EventsdCPUMsPerChange = round3(ms(cpu1[2]-cpu0[2]) / float64(res.Writes))
	}
	cfg.logf("  lag p50 %.1f ms, p99 %.1f ms, max %.1f ms (kube-apiserver's own watch: p50 %.1f ms, p99 %.1f ms; mirror backlog age p99 %.0f ms); %d of %d seen; CPU cores: kube-apiserver %.2f, events etcd %.2f, eventsd %.2f, generator %.2f, machine %.2f",
		res.Lag.P50Ms, res.Lag.P99Ms, res.Lag.MaxMs, res.LagKubeAPIServer.P50Ms, res.LagKubeAPIServer.P99Ms, res.MirrorBacklogAge.P99Ms, res.Seen, res.Writes, res.KubeAPIServerCores, res.EventsEtcdCores, res.EventsdCores, res.GeneratorCores, res.MachineBusyCores)
	if profErr != nil {
		return res, profiles, fmt.Errorf("profiles: %w", profErr)
	}
	if res.Writes == 0 {
		return res, profiles, fmt.Errorf("no write acknowledged in the interval (%d errors: %s)", res.Errors, res.FirstError)
	}
	if res.Missing > 0 {
		return res, profiles, fmt.Errorf("%d of %d writes acknowledged by kube-apiserver never reached eventsd's watch within %s", res.Missing, res.Writes, cfg.Drain)
	}
	return res, profiles, nil
}

// backlogSampleEvery spaces the samples of eventsd_mirror_lag_seconds.
const backlogSampleEvery = 200 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// steadyKey names one state of an event: its name and count.
func steadyKey(ns, name string, count int32) string {
	return ns + "/" + name + "#" + strconv.Itoa(int(count))
}

// fetchProfile writes a CPU profile of secs seconds from server's
// /debug/pprof/profile to path (bearer token and CA for kube-apiserver).
func fetchProfile(ctx context.Context, server, token string, ca []byte, secs int, path string) error {
	hc := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
	if ca != nil {
		tr, err := caTransport(ca)
		if err != nil {
			return err
		}
		hc.Transport = tr
	}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", server, max(secs, 1)), nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("%s profile: %s %s", server, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileBoth writes CPU profiles of secs seconds of eventsd and
// kube-apiserver at once, to the paths of profiles whose keys start with
// "eventsd" and "kube-apiserver".
func (cfg *mirrorBenchConfig) profileBoth(ctx context.Context, kas *kubeapiserver.Cluster, ev *child, secs int, profiles map[string]string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(profiles))
	i := 0
	for what, path := range profiles {
		idx := i
		i++
		wg.Go(func() {
			if strings.HasPrefix(what, "kube-apiserver") {
				errs[idx] = fetchProfile(ctx, kas.URL(), kas.AdminToken(), kas.CA(), secs, path)
			} else {
				errs[idx] = fetchProfile(ctx, ev.URL, "", nil, secs, path)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// caTransport is an HTTP transport trusting only ca (PEM).
func caTransport(ca []byte) (*http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no certificate in the CA PEM")
	}
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, nil
}

// printMirrorReport writes rep as markdown.
func printMirrorReport(w io.Writer, rep *mirrorReport) {
	m := rep.Machine
	fmt.Fprintf(w, "## Mirror: eventsd following a real kube-apiserver\n\n")
	fmt.Fprintf(w, "- Machine: %d CPUs (nproc), %s, Linux %s, %.1f GiB RAM; data dirs on %s\n",
		m.NProc, m.CPUModel, m.Kernel, float64(m.MemTotal)/(1<<30), m.DataFS)
	fmt.Fprintf(w, "- Command: `%s`\n", rep.Command)
	fmt.Fprintf(w, "- kube-apiserver: `%s`, %v\n", rep.KubeAPIServer, rep.Settings["kube_apiserver_flags"])
	fmt.Fprintf(w, "- eventsd: `%s` %v\n", rep.Eventsd, rep.Settings["eventsd_args"])
	fmt.Fprintf(w, "- Started %s, took %s; load average %s at the start, %s at the end\n", rep.Started.Format(time.RFC3339),
		time.Duration(rep.ElapsedS*float64(time.Second)).Round(time.Second), rep.LoadAvgStart, rep.LoadAvgEnd)
	if rep.Error != "" {
		fmt.Fprintf(w, "- **Run failed**: %s\n", firstLine(rep.Error))
	}
	if f := rep.Fill; f != nil {
		fmt.Fprintf(w, "- Fill: %d events into kube-apiserver (%d about one pod, %d pods over %v namespaces) by %d client-go clients (protobuf) at %.0f creates/s, kube-apiserver CPU %s ms/create\n",
			f.Created, f.TargetCount, f.Pods+1, rep.Settings["namespaces"], f.Clients, f.PerSec, fmtPtr(f.ServerCPUMsPerEvent, 3))
	}
	if len(rep.Syncs) > 0 {
		fmt.Fprintf(w, "\n### Initial sync of %v events: a fresh eventsd until /readyz passes with every event stored\n\n", rep.Settings["events"])
		fmt.Fprintln(w, "| --source-initial-sync | seconds | events/s | kube-apiserver CPU s | events etcd CPU s | eventsd CPU s | machine busy cores | kube-apiserver RSS before | peak |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range rep.Syncs {
			rate := 0.0
			if s.Seconds > 0 {
				rate = float64(s.Events) / s.Seconds
			}
			fmt.Fprintf(w, "| %s | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", s.Mode, s.Seconds, rate, s.KubeAPIServerCPUS, s.EventsEtcdCPUS,
				s.EventsdCPUS, s.MachineBusyCores, mib(s.KubeAPIServerRSSBefore), mib(s.KubeAPIServerRSSPeak))
		}
	}
	if r := rep.Reads; r != nil && r.KubeAPIServer != nil {
		fmt.Fprintf(w, "\n### Reads: %d clients listing one pod's %v events (kubectl events --for's request) among %v (%vs measured after %vs warmup)\n\n",
			r.KubeAPIServer.Clients, rep.Settings["target_count"], rep.Settings["events"], rep.Settings["read_duration_s"], rep.Settings["read_warmup_s"])
		fmt.Fprintln(w, "| through | lists/s | p50 ms | p90 ms | p99 ms | server CPU ms/list | server cores | client CPU ms/list | machine busy cores | errors |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, row := range []struct {
			name string
			l    *listLoadResult
		}{{"kube-apiserver (+ its events etcd)", r.KubeAPIServer}, {"eventsd (mirroring it)", r.Eventsd}} {
			if l := row.l; l != nil {
				fmt.Fprintf(w, "| %s | %.1f | %.2f | %.2f | %.2f | %s | %s | %.3f | %.2f | %d |\n", row.name, l.ListsPerSec, l.P50Ms, l.P90Ms, l.P99Ms,
					fmtPtr(l.ServerCPUMsPerList, 3), fmtPtr(l.ServerCPUCores, 2), l.ClientCPUMsPerList, l.MachineBusyCores, l.Errors)
			}
		}
		if r.Eventsd != nil {
			fmt.Fprintf(w, "| **eventsd / kube-apiserver** | **%.1fx** | | | | **%.4f** | | | | |\n", r.RatioListsPerSec, r.RatioCPUPerList)
		}
	}
	if len(rep.Steady) > 0 {
		s0 := rep.Steady[0]
		fmt.Fprintf(w, "\n### Steady state: paced writes into kube-apiserver (creates and count updates alternating, %d writers), %gs measured after %gs\n\n",
			s0.Writers, s0.DurationS, s0.WarmupS)
		fmt.Fprintln(w, "Lag: from kube-apiserver's answer to a write to that event's name and count arriving on a watch of eventsd; the reference is the same to a watch of kube-apiserver itself, in the same run.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target writes/s | achieved/s | kept up | writes (creates + updates) | write p50 / p99 ms | lag to eventsd p50 | p90 | p99 | max ms | lag to kube-apiserver's watch p50 | p90 | p99 | max ms | seen on eventsd / on kube-apiserver | goal p99 <= 250 ms |")
		fmt.Fprintln(w, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
		for _, s := range rep.Steady {
			fmt.Fprintf(w, "| %d | %.0f | %v | %d (%d + %d) | %.1f / %.1f | %.1f | %.1f | **%.1f** | %.1f | %.1f | %.1f | %.1f | %.1f | %d / %d of %d | %s |\n",
				s.TargetRate, s.AchievedPerSec, s.KeptUp, s.Writes, s.Creates, s.Updates, s.WriteLatency.P50Ms, s.WriteLatency.P99Ms,
				s.Lag.P50Ms, s.Lag.P90Ms, s.Lag.P99Ms, s.Lag.MaxMs, s.LagKubeAPIServer.P50Ms, s.LagKubeAPIServer.P90Ms, s.LagKubeAPIServer.P99Ms, s.LagKubeAPIServer.MaxMs,
				s.Seen, s.SeenKubeAPIServer, s.Writes, metOrNot(s.Lag.P99Ms <= float64(mirrorLagGoal/time.Millisecond) && s.Missing == 0))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target writes/s | mirror backlog age p50 / p99 / max ms | kube-apiserver cores | events etcd cores | eventsd cores | eventsd CPU ms/change | load generator cores | machine busy cores | writes not started (source behind) | start late p99 ms | arrivals before the answer | failed writes |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range rep.Steady {
			fmt.Fprintf(w, "| %d | %.0f / %.0f / %.0f | %.2f | %.2f | %.2f | %.3f | %.2f | %.2f | %d | %.0f | %d | %d %s |\n", s.TargetRate,
				s.MirrorBacklogAge.P50Ms, s.MirrorBacklogAge.P99Ms, s.MirrorBacklogAge.MaxMs, s.KubeAPIServerCores, s.EventsEtcdCores,
				s.EventsdCores, s.EventsdCPUMsPerChange, s.GeneratorCores, s.MachineBusyCores, s.Unwritten, s.LateP99Ms, s.Early, s.Errors, s.FirstError)
		}
		fmt.Fprintln(w, "\nMirror backlog age: eventsd_mirror_lag_seconds (the oldest change received from kube-apiserver and not yet in eventsd's store) sampled every 200 ms over the interval.")
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
	printProfiles(w, "CPU profiles", rep.Profiles)
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
