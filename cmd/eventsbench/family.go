package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// The family benchmark's phases.
const (
	familyPhaseQuery  = "query"
	familyPhaseFollow = "follow"
	familyPhaseCreate = "create"
)

// familyQueryGoalMs is issue 31's goal for a family query's p99.
const familyQueryGoalMs = 20

// familyCreateGoal bounds eventsd's CPU per create with the lineage over
// without it.
const familyCreateGoal = 1.05

// familyBenchConfig configures the family benchmark.
type familyBenchConfig struct {
	Eventsd string
	// KubeAPIServer is a kube-apiserver binary or kubeAPIServerBuilt;
	// empty: the query phase measures eventsd only, and the follow phase
	// cannot run.
	KubeAPIServer string
	Out, Command  string
	Phases        []string

	// The query phase: Events stored in all, about Objects objects; the
	// family (Deployment Name in Namespace, Rollouts × PodsPerRS Pods)
	// and other Deployments' families over Namespaces namespaces.
	Events          int64
	Objects         int
	Namespaces      int
	Rollouts        int
	PodsPerRS       int
	Queries         int
	Rounds          int
	KubeRounds      int
	KubeLists       int
	FillWorkers     int
	KubeFillClients int

	// The follow phase: FollowPods Pods (100 per ReplicaSet, one
	// ReplicaSet per Deployment), each window Window long, churn at
	// ChurnRate creates (and as many deletes) a second.
	FollowPods int
	Window     time.Duration
	ChurnRate  int

	// The create phase: Pairs alternations of lineage on and off, each
	// CreateDuration after CreateWarmup, CreateClients clients, events
	// about CreateObjects pods.
	Pairs          int
	CreateClients  int
	CreateObjects  int
	CreateDuration time.Duration
	CreateWarmup   time.Duration
	// ProfileDir, when set, gets a CPU profile of eventsd with the
	// lineage over the last pair's measured interval.
	ProfileDir string

	// StoreDir, when set, keeps the query phase's store (StoreDir/data)
	// and reuses it in later runs whose store settings are the same
	// (StoreDir/fill.json records them), instead of filling a new one.
	StoreDir   string
	DataParent string
	Timeout    time.Duration
	Log        io.Writer
}

func defaultFamilyBenchConfig() familyBenchConfig {
	return familyBenchConfig{
		Phases: []string{familyPhaseQuery, familyPhaseFollow, familyPhaseCreate},
		Events: 1_000_000, Objects: 100_000, Namespaces: 20, Rollouts: 3, PodsPerRS: 100, Queries: 200, Rounds: 5, KubeRounds: 1, KubeLists: 30,
		FillWorkers: 4, KubeFillClients: 16,
		FollowPods: 5000, Window: 20 * time.Second, ChurnRate: 20,
		Pairs: 2, CreateClients: 8, CreateObjects: 10_000, CreateDuration: 10 * time.Second, CreateWarmup: 2 * time.Second,
		Timeout: 30 * time.Minute, Log: os.Stderr,
	}
}

func (c *familyBenchConfig) validate() error {
	for _, p := range c.Phases {
		if p != familyPhaseQuery && p != familyPhaseFollow && p != familyPhaseCreate {
			return fmt.Errorf("--phases: %q is none of %s, %s, %s", p, familyPhaseQuery, familyPhaseFollow, familyPhaseCreate)
		}
	}
	switch {
	case len(c.Phases) == 0:
		return errors.New("--phases: none given")
	case c.Eventsd == "" && (c.has(familyPhaseQuery) || c.has(familyPhaseCreate)):
		return errors.New("--eventsd is required for the query and create phases")
	case c.KubeAPIServer == "" && c.has(familyPhaseFollow):
		return errors.New("the follow phase needs --kube-apiserver")
	case c.Rollouts < 1 || c.PodsPerRS < 1 || c.Namespaces < 1 || c.Queries < 1 || c.Rounds < 1 || c.KubeRounds < 1 || c.KubeLists < 0 || c.FillWorkers < 1 || c.KubeFillClients < 1:
		return errors.New("--rollouts, --pods-per-rs, --namespaces, --queries, --rounds, --kube-rounds, --fill-workers and --kube-fill-clients must be at least 1, --kube-lists not negative")
	case c.FollowPods < 100 || c.FollowPods%100 != 0:
		return errors.New("--follow-pods must be a multiple of 100 (100 Pods per ReplicaSet)")
	case c.Window <= 0 || c.ChurnRate < 1:
		return errors.New("--window must be positive and --churn-rate at least 1")
	case c.Pairs < 1 || c.CreateClients < 1 || c.CreateObjects < 1 || c.CreateDuration <= 0 || c.CreateWarmup < 0:
		return errors.New("--pairs, --create-clients and --create-objects must be at least 1, --create-duration positive, --create-warmup not negative")
	}
	if c.has(familyPhaseQuery) {
		if _, _, err := c.noisePlan(); err != nil {
			return err
		}
	}
	return nil
}

func (c *familyBenchConfig) has(phase string) bool { return slices.Contains(c.Phases, phase) }

// familyReport is what the family benchmark measured.
type familyReport struct {
	Command      string         `json:"command"`
	Started      time.Time      `json:"started"`
	ElapsedS     float64        `json:"elapsed_s"`
	Machine      machine        `json:"machine"`
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Settings     map[string]any `json:"settings"`
	Query        *familyQuery   `json:"query,omitempty"`
	Follow       *followCost    `json:"follow,omitempty"`
	Create       *lineageCreate `json:"create,omitempty"`
	Goals        []goalCheck    `json:"goals"`
	Error        string         `json:"error,omitempty"`
}

// familyQuery is the query phase's result.
type familyQuery struct {
	StoredEvents    int64   `json:"stored_events"`
	FamilyEvents    int     `json:"family_events"`
	FamilyObjects   int     `json:"family_objects"`
	GraphObjects    int     `json:"graph_objects"`
	NamespaceEvents int     `json:"namespace_events"`
	FillS           float64 `json:"fill_s"`
	// StoreReused: the store was kept from an earlier run (--store-dir);
	// FillS is that run's.
	StoreReused   bool    `json:"store_reused,omitempty"`
	FillMethod    string  `json:"fill_method"`
	EventsdStartS float64 `json:"eventsd_start_s"`
	EventsdRSS    int64   `json:"eventsd_rss_bytes"`
	// SettleS is the wait after eventsd's start until its CPU use fell
	// below 5% of a core (at most 3 minutes).
	SettleS float64 `json:"settle_s"`
	// Family is one list with family.kind and family.name, no limit,
	// from a client accepting protobuf (and JSON), as Kubernetes'
	// components ask for built-in types; FamilyJSON the same from a
	// client accepting JSON only.
	Family     familyLists `json:"family"`
	FamilyJSON familyLists `json:"family_json"`
	// FamilyAnswer is the server's answer alone: the same list asked in
	// protobuf by a plain HTTP client that reads the body whole and
	// decodes nothing (client-go's decoding of 1,805 events is the
	// client's CPU, on the same 2 cores here).
	FamilyAnswer     familyLists     `json:"family_answer"`
	EventsdPerObject *perObjectLists `json:"eventsd_per_object"`
	KubePerObject    *perObjectLists `json:"kube_apiserver_per_object,omitempty"`
	KubeVersion      string          `json:"kube_apiserver_version,omitempty"`
	KubeFillS        float64         `json:"kube_apiserver_fill_s,omitempty"`
}

// familyLists are the measured family queries of one client.
type familyLists struct {
	// Accept is the client's Accept header.
	Accept   string `json:"accept"`
	Queries  int    `json:"queries"`
	Returned int    `json:"returned"`
	latencies
	// EventsdCPUMs is eventsd's CPU per query over the measured ones.
	EventsdCPUMs float64 `json:"eventsd_cpu_ms_per_query"`
	// Profile is a CPU profile of eventsd answering this client's family
	// queries one after the other, if taken.
	Profile string `json:"profile,omitempty"`
}

// profileWhile writes a CPU profile of secs seconds of the eventsd at
// server to path while calling fn over and over.
func profileWhile(ctx context.Context, server, path string, secs int, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fetchProfile(ctx, server, "", nil, secs, path) }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if err := fn(); err != nil {
			return errors.Join(err, <-done)
		}
	}
}

// perObjectLists is the family's events listed one object at a time
// (involvedObject.uid=...), Rounds times.
type perObjectLists struct {
	Rounds   int `json:"rounds"`
	Lists    int `json:"lists_per_round"`
	Returned int `json:"returned_per_round"`
	// Round summarises the rounds' durations, List the lists'.
	Round latencies `json:"round"`
	// Sampled, when not 0, is how many of the objects each round listed:
	// Round is then extrapolated to all of them, and Returned is the
	// sample's.
	Sampled int       `json:"sampled,omitempty"`
	List    latencies `json:"list"`
}

func newFamilyCommand() *cobra.Command {
	cfg := defaultFamilyBenchConfig()
	cmd := &cobra.Command{
		Use:   "family",
		Short: "Benchmark family timelines (issue 31): family queries, metadata watches' cost, create cost of the lineage",
		Long: `family measures issue 31's family timelines, each phase side by side with
its reference in the same run:

- query: a store of --events events (in-process pebblestore writes) about
  --objects objects: the family of Deployment "web" in bench-0 (--rollouts
  ReplicaSets of --pods-per-rs Pods; the Deployment's ScalingReplicaSet,
  the ReplicaSets' "Created pod", each Pod's Scheduled and kubelet events;
  all but the last rollout's Pods deleted) among other Deployments'
  families (two rollouts of 5 Pods) over --namespaces namespaces, one of
  them also named web; the lineage learned as eventsd would (each event
  through the event learner's ObserveEvent, each object's metadata through
  Observe, the old Pods through MarkDeleted), saved with the learner's
  cursor. eventsd is started over it and answers --queries lists of
  family.kind=Deployment,family.name=web (client-go, no limit); then the
  same events are listed one object at a time (involvedObject.uid=..., one
  list per object), --rounds times from eventsd and --kube-rounds times
  from kube-apiserver holding bench-0's events (the family and bench-0's
  share of the others, created through its API: its namespaced lists read
  only the namespace); each of kube-apiserver's lists reads the whole
  namespace, so its rounds list --kube-lists objects spread over the
  family and scale the round's time to all of them.
- follow: kube-apiserver with --follow-pods Pods (ReplicaSets of 100, one
  per Deployment, created through its API; no controllers): its CPU and
  requests over --window idle, while a lineage Follower lists and watches
  the default kinds (and its initial list's duration), with the Follower
  idle, and under churn of --churn-rate Pod creates and deletes a second
  without and with the Follower.
- create: eventsd --lineage=true against --lineage=false, the create load
  (--create-clients clients, events about --create-objects pods, with
  ReplicaSets' "Created pod" and Deployments' "Scaled up replica set"
  announcements among the kubelet's), alternating --pairs times.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Command = shellJoin(append([]string{"eventsbench"}, os.Args[1:]...))
			rep, err := runFamilyBench(cmd.Context(), cfg)
			return finishReport(cmd.OutOrStdout(), cfg.Out, rep, printFamilyReport, err)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "Path of the eventsd binary (go build -o eventsd ./cmd/eventsd).")
	f.StringVar(&cfg.KubeAPIServer, "kube-apiserver", "", "A kube-apiserver binary, or \"built\" for internal/kubeapiserver's build (go run ./cmd/devcluster --build-only): the reference of the query phase and the server of the follow phase.")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.StringSliceVar(&cfg.Phases, "phases", cfg.Phases, "Phases to run: query, follow, create.")
	f.Int64Var(&cfg.Events, "events", cfg.Events, "Events stored in the query phase.")
	f.IntVar(&cfg.Objects, "objects", cfg.Objects, "Objects the stored events are about (the lineage holds them).")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Namespaces the other families are spread over (the family is in bench-0).")
	f.IntVar(&cfg.Rollouts, "rollouts", cfg.Rollouts, "Rollouts (ReplicaSets) of the queried Deployment.")
	f.IntVar(&cfg.PodsPerRS, "pods-per-rs", cfg.PodsPerRS, "Pods of each of its ReplicaSets.")
	f.IntVar(&cfg.Queries, "queries", cfg.Queries, "Family queries measured.")
	f.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "Rounds of one-object-at-a-time lists measured on eventsd.")
	f.IntVar(&cfg.KubeRounds, "kube-rounds", cfg.KubeRounds, "Rounds of one-object-at-a-time lists measured on kube-apiserver (each list reads the namespace's events).")
	f.IntVar(&cfg.KubeLists, "kube-lists", cfg.KubeLists, "Lists of kube-apiserver's rounds: a sample of the objects, spread over the family, the round's time extrapolated to all of them (each list reads the whole namespace: about 2 s here at 50k events); 0 lists every object.")
	f.IntVar(&cfg.FillWorkers, "fill-workers", cfg.FillWorkers, "Goroutines writing the store.")
	f.IntVar(&cfg.KubeFillClients, "kube-fill-clients", cfg.KubeFillClients, "Clients creating bench-0's events in kube-apiserver.")
	f.IntVar(&cfg.FollowPods, "follow-pods", cfg.FollowPods, "Pods in kube-apiserver for the follow phase (a multiple of 100).")
	f.DurationVar(&cfg.Window, "window", cfg.Window, "Each measured window of the follow phase.")
	f.IntVar(&cfg.ChurnRate, "churn-rate", cfg.ChurnRate, "Pod creates (and deletes) a second during churn.")
	f.IntVar(&cfg.Pairs, "pairs", cfg.Pairs, "Alternations of lineage on and off in the create phase.")
	f.IntVar(&cfg.CreateClients, "create-clients", cfg.CreateClients, "Clients of the create load.")
	f.IntVar(&cfg.CreateObjects, "create-objects", cfg.CreateObjects, "Pods the create load's events are about.")
	f.DurationVar(&cfg.CreateDuration, "create-duration", cfg.CreateDuration, "Measured interval of each create run.")
	f.DurationVar(&cfg.CreateWarmup, "create-warmup", cfg.CreateWarmup, "Warmup of each create run.")
	f.StringVar(&cfg.ProfileDir, "profile-dir", "", "Run eventsd with --profiling and write CPU profiles here: of family queries one after the other (10 s, after the measured ones) and of eventsd with the lineage over the last create pair's measured interval.")
	f.StringVar(&cfg.StoreDir, "store-dir", "", "Keep the query phase's filled store in this directory and reuse it in later runs with the same --events, --objects, --namespaces, --rollouts and --pods-per-rs (while its events are well within their 24h TTL); without it each run fills a new store and removes it.")
	f.StringVar(&cfg.DataParent, "data-parent", "", "Directory for the temporary data directories (default: the system temp dir).")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "Give up after this long.")
	return cmd
}

func (cfg *familyBenchConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

// familyNamespace is where the queried family lives.
var familyNamespace = namespaceName(0)

// familyName is the queried Deployment's name.
const familyName = "web"

// The other families' shape: two rollouts of five Pods.
const (
	noiseRollouts  = 2
	noisePodsPerRS = 5
)

// target is the queried family's shape.
func (cfg *familyBenchConfig) target() familyShape {
	return familyShape{Namespace: familyNamespace, Name: familyName, Rollouts: cfg.Rollouts, PodsPerRS: cfg.PodsPerRS}
}

// noisePlan returns how many other families there are and the extra
// kubelet events they share, so that the store holds exactly Events
// events about about Objects objects.
func (cfg *familyBenchConfig) noisePlan() (families int, extra int64, err error) {
	t := cfg.target()
	base := familyShape{Rollouts: noiseRollouts, PodsPerRS: noisePodsPerRS}
	families = (cfg.Objects - t.objects()) / base.objects()
	if families < 2 {
		return 0, 0, fmt.Errorf("--objects %d leaves room for fewer than 2 other families of %d objects beside the family's %d", cfg.Objects, base.objects(), t.objects())
	}
	extra = cfg.Events - int64(t.events()) - int64(families)*int64(base.events())
	if extra < 0 {
		return 0, 0, fmt.Errorf("--events %d is fewer than the %d the family and %d other families need", cfg.Events, cfg.Events-extra, families)
	}
	return families, extra, nil
}

// noiseShape is the i-th other family of n sharing extra events: in
// bench-(i mod namespaces), named app-i except the second, named web
// (in another namespace than the family's when there are several).
func (cfg *familyBenchConfig) noiseShape(i, n int, extra int64) familyShape {
	s := familyShape{Namespace: namespaceName(i % cfg.Namespaces), Name: fmt.Sprintf("app-%d", i), Rollouts: noiseRollouts, PodsPerRS: noisePodsPerRS}
	if i == 1 && cfg.Namespaces > 1 {
		s.Name = familyName
	}
	e := extra / int64(n)
	if int64(i) < extra%int64(n) {
		e++
	}
	pods := int64(noiseRollouts * noisePodsPerRS)
	s.ExtraPerPod, s.ExtraRemainder = int(e/pods), int(e%pods)
	return s
}

func runFamilyBench(ctx context.Context, cfg familyBenchConfig) (rep *familyReport, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var bin string
	if cfg.Eventsd != "" {
		if bin, err = eventsdBinary(cfg.Eventsd); err != nil {
			return nil, err
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
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	ctx, parent, done, err := startBench(ctx, cfg.Timeout, cfg.DataParent, "family")
	if err != nil {
		return nil, err
	}
	defer done()
	started := time.Now()
	rep = &familyReport{Command: cfg.Command, Started: started, Machine: machineInfo(parent), LoadAvgStart: loadAvg(),
		Settings: map[string]any{"phases": cfg.Phases, "events": cfg.Events, "objects": cfg.Objects, "namespaces": cfg.Namespaces,
			"rollouts": cfg.Rollouts, "pods_per_rs": cfg.PodsPerRS, "queries": cfg.Queries, "rounds": cfg.Rounds, "kube_rounds": cfg.KubeRounds, "kube_lists": cfg.KubeLists,
			"follow_pods": cfg.FollowPods, "window_s": cfg.Window.Seconds(), "churn_rate": cfg.ChurnRate,
			"pairs": cfg.Pairs, "create_clients": cfg.CreateClients, "create_objects": cfg.CreateObjects,
			"create_duration_s": cfg.CreateDuration.Seconds(), "create_warmup_s": cfg.CreateWarmup.Seconds(),
			"eventsd_args": "--event-ttl=24h", "wire": wireProtobuf}}
	if cfg.KubeAPIServer != "" {
		rep.Settings["kube_apiserver_flags"] = "internal/kubeapiserver's set-up (HTTPS with its own CA, token authentication) with --authorization-mode=AlwaysAllow --event-ttl=24h; otherwise kube-apiserver's defaults"
	}
	defer func() {
		rep.ElapsedS = round3(time.Since(started).Seconds())
		rep.LoadAvgEnd = loadAvg()
		rep.Goals = familyGoals(rep)
		if err != nil {
			rep.Error = err.Error()
		}
	}()

	var kas *kubeapiserver.Cluster
	if cfg.KubeAPIServer != "" && (cfg.has(familyPhaseQuery) || cfg.has(familyPhaseFollow)) {
		cfg.logf("starting kube-apiserver")
		opts := kubeAPIServerOptions(cfg.KubeAPIServer, filepath.Join(parent, "kube"))
		opts.AuthorizationMode = "AlwaysAllow"
		opts.EventTTL = 24 * time.Hour
		if kas, err = kubeapiserver.Launch(ctx, opts); err != nil {
			return rep, fmt.Errorf("kube-apiserver: %w", err)
		}
		defer func() { err = errors.Join(err, kas.Close()) }()
	}
	if cfg.has(familyPhaseQuery) {
		if rep.Query, err = cfg.queryPhase(ctx, bin, kas, filepath.Join(parent, "query")); err != nil {
			return rep, fmt.Errorf("query phase: %w", err)
		}
	}
	if cfg.has(familyPhaseFollow) {
		if rep.Follow, err = cfg.followPhase(ctx, kas); err != nil {
			return rep, fmt.Errorf("follow phase: %w", err)
		}
	}
	if cfg.has(familyPhaseCreate) {
		if rep.Create, err = cfg.createPhase(ctx, bin, filepath.Join(parent, "create")); err != nil {
			return rep, fmt.Errorf("create phase: %w", err)
		}
	}
	return rep, nil
}

// familyFillMethod describes the query phase's fill, for the report.
const familyFillMethod = "in-process pebblestore.Store.Create (eventsd's own store) from --fill-workers goroutines, NoSync, each event " +
	"also fed to a lineage.Graph on that store (ObserveEvent, as eventsd's event learner), each object's metadata Observed with its " +
	"owners' uids (as the Follower would) and the old rollouts' Pods MarkDeleted; the graph flushed and the learner's cursor saved " +
	"at the store's revision, so that eventsd starts with the lineage as learned and does not read the events again"

// queryPhase fills the store, starts eventsd over it and measures the
// family query against the one-object-at-a-time lists of eventsd and
// kube-apiserver (when kas is not nil).
func (cfg *familyBenchConfig) queryPhase(ctx context.Context, bin string, kas *kubeapiserver.Cluster, dir string) (*familyQuery, error) {
	q := &familyQuery{StoredEvents: cfg.Events, FillMethod: familyFillMethod}
	if cfg.StoreDir != "" {
		dir = cfg.StoreDir
	}
	data := filepath.Join(dir, "data")
	fam, nsEvents, graphLen, err := cfg.reuseOrFill(ctx, dir, kas != nil, q)
	if err != nil {
		return q, err
	}
	q.FamilyEvents, q.FamilyObjects, q.GraphObjects, q.NamespaceEvents = cfg.target().events(), cfg.target().objects(), graphLen, len(nsEvents)
	t0 := time.Now()
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", data, "--event-ttl", "24h"}
	if cfg.ProfileDir != "" {
		args = append(args, "--profiling")
	}
	ev, err := startChildWithin(ctx, 10*time.Minute, "eventsd", bin, args, eventsdURLRE, "", "/readyz")
	if err != nil {
		return q, err
	}
	defer ev.stop()
	q.EventsdStartS = round3(time.Since(t0).Seconds())
	cfg.logf("eventsd serving %d events in %.1fs at %s", cfg.Events, q.EventsdStartS, ev.URL)
	// pebble compacts what the fill wrote once it is opened: the queries
	// wait for that, as they would on a store filled over days.
	t0 = time.Now()
	if err := settle(ctx, ev.pid(), 2*time.Second, 3*time.Minute); err != nil {
		return q, err
	}
	q.SettleS = round3(time.Since(t0).Seconds())
	sel := "family.kind=Deployment,family.name=" + familyName
	var cs kubernetes.Interface
	for _, c := range []struct {
		wire, accept, profile string
		into                  *familyLists
	}{
		// Protobuf first, as Kubernetes' components ask for built-in
		// types (client-go's typed clients when told to), then JSON only.
		{wireProtobuf, "application/vnd.kubernetes.protobuf,application/json", "eventsd-family-query.pprof", &q.Family},
		{wireJSON, "application/json", "eventsd-family-query-json.pprof", &q.FamilyJSON},
	} {
		rc := restConfigAuth(ev.URL, c.wire, "", nil)
		rc.AcceptContentTypes = c.accept
		// Without a source cluster every family answer warns that
		// ownership is learned from events only.
		rc.WarningHandler = rest.NoWarnings{}
		ccs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return q, err
		}
		if cs == nil {
			cs = ccs
		}
		c.into.Accept = c.accept
		var samples []time.Duration
		var cpu0 time.Duration
		for i := range cfg.Queries + 3 {
			if i == 3 {
				if cpu0, err = procCPU(ev.pid()); err != nil {
					return q, err
				}
			}
			t := time.Now()
			l, err := ccs.CoreV1().Events(familyNamespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
			d := time.Since(t)
			if err != nil {
				return q, fmt.Errorf("family query (Accept %s): %w", c.accept, err)
			}
			if len(l.Items) != q.FamilyEvents {
				return q, fmt.Errorf("family query (Accept %s) returned %d events, the family has %d", c.accept, len(l.Items), q.FamilyEvents)
			}
			c.into.Returned = len(l.Items)
			if i >= 3 { // the first lists warm up
				samples = append(samples, d)
			}
		}
		if cpu1, err := procCPU(ev.pid()); err == nil {
			c.into.EventsdCPUMs = ms((cpu1 - cpu0) / time.Duration(len(samples)))
		}
		c.into.Queries, c.into.latencies = len(samples), summarize(samples)
		cfg.logf("family query (Accept %s): p50 %.2f ms, p99 %.2f ms", c.accept, c.into.P50Ms, c.into.P99Ms)
		if cfg.ProfileDir != "" {
			c.into.Profile = filepath.Join(cfg.ProfileDir, c.profile)
			if err := profileWhile(ctx, ev.URL, c.into.Profile, 10, func() error {
				_, err := ccs.CoreV1().Events(familyNamespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
				return err
			}); err != nil {
				return q, err
			}
		}
	}
	if q.FamilyAnswer, err = cfg.answerQueries(ctx, ev, sel, q.FamilyEvents); err != nil {
		return q, err
	}
	q.EventsdRSS, _ = procStatus(ev.pid(), "VmRSS")
	counts := map[lineage.ID]int{}
	if q.EventsdPerObject, err = cfg.perObject(ctx, cs, fam, q.FamilyEvents, cfg.Rounds, 0, counts); err != nil {
		return q, fmt.Errorf("eventsd: %w", err)
	}
	cfg.logf("eventsd one object at a time: a round p50 %.1f ms", q.EventsdPerObject.Round.P50Ms)
	if kas == nil {
		return q, nil
	}
	q.KubeVersion = kas.Version()
	if err := kas.EnsureNamespace(ctx, familyNamespace); err != nil {
		return q, err
	}
	t0 = time.Now()
	if err := createAll(ctx, kas.URL(), kas.AdminToken(), cfg.KubeFillClients, nsEvents); err != nil {
		return q, fmt.Errorf("kube-apiserver fill: %w", err)
	}
	q.KubeFillS = round3(time.Since(t0).Seconds())
	cfg.logf("kube-apiserver holds bench-0's %d events (%.0fs)", len(nsEvents), q.KubeFillS)
	kcs, err := newClientsetAuth(kas.URL(), wireProtobuf, kas.AdminToken(), nil)
	if err != nil {
		return q, err
	}
	if q.KubePerObject, err = cfg.perObject(ctx, kcs, fam, q.FamilyEvents, cfg.KubeRounds, cfg.KubeLists, counts); err != nil {
		return q, fmt.Errorf("kube-apiserver: %w", err)
	}
	cfg.logf("kube-apiserver one object at a time: a round p50 %.1f ms", q.KubePerObject.Round.P50Ms)
	return q, ev.exited()
}

// perObject lists the family's events one object at a time, rounds
// measured rounds after a warm-up of perObjectWarmup lists; each round
// must return want. With sample > 0, a round lists only sample of the
// objects, spread over the family, and must return what counts says
// each holds; its duration is then extrapolated to all of them (a
// server whose list reads the whole namespace takes as long for any).
// It records each object's count in counts when it lists them all.
func (cfg *familyBenchConfig) perObject(ctx context.Context, cs kubernetes.Interface, fam familyObjects, want, rounds, sample int, counts map[lineage.ID]int) (*perObjectLists, error) {
	objs := fam.all()
	r := &perObjectLists{Rounds: rounds, Lists: len(objs)}
	list := func(o lineage.Object) (int, error) {
		l, err := cs.CoreV1().Events(familyNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(o.ID)).String()})
		if err != nil {
			return 0, fmt.Errorf("listing %s's events: %w", o.String(), err)
		}
		return len(l.Items), nil
	}
	for _, o := range objs[:min(perObjectWarmup, len(objs))] {
		if _, err := list(o); err != nil {
			return nil, err
		}
	}
	listed := objs
	if sample > 0 && sample < len(objs) {
		listed = nil
		want = 0
		for i := range sample {
			o := objs[i*len(objs)/sample]
			listed = append(listed, o)
			want += counts[o.ID]
		}
		r.Sampled = sample
	}
	var roundTimes, lists []time.Duration
	for range rounds {
		got := 0
		t0 := time.Now()
		for _, o := range listed {
			t := time.Now()
			n, err := list(o)
			if err != nil {
				return nil, err
			}
			lists = append(lists, time.Since(t))
			got += n
			if r.Sampled == 0 && counts != nil {
				counts[o.ID] = n
			}
		}
		d := time.Since(t0)
		if r.Sampled > 0 {
			d = d * time.Duration(len(objs)) / time.Duration(len(listed))
		}
		roundTimes = append(roundTimes, d)
		if got != want {
			return nil, fmt.Errorf("one object at a time: %d events of %d objects, want %d", got, len(listed), want)
		}
		r.Returned = got
	}
	r.Round, r.List = summarize(roundTimes), summarize(lists)
	return r, nil
}

// perObjectWarmup is how many lists warm a server up before the
// one-object-at-a-time rounds.
const perObjectWarmup = 10

// fillFamilies writes the query phase's events into a new store in data
// and the lineage beside them; it returns the family's objects, the
// events of the family's namespace (when keep) and the lineage's size.
func (cfg *familyBenchConfig) fillFamilies(ctx context.Context, data string, keep bool, q *familyQuery) (familyObjects, []*corev1.Event, int, error) {
	n, extra, err := cfg.noisePlan()
	if err != nil {
		return familyObjects{}, nil, 0, err
	}
	st, err := pebblestore.Open(pebblestore.Options{Dir: data, DefaultTTL: fillEventTTL, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return familyObjects{}, nil, 0, err
	}
	g := lineage.New(lineage.Options{Store: st})
	cfg.logf("fill: %d events about %d objects (the family and %d others) into %s", cfg.Events, cfg.Objects, n, data)
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan *corev1.Event, 1024)
	var wg sync.WaitGroup
	for range cfg.FillWorkers {
		wg.Go(func() {
			for ev := range ch {
				if _, err := st.Create(ctx, ev, storage.WriteOptions{TTL: fillEventTTL}); err != nil {
					cancel(fmt.Errorf("creating %s/%s: %w", ev.Namespace, ev.Name, err))
					for range ch {
					}
					return
				}
				g.ObserveEvent(ev)
			}
		})
	}
	var nsEvents []*corev1.Event
	var written int64
	emit := func(ev *corev1.Event) {
		if keep && ev.Namespace == familyNamespace {
			// The store sets the resourceVersion of what it creates.
			nsEvents = append(nsEvents, ev.DeepCopy())
		}
		written++
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
	}
	base := start.Add(-time.Hour)
	observe := func(fo familyObjects) {
		for _, o := range fo.all() {
			g.Observe(o)
		}
		for _, ps := range fo.Pods[:len(fo.Pods)-1] {
			for _, p := range ps {
				g.MarkDeleted(p.ID, time.Time{})
			}
		}
	}
	last := time.Now()
	fam := cfg.generate(ctx, n, extra, base, emit, func(fo familyObjects) {
		observe(fo)
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			cfg.logf("  fill: %d/%d events, %.0f/s", written, cfg.Events, float64(written)/time.Since(start).Seconds())
		}
	})
	close(ch)
	wg.Wait()
	err = context.Cause(ctx)
	if err == nil && written != cfg.Events {
		err = fmt.Errorf("fill: %d events generated, want %d", written, cfg.Events)
	}
	if err == nil {
		err = g.Flush(context.Background())
	}
	if err == nil {
		err = st.SaveCursor(context.Background(), lineage.EventCursor, st.Revision())
	}
	graphLen := g.Len()
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	q.FillS = round3(time.Since(start).Seconds())
	if err != nil {
		return fam, nil, 0, fmt.Errorf("fill: %w", err)
	}
	cfg.logf("  filled in %.0fs; the lineage holds %d objects", q.FillS, graphLen)
	return fam, nsEvents, graphLen, nil
}

// generate generates the query phase's families (n others sharing extra
// events, the queried one in their middle), calling emit with each event
// and observe with each family's objects, until ctx ends; it returns the
// queried family's objects. The uids and names are the same every time.
func (cfg *familyBenchConfig) generate(ctx context.Context, n int, extra int64, base time.Time, emit func(*corev1.Event), observe func(familyObjects)) familyObjects {
	var fam familyObjects
	for i := 0; i <= n && ctx.Err() == nil; i++ {
		if i == n/2 {
			fam = genFamily(cfg.target(), base, emit)
			observe(fam)
		}
		if i < n {
			observe(genFamily(cfg.noiseShape(i, n, extra), base, emit))
		}
	}
	return fam
}

// createAll creates evs through server's API from clients clients,
// retrying a failed create up to 5 times (an AlreadyExists of a retry is
// the earlier attempt's).
func createAll(ctx context.Context, server, token string, clients int, evs []*corev1.Event) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan *corev1.Event)
	var wg sync.WaitGroup
	for range clients {
		cs, err := newClientsetAuth(server, wireProtobuf, token, nil)
		if err != nil {
			return err
		}
		wg.Go(func() {
			for ev := range ch {
				var err error
				for attempt := 1; attempt <= 5; attempt++ {
					if _, err = cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err == nil ||
						(attempt > 1 && apierrors.IsAlreadyExists(err)) || ctx.Err() != nil {
						err = nil
						break
					}
					sleepUntil(ctx, time.Now().Add(time.Duration(attempt)*100*time.Millisecond))
				}
				if err != nil {
					cancel(fmt.Errorf("creating %s/%s: %w", ev.Namespace, ev.Name, err))
				}
			}
		})
	}
	for _, ev := range evs {
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(ch)
	wg.Wait()
	return context.Cause(ctx)
}

// answerQueries measures the family query's answer alone: a plain HTTP
// GET asking protobuf, its body read whole and not decoded (its length
// checked against the first answer's, decoded once to count the family's
// events), with eventsd's CPU per query.
func (cfg *familyBenchConfig) answerQueries(ctx context.Context, ev *child, sel string, want int) (familyLists, error) {
	const accept = "application/vnd.kubernetes.protobuf"
	out := familyLists{Accept: accept + " (a plain HTTP client: the body read, not decoded)"}
	u := ev.URL + "/api/v1/namespaces/" + familyNamespace + "/events?fieldSelector=" + url.QueryEscape(sel)
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer hc.CloseIdleConnections()
	get := func() ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %.200s", resp.Status, b)
		}
		return b, err
	}
	first, err := get()
	if err != nil {
		return out, fmt.Errorf("family query's answer: %w", err)
	}
	var l corev1.EventList
	if err := decodeProtobufList(first, &l); err != nil || len(l.Items) != want {
		return out, fmt.Errorf("family query's answer: %d events (%v), the family has %d", len(l.Items), err, want)
	}
	out.Returned = len(l.Items)
	for range 2 { // warm up
		if _, err := get(); err != nil {
			return out, err
		}
	}
	cpu0, err := procCPU(ev.pid())
	if err != nil {
		return out, err
	}
	samples := make([]time.Duration, 0, cfg.Queries)
	for range cfg.Queries {
		t := time.Now()
		b, err := get()
		d := time.Since(t)
		if err != nil {
			return out, fmt.Errorf("family query's answer: %w", err)
		}
		if len(b) != len(first) {
			return out, fmt.Errorf("family query's answer: %d bytes, the first was %d", len(b), len(first))
		}
		samples = append(samples, d)
	}
	cpu1, err := procCPU(ev.pid())
	if err != nil {
		return out, err
	}
	out.EventsdCPUMs = ms((cpu1 - cpu0) / time.Duration(len(samples)))
	out.Queries, out.latencies = len(samples), summarize(samples)
	cfg.logf("family query's answer (protobuf, not decoded): p50 %.2f ms, p99 %.2f ms, eventsd CPU %.2f ms a query", out.P50Ms, out.P99Ms, out.EventsdCPUMs)
	return out, nil
}

// familyGoals checks issue 31's goals.
func familyGoals(rep *familyReport) []goalCheck {
	var out []goalCheck
	if q := rep.Query; q != nil && q.Family.Queries > 0 {
		g := goalCheck{Goal: "family query p99", Target: fmt.Sprintf("≤ %d ms", familyQueryGoalMs),
			Measured: fmt.Sprintf("the answer: %.2f ms (p50 %.2f ms, eventsd CPU %.2f ms a query) over %d queries, %d events among %d, Accept: %s; "+
				"client-go accepting protobuf, its decoding included, p99 %.2f ms (p50 %.2f ms); accepting JSON only p99 %.2f ms (p50 %.2f ms)",
				q.FamilyAnswer.P99Ms, q.FamilyAnswer.P50Ms, q.FamilyAnswer.EventsdCPUMs, q.FamilyAnswer.Queries, q.FamilyEvents, q.StoredEvents, q.FamilyAnswer.Accept,
				q.Family.P99Ms, q.Family.P50Ms, q.FamilyJSON.P99Ms, q.FamilyJSON.P50Ms),
			Pass: q.FamilyAnswer.Queries > 0 && q.FamilyAnswer.P99Ms <= familyQueryGoalMs}
		if q.KubePerObject != nil {
			g.Upstream = fmt.Sprintf("kube-apiserver, one object at a time: a round of %d lists p50 %.0f ms", q.KubePerObject.Lists, q.KubePerObject.Round.P50Ms)
		}
		out = append(out, g)
	}
	if c := rep.Create; c != nil && c.Ratio > 0 {
		out = append(out, goalCheck{Goal: "create CPU with the lineage", Target: fmt.Sprintf("≤ %.2f× without", familyCreateGoal),
			Measured: fmt.Sprintf("%.3f× (%.4f against %.4f ms/create)", c.Ratio, c.OnMsPerCreate, c.OffMsPerCreate), Pass: c.Ratio <= familyCreateGoal})
	}
	return out
}

// printFamilyReport writes the report as markdown tables.
func printFamilyReport(w io.Writer, rep *familyReport) {
	fmt.Fprintf(w, "## Family timelines\n\n%s\n\n", rep.Command)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %s, Go %s, load average %s → %s, %.0fs\n\n",
		rep.Machine.NProc, rep.Machine.CPUModel, mib(rep.Machine.MemTotal), rep.Machine.GoVersion, rep.LoadAvgStart, rep.LoadAvgEnd, rep.ElapsedS)
	if q := rep.Query; q != nil {
		fmt.Fprintf(w, "### Family query: %d events of %d objects among %d stored, the lineage holding %d objects\n\n",
			q.FamilyEvents, q.FamilyObjects, q.StoredEvents, q.GraphObjects)
		if q.StoreReused {
			fmt.Fprint(w, "(the store kept from an earlier run, --store-dir) ")
		}
		fmt.Fprintf(w, "fill %.0fs; eventsd started in %.1fs and settled in %.0fs more, RSS %s\n\n", q.FillS, q.EventsdStartS, q.SettleS, mib(q.EventsdRSS))
		fmt.Fprintln(w, "| server | how | requests | events | p50 ms | p90 ms | p99 ms | max ms | eventsd CPU ms a query |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, f := range []familyLists{q.FamilyAnswer, q.Family, q.FamilyJSON} {
			if f.Queries > 0 {
				fmt.Fprintf(w, "| eventsd | family.kind=Deployment,family.name=web (one list, %d queries; Accept: %s) | 1 | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
					f.Queries, f.Accept, f.Returned, f.P50Ms, f.P90Ms, f.P99Ms, f.MaxMs, f.EventsdCPUMs)
			}
		}
		row := func(name string, p *perObjectLists) {
			if p == nil {
				return
			}
			how := fmt.Sprintf("a round; %d rounds", p.Rounds)
			returned := strconv.Itoa(p.Returned)
			if p.Sampled > 0 {
				how = fmt.Sprintf("a round, extrapolated from %d lists of objects spread over the family; %d rounds", p.Sampled, p.Rounds)
				returned = fmt.Sprintf("%d in the %d lists", p.Returned, p.Sampled)
			}
			fmt.Fprintf(w, "| %s | involvedObject.uid=…, one object at a time (%s) | %d | %s | %.1f | %.1f | %.1f | %.1f |\n",
				name, how, p.Lists, returned, p.Round.P50Ms, p.Round.P90Ms, p.Round.P99Ms, p.Round.MaxMs)
			fmt.Fprintf(w, "| %s | … each list | 1 | | %.2f | %.2f | %.2f | %.2f |\n", name, p.List.P50Ms, p.List.P90Ms, p.List.P99Ms, p.List.MaxMs)
		}
		row("eventsd", q.EventsdPerObject)
		row("kube-apiserver "+q.KubeVersion+fmt.Sprintf(" (bench-0's %d events)", q.NamespaceEvents), q.KubePerObject)
		fmt.Fprintln(w)
	}
	if f := rep.Follow; f != nil {
		fmt.Fprintf(w, "### Metadata watches: kube-apiserver with %d Pods, %d ReplicaSets, %d Deployments\n\n", f.Pods, f.ReplicaSets, f.Deployments)
		fmt.Fprintf(w, "the Follower's initial list of its default kinds: %.2fs (%d objects)\n\n", f.InitialListS, f.GraphObjects)
		fmt.Fprintln(w, "| window | s | kube-apiserver CPU s | etcd CPU s | kube-apiserver requests | the Follower's lists | its watches | churn ops |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range f.Windows {
			fmt.Fprintf(w, "| %s | %.1f | %.2f | %.2f | %.0f | %d | %d | %d |\n", x.Name, x.Seconds, x.KubeAPIServerCPUS, x.EtcdCPUS, x.ServerRequests, x.FollowerLists, x.FollowerWatches, x.ChurnOps)
		}
		fmt.Fprintln(w)
	}
	if c := rep.Create; c != nil {
		fmt.Fprintln(w, "### Create cost: eventsd --lineage=true against --lineage=false")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| lineage | clients | creates/s | p50 ms | p99 ms | eventsd CPU ms/create | cores |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, r := range c.Runs {
			fmt.Fprintf(w, "| %v | %d | %.0f | %.2f | %.2f | %s | %s |\n", r.Lineage, r.Result.Clients, r.Result.CreatesPerSec, r.Result.P50Ms, r.Result.P99Ms,
				fmtPtr(r.Result.ServerCPUMsPerReq, 4), fmtPtr(r.Result.ServerCPUCores, 2))
		}
		fmt.Fprintf(w, "\nmean CPU per create: %.4f ms with the lineage, %.4f ms without: %.3f×\n", c.OnMsPerCreate, c.OffMsPerCreate, c.Ratio)
		if c.Profile != "" {
			fmt.Fprintf(w, "profile of eventsd with the lineage: %s\n", c.Profile)
		}
		fmt.Fprintln(w)
	}
	for _, g := range rep.Goals {
		fmt.Fprintf(w, "- goal %s %s: %s (pass %v)", g.Goal, g.Target, g.Measured, g.Pass)
		if g.Upstream != "" {
			fmt.Fprintf(w, "; %s", g.Upstream)
		}
		fmt.Fprintln(w)
	}
	if rep.Error != "" {
		fmt.Fprintln(w, "error:", firstLine(rep.Error))
	}
}

// protobufMagic starts every answer in Kubernetes' protobuf envelope.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// decodeProtobufList decodes an EventList answered in Kubernetes'
// protobuf envelope (the magic, then a runtime.Unknown holding it).
func decodeProtobufList(b []byte, l *corev1.EventList) error {
	rest, ok := bytes.CutPrefix(b, protobufMagic)
	if !ok {
		return fmt.Errorf("not in the protobuf envelope: %.40q", b)
	}
	var u runtime.Unknown
	if err := u.Unmarshal(rest); err != nil {
		return err
	}
	return l.Unmarshal(u.Raw)
}
