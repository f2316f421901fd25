package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// runConfig configures the orchestrated benchmark.
type runConfig struct {
	// Eventsd is the eventsd binary.
	Eventsd string
	// Self is the eventsbench binary, started as "self echo"; the running
	// executable when empty.
	Self string
	// Out is the JSON report's path; none when empty.
	Out   string
	Quick bool
	// Command is the command line, for the report.
	Command string

	Clients []int
	// Wires are the wire formats the create benchmark is run with.
	Wires      []string
	Duration   time.Duration
	Warmup     time.Duration
	Namespaces int
	Objects    int

	// FillSteps are the stored-event counts at which list latency, RSS and
	// disk use are measured; the first fill includes TargetCount events
	// about the target pod.
	FillSteps   []int64
	FillClients int
	TargetCount int64
	ListRepeat  int
	// After each fill step, wait at least SettleMin and then until
	// eventsd's CPU use drops below 5% of a core, at most SettleMax.
	SettleMin, SettleMax time.Duration

	// Backends are the eventsd storage backends the create benchmark runs
	// against (pebble, etcd); StorageBackends those the stored-events
	// measurements run for (pebble: the fill steps; etcd: the etcd phase).
	Backends, StorageBackends []string
	// EtcdEvents is the number of events the etcd phase stores.
	EtcdEvents int64
	// ReadClients is the number of clients of the etcd phase's read
	// throughput benchmark.
	ReadClients int
	// EtcdQuotaBytes is the benchmark etcd's --quota-backend-bytes.
	EtcdQuotaBytes int64
	// EtcdUnsafeNoFsync runs etcd without fsync (tests only).
	EtcdUnsafeNoFsync bool
	// EtcdBinary, when set, is an etcd binary run instead of this
	// program's embedded etcd.
	EtcdBinary string
	// KubeAPIServer, when set, is a kube-apiserver binary the create
	// benchmark also runs against, with the events in the same etcd as
	// eventsd on etcd's (needs etcd in Backends).
	KubeAPIServer string

	// DataParent holds the temporary data directories.
	DataParent string
	KeepData   bool
	Timeout    time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// upstream figures from the issue: kube-apiserver + etcd in kind on this
// machine (2 cores).
var upstream = map[string]string{
	"creates_per_s_64":       "~1,400/s (p99 ~95 ms)",
	"creates_per_s_1":        "~590/s",
	"server_cpu_ms_per_req":  "~1.2 ms",
	"list_one_object_50k_ms": "~650 ms",
	"echo_ceiling_64":        "~6,700/s, ~0.08 ms CPU/req",
	// Issue 11: kube-apiserver 1.36.3 with an events etcd 3.6.8, on this
	// machine kind.
	"etcd_creates_per_s_64": "2,372/s (kube-apiserver 1.36.3 + events etcd 3.6.8)",
}

// Issue 11's goals for eventsd on etcd.
const (
	// etcdCreatesGoal is 3x kube-apiserver's creates/s at 64 clients on
	// the same etcd.
	etcdCreatesGoal = 7000
	// etcdListGoalMs bounds listing one object's events among 1M.
	etcdListGoalMs = 10
	// etcdReplicaBytesGoal bounds a replica's memory per stored event.
	etcdReplicaBytesGoal = 200
)

// runReport is everything a run measured.
type runReport struct {
	Command    string    `json:"command"`
	Executable string    `json:"executable"`
	Eventsd    string    `json:"eventsd"`
	Started    time.Time `json:"started"`
	ElapsedS   float64   `json:"elapsed_s"`
	Quick      bool      `json:"quick"`
	Machine    machine   `json:"machine"`
	// LoadAvg is /proc/loadavg at the start and the end: other work on
	// the machine skews the figures.
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	Create       []createPair   `json:"create"`
	Storage      []storagePoint `json:"storage"`
	// Etcd is the etcd phase's: eventsd replicas over a filled etcd.
	Etcd     *etcdStorage      `json:"etcd,omitempty"`
	Goals    []goalCheck       `json:"goals"`
	Upstream map[string]string `json:"upstream_reference"`
	Notes    []string          `json:"notes,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// createPair compares echo and eventsd at one client count.
type createPair struct {
	Wire    string        `json:"wire"`
	Clients int           `json:"clients"`
	Echo    *createResult `json:"echo"`
	Eventsd *createResult `json:"eventsd,omitempty"`
	// Ratios are eventsd / echo.
	RatioCreatesPerSec float64  `json:"ratio_creates_per_s"`
	RatioP50           float64  `json:"ratio_p50"`
	RatioP99           float64  `json:"ratio_p99"`
	RatioServerCPU     *float64 `json:"ratio_server_cpu_per_req,omitempty"`
	// EventsdEtcd is eventsd with --storage-backend=etcd; its server CPU
	// is eventsd's and etcd's.
	EventsdEtcd *createResult `json:"eventsd_etcd,omitempty"`
	// RatioEtcdCreatesPerSec is eventsd on etcd / echo;
	// RatioEtcdPebbleCreatesPerSec eventsd on etcd / eventsd on pebble.
	RatioEtcdCreatesPerSec       float64 `json:"ratio_etcd_creates_per_s,omitempty"`
	RatioEtcdPebbleCreatesPerSec float64 `json:"ratio_etcd_pebble_creates_per_s,omitempty"`
	// KubeAPIServer is kube-apiserver with its events in the same etcd;
	// its server CPU is kube-apiserver's and that etcd's.
	KubeAPIServer *createResult `json:"kube_apiserver,omitempty"`
	// RatioEtcdKubeAPIServerCreatesPerSec is eventsd on etcd /
	// kube-apiserver.
	RatioEtcdKubeAPIServerCreatesPerSec float64 `json:"ratio_etcd_kube_apiserver_creates_per_s,omitempty"`
}

// storagePoint is what was measured with Events stored.
type storagePoint struct {
	Events int64       `json:"events"`
	Fill   *fillResult `json:"fill"`
	// Right after the fill.
	ListAfterFill *listResult `json:"list_after_fill,omitempty"`
	RSSAfterFill  int64       `json:"rss_after_fill_bytes"`
	PeakRSS       int64       `json:"peak_rss_bytes"`
	DiskAfterFill diskUsage   `json:"disk_after_fill"`
	// After background work settled.
	SettleS           float64            `json:"settle_s"`
	ListSettled       *listResult        `json:"list_settled,omitempty"`
	RSSSettled        int64              `json:"rss_settled_bytes"`
	DiskSettled       diskUsage          `json:"disk_settled"`
	RSSBytesPerEvent  float64            `json:"rss_bytes_per_event"`
	DiskBytesPerEvent float64            `json:"disk_bytes_per_event"`
	Metrics           map[string]float64 `json:"eventsd_metrics,omitempty"`
}

// goalCheck is one of the goals.
type goalCheck struct {
	Goal     string `json:"goal"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Upstream string `json:"upstream,omitempty"`
	Pass     bool   `json:"pass"`
	Note     string `json:"note,omitempty"`
}

func newRunCommand() *cobra.Command {
	cfg := runConfig{
		Clients: []int{1, 8, 64}, Duration: 10 * time.Second, Warmup: 2 * time.Second, Namespaces: 10, Objects: 1000,
		FillSteps: []int64{50_000, 1_000_000}, FillClients: 64, TargetCount: 50, ListRepeat: 50,
		SettleMin: 5 * time.Second, SettleMax: 60 * time.Second, Timeout: 60 * time.Minute, Log: os.Stderr,
		Backends: []string{backendPebble}, EtcdEvents: 1_000_000, ReadClients: 64, EtcdQuotaBytes: defaultEtcdQuotaBytes,
	}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Benchmark eventsd against the echo server in one run and report both",
		Long: `run starts "eventsbench echo" and eventsd (fresh temporary data directory,
--event-ttl=24h) on 127.0.0.1 and, for each client count, runs the create
benchmark against echo and then eventsd, with each server's CPU time. Then,
on a fresh eventsd, it fills 50,000 events (50 about one pod) and 1,000,000
in all, and at each step measures the list of that pod's events, eventsd's
RSS and its data directory's size, right after the fill and once background
work has settled. It prints a markdown report and writes it as JSON.

With --backends including etcd, run also starts a single-member etcd as its
own process ("eventsbench etcd": etcd's defaults, fsync on, an 8 GiB quota)
and an eventsd with --storage-backend=etcd on it, measured next to echo and
eventsd on pebble at each client count; that target's server CPU is eventsd's
plus etcd's. With --storage-backends including etcd, the etcd phase starts a
fresh etcd, measures a replica over it while empty (the memory baseline),
writes --etcd-events events into it through eventsd's etcd store in this
process (one transaction per event, as eventsd writes), then starts a replica
over them and measures its start (index build), the list of one pod's events
and its RSS over the baseline's per event, and finally the read throughput
(--read-clients listing that pod) of that replica alone and of two replicas.
--etcd-binary runs a real etcd binary instead of the embedded one;
--kube-apiserver adds a real kube-apiserver to the create benchmark, its
events in the same etcd as eventsd on etcd's.

--quick measures 3 s after 1 s of warmup, stops filling at 50,000 and stores
50,000 events in etcd.`,
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
				if !f.Changed("fill-steps") {
					cfg.FillSteps = []int64{50_000}
				}
				if !f.Changed("settle-max") {
					cfg.SettleMax = 20 * time.Second
				}
				if !f.Changed("etcd-events") {
					cfg.EtcdEvents = 50_000
				}
			}
			if !f.Changed("storage-backends") {
				cfg.StorageBackends = cfg.Backends
			}
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.BoolVar(&cfg.Quick, "quick", false, "Short intervals and fill to 50,000 only.")
	f.IntSliceVar(&cfg.Clients, "clients", cfg.Clients, "Client counts of the create benchmark.")
	f.StringSliceVar(&cfg.Wires, "wires", []string{wireProtobuf, wireJSON}, "Wire formats of the create benchmark: protobuf (client-go's default) and/or json (kubectl's).")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "Measured interval of each create benchmark (--quick: 3s).")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "Warmup before each measured interval (--quick: 1s).")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Namespaces the pods are spread over.")
	f.IntVar(&cfg.Objects, "objects", cfg.Objects, "Pods the create benchmark's events are about.")
	f.Int64SliceVar(&cfg.FillSteps, "fill-steps", cfg.FillSteps, "Stored-event counts to measure at (--quick: 50000).")
	f.IntVar(&cfg.FillClients, "fill-clients", cfg.FillClients, "Concurrent clients of the fill.")
	f.Int64Var(&cfg.TargetCount, "target-count", cfg.TargetCount, "Events about the listed pod.")
	f.IntVar(&cfg.ListRepeat, "list-repeat", cfg.ListRepeat, "Lists per measurement.")
	f.DurationVar(&cfg.SettleMin, "settle-min", cfg.SettleMin, "Least wait after a fill before the settled measurements.")
	f.DurationVar(&cfg.SettleMax, "settle-max", cfg.SettleMax, "Most wait for eventsd's CPU use to drop below 5% after a fill (--quick: 20s).")
	f.StringSliceVar(&cfg.Backends, "backends", cfg.Backends, "eventsd storage backends the create benchmark runs against, next to echo: pebble and/or etcd (eventsd --storage-backend=etcd on an etcd this run starts as its own process; server CPU is eventsd's plus etcd's).")
	f.StringSliceVar(&cfg.StorageBackends, "storage-backends", nil, "Backends of the stored-events measurements (default: --backends): pebble fills to --fill-steps; etcd fills --etcd-events into etcd, then measures a replica's list latency and memory and the read throughput of 1 and 2 replicas.")
	f.Int64Var(&cfg.EtcdEvents, "etcd-events", cfg.EtcdEvents, "Events the etcd phase stores (--quick: 50000).")
	f.IntVar(&cfg.ReadClients, "read-clients", cfg.ReadClients, "Clients of the etcd phase's read throughput benchmark, split over the replicas.")
	f.Int64Var(&cfg.EtcdQuotaBytes, "etcd-quota-backend-bytes", cfg.EtcdQuotaBytes, "The benchmark etcd's --quota-backend-bytes.")
	f.BoolVar(&cfg.EtcdUnsafeNoFsync, "etcd-unsafe-no-fsync", false, "Run the benchmark etcd with --unsafe-no-fsync (tests only; not etcd's figures).")
	f.StringVar(&cfg.EtcdBinary, "etcd-binary", "", "An etcd binary (e.g. an upstream release of etcd v3.6.8, the version Kubernetes pins) to run as the benchmark etcd with the same settings, instead of the etcd embedded in eventsbench (go.etcd.io/etcd/server/v3 of go.mod).")
	f.StringVar(&cfg.KubeAPIServer, "kube-apiserver", "", "A kube-apiserver binary, or \"built\" for internal/kubeapiserver's build of tools/kube-apiserver (go run ./cmd/devcluster --build-only), that the create benchmark also runs against (started through internal/kubeapiserver), with its events in the same benchmark etcd as eventsd on etcd (its own prefix) and a main etcd of its own; server CPU is kube-apiserver's plus the events etcd's. Needs --backends with etcd.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir); its filesystem matters for fsync.")
	f.BoolVar(&cfg.KeepData, "keep-data", false, "Keep the data directories.")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

var (
	echoURLRE    = regexp.MustCompile(`^listening on (http://\S+)`)
	eventsdURLRE = regexp.MustCompile(`msg="eventsd serving" addr=\S+ url=(\S+)`)
)

func (cfg *runConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

// runBench runs everything. The report it returns (also with an error)
// holds what was measured until then.
func runBench(ctx context.Context, cfg runConfig) (rep *runReport, err error) {
	if cfg.Eventsd == "" {
		return nil, errors.New("--eventsd is required")
	}
	eventsd, err := eventsdBinary(cfg.Eventsd)
	if err != nil {
		return nil, err
	}
	self := cfg.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	for i, s := range cfg.FillSteps {
		if s < 1 || (i > 0 && s <= cfg.FillSteps[i-1]) || (i == 0 && s < cfg.TargetCount) {
			return nil, errors.New("--fill-steps must increase, the first at least --target-count")
		}
	}
	if len(cfg.Backends) == 0 {
		cfg.Backends = []string{backendPebble}
	}
	if cfg.StorageBackends == nil {
		cfg.StorageBackends = cfg.Backends
	}
	for _, b := range append(slices.Clone(cfg.Backends), cfg.StorageBackends...) {
		if b != backendPebble && b != backendEtcd {
			return nil, fmt.Errorf("--backends and --storage-backends: %q is neither %s nor %s", b, backendPebble, backendEtcd)
		}
	}
	if cfg.KubeAPIServer != "" {
		if !slices.Contains(cfg.Backends, backendEtcd) {
			return nil, errors.New("--kube-apiserver needs --backends with etcd: it runs on the same etcd")
		}
	}
	if cfg.KubeAPIServer != "" && cfg.KubeAPIServer != kubeAPIServerBuilt {
		if cfg.KubeAPIServer, err = filepath.Abs(cfg.KubeAPIServer); err != nil {
			return nil, err
		}
		if _, err := os.Stat(cfg.KubeAPIServer); err != nil {
			return nil, fmt.Errorf("--kube-apiserver: %w", err)
		}
	}
	if cfg.EtcdBinary != "" {
		if cfg.EtcdBinary, err = filepath.Abs(cfg.EtcdBinary); err != nil {
			return nil, err
		}
		if _, err := os.Stat(cfg.EtcdBinary); err != nil {
			return nil, fmt.Errorf("--etcd-binary: %w", err)
		}
	}
	usesEtcd := slices.Contains(cfg.Backends, backendEtcd) || slices.Contains(cfg.StorageBackends, backendEtcd)
	if slices.Contains(cfg.StorageBackends, backendEtcd) && (cfg.EtcdEvents < cfg.TargetCount || cfg.ReadClients < 1) {
		return nil, errors.New("--etcd-events must be at least --target-count, and --read-clients at least 1")
	}
	if cfg.EtcdQuotaBytes <= 0 {
		cfg.EtcdQuotaBytes = defaultEtcdQuotaBytes
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	parent, err := os.MkdirTemp(cfg.DataParent, "eventsbench-")
	if err != nil {
		return nil, err
	}
	if !cfg.KeepData {
		defer os.RemoveAll(parent)
	}
	started := time.Now()
	rep = &runReport{
		Command: cfg.Command, Executable: self, Eventsd: eventsd, Started: started, Quick: cfg.Quick,
		Machine: machineInfo(parent), Upstream: upstream, LoadAvgStart: loadAvg(),
		Settings: map[string]any{
			"clients": cfg.Clients, "wires": cfg.Wires, "duration_s": cfg.Duration.Seconds(), "warmup_s": cfg.Warmup.Seconds(),
			"namespaces": cfg.Namespaces, "objects": cfg.Objects, "fill_steps": cfg.FillSteps,
			"fill_clients": cfg.FillClients, "target_count": cfg.TargetCount, "list_repeat": cfg.ListRepeat,
			"settle_min_s": cfg.SettleMin.Seconds(), "settle_max_s": cfg.SettleMax.Seconds(),
			"eventsd_args": "--event-ttl=24h", "data_parent": parent,
			"backends": cfg.Backends, "storage_backends": cfg.StorageBackends,
		},
	}
	if usesEtcd {
		rep.Settings["etcd"] = cfg.etcdProc(self).describe()
		rep.Settings["etcd_events"] = cfg.EtcdEvents
		rep.Settings["read_clients"] = cfg.ReadClients
	}
	if cfg.KubeAPIServer != "" {
		rep.Settings["kube_apiserver_flags"] = kubeAPIServerFlags
	}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		rep.Goals = goals(rep, cfg)
		if err != nil {
			rep.Error = err.Error()
		}
	}()

	if err := cfg.createPhase(ctx, rep, self, eventsd, filepath.Join(parent, "create")); err != nil {
		return rep, err
	}
	if len(cfg.FillSteps) > 0 && slices.Contains(cfg.StorageBackends, backendPebble) {
		if err := cfg.storagePhase(ctx, rep, eventsd, filepath.Join(parent, "fill")); err != nil {
			return rep, err
		}
	}
	if slices.Contains(cfg.StorageBackends, backendEtcd) {
		if err := cfg.etcdPhase(ctx, rep, self, eventsd, filepath.Join(parent, "etcd")); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// startEventsd starts eventsd on a free loopback port over dataDir, with
// --event-ttl=24h and the extra flags.
func startEventsd(ctx context.Context, bin, dataDir string, extra ...string) (*child, error) {
	return startChild(ctx, "eventsd", bin,
		append([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--event-ttl", "24h"}, extra...), eventsdURLRE, "/readyz")
}

// createTarget is a server the create benchmark runs against.
type createTarget struct {
	name string
	// url is where it serves; pid its process; exited an error once it
	// has ended.
	url    string
	pid    int
	exited func() error
	// backend is the server's storage process (etcd), if any: its CPU
	// counts as the server's.
	backend *child
	// token is the bearer token the clients send, if any.
	token string
	set   func(*createPair, *createResult)
}

// Storage backends of eventsd (its --storage-backend values).
const (
	backendPebble = "pebble"
	backendEtcd   = "etcd"
)

// replicaStartTimeout bounds how long an eventsd replica over a filled
// etcd may take to build its index and serve.
const replicaStartTimeout = 10 * time.Minute

// startEventsdEtcd starts eventsd with --storage-backend=etcd over
// etcdURL (the default prefix /registry); dataDir holds its on-disk index
// (--etcd-index=disk, the default), one per replica.
func startEventsdEtcd(ctx context.Context, bin, dataDir, etcdURL string, timeout time.Duration) (*child, error) {
	return startChildWithin(ctx, timeout, "eventsd on etcd", bin,
		[]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--event-ttl", "24h",
			"--storage-backend", backendEtcd, "--etcd-servers", etcdURL}, eventsdURLRE, "http", "/readyz")
}

// createPhase compares echo and eventsd (on each of cfg.Backends) at each
// client count.
func (cfg *runConfig) createPhase(ctx context.Context, rep *runReport, self, eventsdBin, dataDir string) (err error) {
	if len(cfg.Wires) == 0 {
		cfg.Wires = []string{wireProtobuf}
	}
	for _, w := range cfg.Wires {
		if err := checkWire(w); err != nil {
			return err
		}
	}
	if len(cfg.Clients) == 0 {
		return nil
	}
	var children []*child
	// Stopped in reverse: eventsd before the etcd it uses.
	defer func() { err = errors.Join(err, stopReverse(children)) }()
	echo, err := startChild(ctx, "echo", self, []string{"echo", "--listen", "127.0.0.1:0"}, echoURLRE, "")
	if err != nil {
		return err
	}
	children = append(children, echo)
	cfg.logf("echo at %s (pid %d)", echo.URL, echo.pid())
	targets := []createTarget{{name: "echo", url: echo.URL, pid: echo.pid(), exited: echo.exited, set: func(p *createPair, r *createResult) { p.Echo = r }}}
	if slices.Contains(cfg.Backends, backendPebble) {
		ev, err := startEventsd(ctx, eventsdBin, dataDir)
		if err != nil {
			return err
		}
		children = append(children, ev)
		cfg.logf("eventsd at %s (pid %d, data %s)", ev.URL, ev.pid(), dataDir)
		targets = append(targets, createTarget{name: "eventsd", url: ev.URL, pid: ev.pid(), exited: ev.exited, set: func(p *createPair, r *createResult) { p.Eventsd = r }})
	}
	if slices.Contains(cfg.Backends, backendEtcd) {
		etcd, err := cfg.etcdProc(self).start(ctx, dataDir+"-etcd")
		if err != nil {
			return err
		}
		children = append(children, etcd)
		ev, err := startEventsdEtcd(ctx, eventsdBin, dataDir+"-eventsd-etcd", etcd.URL, childStartTimeout)
		if err != nil {
			return err
		}
		children = append(children, ev)
		cfg.logf("etcd at %s (pid %d), eventsd on it at %s (pid %d)", etcd.URL, etcd.pid(), ev.URL, ev.pid())
		targets = append(targets, createTarget{name: "eventsd on etcd", url: ev.URL, pid: ev.pid(), exited: ev.exited, backend: etcd, set: func(p *createPair, r *createResult) { p.EventsdEtcd = r }})
		if cfg.KubeAPIServer != "" {
			kas, kerr := launchKubeAPIServer(ctx, cfg.KubeAPIServer, dataDir+"-kube-apiserver", etcd.URL, cfg.Namespaces)
			if kerr != nil {
				return kerr
			}
			// Before the etcd it uses stops (deferred earlier).
			defer func() { err = errors.Join(err, kas.Close()) }()
			rep.Settings["kube_apiserver"] = fmt.Sprintf("%s (%s)", homeRelative(kas.BinaryPath()), kas.Version())
			cfg.logf("kube-apiserver %s at %s (pid %d), events in etcd %s, the rest in etcd %s", kas.Version(), kas.URL(), kas.PID(), etcd.URL, kas.EtcdEndpoints()[0])
			targets = append(targets, createTarget{name: "kube-apiserver on etcd", url: kas.URL(), pid: kas.PID(), backend: etcd, token: kas.AdminToken(),
				exited: func() error {
					if kas.Running() {
						return nil
					}
					return fmt.Errorf("kube-apiserver exited unexpectedly:\n%s", kas.LogTails(20))
				},
				set: func(p *createPair, r *createResult) { p.KubeAPIServer = r }})
		}
	}

	for _, wire := range cfg.Wires {
		for _, n := range cfg.Clients {
			pair := createPair{Clients: n, Wire: wire}
			for _, target := range targets {
				cfg.logf("create: %d clients against %s for %s after %s warmup", n, target.name, cfg.Duration, cfg.Warmup)
				cc := createConfig{
					Server: target.url, Clients: n, Duration: cfg.Duration, Warmup: cfg.Warmup,
					Namespaces: cfg.Namespaces, Objects: cfg.Objects, PID: target.pid, PodPrefix: fmt.Sprintf("%s-c%d-pod", wire, n), Wire: wire,
				}
				if target.backend != nil {
					cc.BackendPID = target.backend.pid()
				}
				cc.Token = target.token
				res, err := runCreate(ctx, cc)
				if err == nil {
					err = errors.Join(target.exited(), exitedIf(target.backend))
				}
				if err != nil {
					if pair.Echo != nil {
						rep.Create = append(rep.Create, pair)
					}
					return fmt.Errorf("create benchmark, %d clients, against %s: %w", n, target.name, err)
				}
				cfg.logf("  %.0f creates/s, p50 %.2f ms, p99 %.2f ms, server CPU %s ms/req (backend %s), %d errors",
					res.CreatesPerSec, res.P50Ms, res.P99Ms, fmtPtr(res.ServerCPUMsPerReq, 4), fmtPtr(res.BackendCPUMsPerReq, 4), res.Errors)
				if res.Errors > 0 {
					rep.Notes = append(rep.Notes, fmt.Sprintf("%s, %d clients: %d errors, the first: %s", target.name, n, res.Errors, res.FirstError))
				}
				target.set(&pair, res)
			}
			if pair.Eventsd != nil {
				pair.RatioCreatesPerSec = ratio(pair.Eventsd.CreatesPerSec, pair.Echo.CreatesPerSec)
				pair.RatioP50 = ratio(pair.Eventsd.P50Ms, pair.Echo.P50Ms)
				pair.RatioP99 = ratio(pair.Eventsd.P99Ms, pair.Echo.P99Ms)
				if a, b := pair.Eventsd.ServerCPUMsPerReq, pair.Echo.ServerCPUMsPerReq; a != nil && b != nil {
					r := ratio(*a, *b)
					pair.RatioServerCPU = &r
				}
			}
			if e := pair.EventsdEtcd; e != nil {
				pair.RatioEtcdCreatesPerSec = ratio(e.CreatesPerSec, pair.Echo.CreatesPerSec)
				if pair.Eventsd != nil {
					pair.RatioEtcdPebbleCreatesPerSec = ratio(e.CreatesPerSec, pair.Eventsd.CreatesPerSec)
				}
				if k := pair.KubeAPIServer; k != nil {
					pair.RatioEtcdKubeAPIServerCreatesPerSec = ratio(e.CreatesPerSec, k.CreatesPerSec)
				}
			}
			rep.Create = append(rep.Create, pair)
		}
	}
	return nil
}

// exitedIf is c.exited() for a child that may be nil.
func exitedIf(c *child) error {
	if c == nil {
		return nil
	}
	return c.exited()
}

// storagePhase fills a fresh eventsd step by step and measures at each.
func (cfg *runConfig) storagePhase(ctx context.Context, rep *runReport, eventsdBin, dataDir string) (err error) {
	ev, err := startEventsd(ctx, eventsdBin, dataDir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ev.stop()) }()
	cfg.logf("fresh eventsd at %s (pid %d, data %s)", ev.URL, ev.pid(), dataDir)
	const targetPod = "target-pod"
	targetNS := namespaceName(0)
	var stored int64
	for i, step := range cfg.FillSteps {
		sp := storagePoint{Events: step}
		fc := fillConfig{Wire: wireProtobuf,
			Server: ev.URL, Total: step - stored, Clients: cfg.FillClients, Namespaces: cfg.Namespaces,
			Namespace: targetNS, TargetPod: targetPod, PerPod: 50, PodPrefix: fmt.Sprintf("fill%d-pod", i),
			PID: ev.pid(), Progress: cfg.Log, ProgressEvery: 15 * time.Second,
		}
		if i == 0 {
			fc.TargetCount = cfg.TargetCount
		}
		cfg.logf("fill: %d events (%d about %s/%s) to %d stored, %d clients", fc.Total, fc.TargetCount, targetNS, targetPod, step, fc.Clients)
		res, err := runFill(ctx, fc)
		sp.Fill = res
		if err == nil {
			err = ev.exited()
		}
		if err != nil {
			if res != nil {
				rep.Storage = append(rep.Storage, sp)
			}
			return fmt.Errorf("fill to %d: %w", step, err)
		}
		stored = step
		cfg.logf("  %.0f creates/s, server CPU %s ms/event", res.PerSec, fmtPtr(res.ServerCPUMsPerEvent, 4))

		measure := func() (int64, diskUsage, *listResult, error) {
			rss, err := procStatus(ev.pid(), "VmRSS")
			if err != nil {
				return 0, diskUsage{}, nil, err
			}
			du, err := dirUsage(dataDir)
			if err != nil {
				return 0, diskUsage{}, nil, err
			}
			l, err := runList(ctx, listConfig{Wire: wireProtobuf, Server: ev.URL, Namespace: targetNS, Pod: targetPod, Repeat: cfg.ListRepeat})
			if err != nil {
				return 0, diskUsage{}, nil, err
			}
			if int64(l.Items) != cfg.TargetCount {
				return 0, diskUsage{}, nil, fmt.Errorf("listing %s/%s found %d events, want %d", targetNS, targetPod, l.Items, cfg.TargetCount)
			}
			return rss, du, l, nil
		}
		if sp.RSSAfterFill, sp.DiskAfterFill, sp.ListAfterFill, err = measure(); err != nil {
			return fmt.Errorf("measuring at %d stored: %w", step, err)
		}
		cfg.logf("  after fill: RSS %s, disk %s, list p50 %.2f ms p99 %.2f ms (%d items)",
			mib(sp.RSSAfterFill), mib(sp.DiskAfterFill.Bytes), sp.ListAfterFill.P50Ms, sp.ListAfterFill.P99Ms, sp.ListAfterFill.Items)

		settleStart := time.Now()
		if err := settle(ctx, ev.pid(), cfg.SettleMin, cfg.SettleMax); err != nil {
			return err
		}
		sp.SettleS = round3(time.Since(settleStart).Seconds())
		if sp.RSSSettled, sp.DiskSettled, sp.ListSettled, err = measure(); err != nil {
			return fmt.Errorf("measuring at %d stored after settling: %w", step, err)
		}
		sp.PeakRSS, _ = procStatus(ev.pid(), "VmHWM")
		sp.RSSBytesPerEvent = round3(float64(sp.RSSSettled) / float64(step))
		sp.DiskBytesPerEvent = round3(float64(sp.DiskSettled.Bytes) / float64(step))
		if m, err := ev.scrapeMetrics(ctx); err == nil {
			sp.Metrics = map[string]float64{}
			for _, k := range []string{"eventsd_stored_events", "eventsd_storage_bytes", "eventsd_storage_revision",
				"go_memstats_heap_inuse_bytes", "go_memstats_heap_sys_bytes", "go_memstats_sys_bytes", "go_goroutines"} {
				if v, ok := m[k]; ok {
					sp.Metrics[k] = v
				}
			}
			if n, ok := m["eventsd_stored_events"]; ok && int64(n) != step {
				rep.Notes = append(rep.Notes, fmt.Sprintf("eventsd reports %d stored events after filling %d", int64(n), step))
			}
		}
		cfg.logf("  settled after %.1fs: RSS %s (peak %s), disk %s (%.0f B/event), list p50 %.2f ms p99 %.2f ms",
			sp.SettleS, mib(sp.RSSSettled), mib(sp.PeakRSS), mib(sp.DiskSettled.Bytes), sp.DiskBytesPerEvent, sp.ListSettled.P50Ms, sp.ListSettled.P99Ms)
		rep.Storage = append(rep.Storage, sp)
	}
	return nil
}

// settle waits at least min, then until pid uses less than 5% of a core
// over a second, at most max in all.
func settle(ctx context.Context, pid int, minWait, maxWait time.Duration) error {
	start := time.Now()
	sleepUntil(ctx, start.Add(minWait))
	for ctx.Err() == nil && time.Since(start) < maxWait {
		c0, err := procCPU(pid)
		if err != nil {
			return err
		}
		t0 := time.Now()
		sleepUntil(ctx, t0.Add(time.Second))
		c1, err := procCPU(pid)
		if err != nil {
			return err
		}
		if float64(c1-c0) < 0.05*float64(time.Since(t0)) {
			break
		}
	}
	return ctx.Err()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// goals checks the goals against what was measured.
func goals(rep *runReport, cfg runConfig) []goalCheck {
	var gs []goalCheck
	for _, p := range rep.Create {
		if e := p.EventsdEtcd; p.Clients == 64 && e != nil {
			gs = append(gs, goalCheck{
				Goal: fmt.Sprintf("creates/s at 64 clients, eventsd on etcd (%s wire)", p.Wire), Target: fmt.Sprintf(">= %d/s", etcdCreatesGoal),
				Measured: fmt.Sprintf("%.0f/s, p99 %.1f ms, eventsd+etcd CPU %s ms/create (etcd %s)", e.CreatesPerSec, e.P99Ms,
					fmtPtr(e.ServerCPUMsPerReq, 3), fmtPtr(e.BackendCPUMsPerReq, 3)),
				Upstream: upstream["etcd_creates_per_s_64"], Pass: e.CreatesPerSec >= etcdCreatesGoal,
			})
			if k := p.KubeAPIServer; k != nil {
				gs = append(gs, goalCheck{
					Goal:     fmt.Sprintf("creates/s at 64 clients, eventsd on etcd / kube-apiserver on the same etcd, this run (%s wire)", p.Wire),
					Target:   ">= 3.00",
					Measured: fmt.Sprintf("%.2f (%.0f / %.0f per s)", p.RatioEtcdKubeAPIServerCreatesPerSec, e.CreatesPerSec, k.CreatesPerSec),
					Upstream: fmt.Sprintf("kube-apiserver here: p99 %.1f ms, kube-apiserver+etcd CPU %s ms/create", k.P99Ms, fmtPtr(k.ServerCPUMsPerReq, 3)),
					Pass:     p.RatioEtcdKubeAPIServerCreatesPerSec >= 3,
				})
			}
		}
		if p.Clients != 64 || p.Echo == nil || p.Eventsd == nil {
			continue
		}
		gs = append(gs, goalCheck{
			Goal: "creates/s at 64 clients, eventsd / echo", Target: ">= 0.80",
			Measured: fmt.Sprintf("%.2f (%.0f / %.0f per s)", p.RatioCreatesPerSec, p.Eventsd.CreatesPerSec, p.Echo.CreatesPerSec),
			Upstream: fmt.Sprintf("%s vs echo %s", upstream["creates_per_s_64"], upstream["echo_ceiling_64"]),
			Pass:     p.RatioCreatesPerSec >= 0.8,
		})
		if c := p.Eventsd.ServerCPUMsPerReq; c != nil {
			gs = append(gs, goalCheck{
				Goal: "server CPU per durable create (64 clients)", Target: "<= 0.15 ms",
				Measured: fmt.Sprintf("%.3f ms", *c), Upstream: upstream["server_cpu_ms_per_req"], Pass: *c <= 0.15,
			})
		}
	}
	if n := len(rep.Storage); n > 0 {
		sp := rep.Storage[n-1]
		note := ""
		if sp.Events < 1_000_000 {
			note = fmt.Sprintf("measured with %d stored, not 1,000,000", sp.Events)
		}
		if l := sp.ListSettled; l != nil {
			gs = append(gs, goalCheck{
				Goal: "list one pod's events among 1M", Target: "<= 5 ms",
				Measured: fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (%d items)", l.P50Ms, l.P99Ms, l.Items),
				Upstream: upstream["list_one_object_50k_ms"] + " among 50k", Pass: l.P50Ms <= 5, Note: note,
			})
		}
		if sp.RSSSettled > 0 {
			gs = append(gs, goalCheck{
				Goal: "eventsd RSS with 1M stored", Target: "<= 150 MiB",
				Measured: fmt.Sprintf("%s settled, %s right after the fill, peak %s", mib(sp.RSSSettled), mib(sp.RSSAfterFill), mib(sp.PeakRSS)),
				Pass:     sp.RSSSettled <= 150<<20 && sp.RSSAfterFill <= 150<<20, Note: note,
			})
		}
	}
	if es := rep.Etcd; es != nil {
		note := ""
		if es.Events < 1_000_000 {
			note = fmt.Sprintf("measured with %d stored, not 1,000,000", es.Events)
		}
		if l := es.ListSettled; l != nil {
			gs = append(gs, goalCheck{
				Goal: "list one pod's events among 1M, eventsd on etcd", Target: fmt.Sprintf("<= %d ms", etcdListGoalMs),
				Measured: fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (%d items)", l.P50Ms, l.P99Ms, l.Items),
				Upstream: upstream["list_one_object_50k_ms"] + " among 50k", Pass: l.P50Ms <= etcdListGoalMs, Note: note,
			})
		}
		if es.RSSSettled > 0 {
			gs = append(gs, goalCheck{
				Goal: "replica memory per stored event (RSS over an empty-store replica's)", Target: fmt.Sprintf("<= %d B", etcdReplicaBytesGoal),
				Measured: fmt.Sprintf("%.0f B (RSS %s vs %s; Go heap in use %.0f B/event)", es.RSSBytesPerEvent, mib(es.RSSSettled), mib(es.BaselineRSS), es.HeapBytesPerEvent),
				Pass:     es.RSSBytesPerEvent <= etcdReplicaBytesGoal, Note: note,
			})
		}
	}
	return gs
}

// writeReport writes a report as indented JSON.
// eventsdBinary is the absolute path of --eventsd's binary, which must
// exist.
func eventsdBinary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("--eventsd: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("--eventsd: %w", err)
	}
	return abs, nil
}

// finishReport prints rep (when the run got that far) with print, writes
// it as JSON to out when out is set, and returns err joined with the
// write's error.
func finishReport[R any](w io.Writer, out string, rep *R, print func(io.Writer, *R), err error) error {
	if rep == nil {
		return err
	}
	print(w, rep)
	if out != "" {
		err = errors.Join(err, writeReport(out, rep))
	}
	return err
}

func writeReport(path string, rep any) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func fmtPtr(p *float64, prec int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, *p)
}

// shellJoin quotes args for a POSIX shell where needed.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		a = homeRelative(a)
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%~") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// homeRelative writes the user's home directory in p (a path, or a flag
// with one, --etcd-binary=/home/me/bin/etcd) as ~, so that a report names
// no developer's machine: ~/.cache/kubevents/... reads the same on any.
func homeRelative(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return p
	}
	home = strings.TrimSuffix(home, "/")
	if p == home {
		return "~"
	}
	if strings.HasPrefix(p, home+"/") {
		return "~" + p[len(home):]
	}
	return strings.ReplaceAll(p, "="+home+"/", "=~/")
}

// startBench begins a benchmark mode's run: its context, bounded by
// timeout, and a new temporary directory under dataParent named for the
// mode; done removes the directory and cancels the context.
func startBench(ctx context.Context, timeout time.Duration, dataParent, mode string) (context.Context, string, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	dir, err := os.MkdirTemp(dataParent, "eventsbench-"+mode+"-")
	if err != nil {
		cancel()
		return nil, "", nil, err
	}
	return ctx, dir, func() {
		os.RemoveAll(dir)
		cancel()
	}, nil
}
