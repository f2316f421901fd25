package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// scaleConfig configures the scale benchmark: stores of many events filled
// straight into the store (pebble) or into etcd, then eventsd started over
// them and measured.
type scaleConfig struct {
	// Eventsd are the eventsd binaries: each start of the series runs the
	// next, in turn, so that a change is measured interleaved with its
	// reference over the same store.
	Eventsd []string
	// EventsdArgs are extra flags for every eventsd.
	EventsdArgs []string
	// Reuse, when set, is a filled store to measure instead of filling
	// one (pebble: its data directory; etcd: etcd's); Events then has the
	// one count it holds.
	Reuse string
	// Backend is pebble or etcd.
	Backend string
	// Events are the store sizes, measured one after the other, each in a
	// fresh data directory under Dir.
	Events []int64
	// Dir holds the data directories; each is removed after its size is
	// measured unless Keep.
	Dir  string
	Keep bool
	// FillWorkers is the number of goroutines writing (pebble: creates in
	// flight through the store's committer; etcd: transactions in flight).
	FillWorkers int
	Namespaces  int
	TargetCount int64
	ListRepeat  int
	// Restarts is the number of times eventsd is started over each store
	// (each start measures the first lists after it).
	Restarts int
	// SettleMin and SettleMax bound the wait for eventsd's CPU to settle
	// before the settled RSS.
	SettleMin, SettleMax time.Duration
	// EtcdBinary is the etcd server (internal/etcdproc's build of go.mod's
	// etcd when empty); EtcdQuotaBytes its --quota-backend-bytes.
	EtcdBinary     string
	EtcdQuotaBytes int64
	// Profile fetches a heap profile of each settled eventsd into Dir
	// (eventsd runs with --profiling).
	Profile bool
	// FillCPUProfile, when set, is where a CPU profile of this process
	// during the fill is written.
	FillCPUProfile string
	Out            string
	Command        string
	Log            io.Writer
}

// etcdBatchOps is the puts per transaction of the etcd bulk fill: etcd's
// --max-txn-ops default is 128.
const etcdBatchOps = 125

// etcdLeaseObjects is how many objects share one lease in the etcd bulk
// fill, as kube-apiserver's lease manager attaches at most 1,000.
const etcdLeaseObjects = 1000

// scaleReport is the scale benchmark's outcome.
type scaleReport struct {
	Command string        `json:"command"`
	Machine machine       `json:"machine"`
	Started time.Time     `json:"started"`
	LoadAvg []string      `json:"load_average"`
	Sizes   []*scalePoint `json:"sizes"`
}

// scalePoint is one store size measured.
type scalePoint struct {
	Backend string `json:"backend"`
	Events  int64  `json:"events"`
	// FillMethod says how the events were written.
	FillMethod string      `json:"fill_method"`
	Fill       *fillResult `json:"fill"`
	// Disk is the store's data directory (pebble's, or etcd's) once
	// eventsd has settled over it.
	Disk         diskUsage `json:"disk"`
	DiskPerEvent float64   `json:"disk_bytes_per_event"`
	// EtcdRSS is etcd's memory once the replica has settled.
	EtcdRSS int64 `json:"etcd_rss_bytes,omitempty"`
	// IndexDisk is, on etcd, the replica's --data-dir: its on-disk index
	// (--etcd-index=disk), kept across the starts so that the first
	// builds it and the later ones resume it.
	IndexDisk *diskUsage    `json:"eventsd_index_disk,omitempty"`
	Starts    []*scaleStart `json:"starts"`
}

// scaleStart is one start of eventsd over a filled store.
type scaleStart struct {
	// Binary is the eventsd binary started.
	Binary string `json:"eventsd"`
	// StartS is exec to /readyz passing.
	StartS   float64 `json:"start_s"`
	RSSReady int64   `json:"rss_ready_bytes"`
	// List is the first series of lists after the start: its first list is
	// the first the process serves.
	List *listResult `json:"list_after_start"`
	// Settled is a series once eventsd's CPU has settled.
	Settled    *listResult        `json:"list_settled"`
	RSSSettled int64              `json:"rss_settled_bytes"`
	PeakRSS    int64              `json:"peak_rss_bytes"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
	Profile    string             `json:"heap_profile,omitempty"`
}

func newScaleCommand() *cobra.Command {
	cfg := scaleConfig{Backend: backendPebble, Events: []int64{1_000_000}, Dir: "/tmp/scale", FillWorkers: 256, Namespaces: 10,
		TargetCount: 50, ListRepeat: 50, Restarts: 2, SettleMin: 5 * time.Second, SettleMax: 60 * time.Second,
		EtcdQuotaBytes: 32 << 30, Log: os.Stderr}
	var events []string
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Fill a store with millions of events directly, then time eventsd's start, lists, memory and disk over it",
		Long: `scale fills, for each --events size, a fresh store straight through the
storage layer rather than through eventsd's API (pebble: pebblestore.Store.Create
in this process, --fill-workers at a time, grouped by its committer without
fsync, closed cleanly; etcd: a real etcd process, filled with transactions of
125 puts of kube-apiserver's keys and values, one lease per 1,000 events), then
starts eventsd over it --restarts times and measures each start: exec to
ready, the first --repeat lists of one pod's --target-count events after it
(kubectl's field selector; the first is the first list the process serves),
the same once its CPU has settled, RSS and the store's disk use.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Events = nil
			for _, e := range events {
				n, err := strconv.ParseInt(strings.ReplaceAll(e, "_", ""), 10, 64)
				if err != nil || n < 1 {
					return fmt.Errorf("--events: %q is not a positive count", e)
				}
				cfg.Events = append(cfg.Events, n)
			}
			cfg.Command = "eventsbench " + shellJoin(os.Args[1:])
			rep, err := runScale(cmd.Context(), cfg)
			if rep != nil {
				printScale(cmd.OutOrStdout(), rep)
				if cfg.Out != "" {
					err = errors.Join(err, writeReport(cfg.Out, rep))
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Eventsd, "eventsd", nil, "eventsd binaries; with several, the starts alternate between them (a change interleaved with its reference).")
	f.StringSliceVar(&cfg.EventsdArgs, "eventsd-args", nil, "Extra flags for eventsd (comma-separated).")
	f.StringVar(&cfg.Reuse, "reuse", "", "Measure this filled store (pebble's data directory, or etcd's) instead of filling one; --events is its one count. It is not removed.")
	f.StringVar(&cfg.Backend, "backend", cfg.Backend, "Storage backend: pebble or etcd.")
	f.StringSliceVar(&events, "events", []string{"1000000"}, "Store sizes, each filled and measured in a fresh data directory.")
	f.StringVar(&cfg.Dir, "dir", cfg.Dir, "Directory for the data directories.")
	f.BoolVar(&cfg.Keep, "keep", false, "Keep each data directory after it is measured.")
	f.IntVar(&cfg.FillWorkers, "fill-workers", cfg.FillWorkers, "Writes in flight during the fill.")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Namespaces the pods are spread over.")
	f.Int64Var(&cfg.TargetCount, "target-count", cfg.TargetCount, "Events about the listed pod.")
	f.IntVar(&cfg.ListRepeat, "repeat", cfg.ListRepeat, "Lists in each series.")
	f.IntVar(&cfg.Restarts, "restarts", cfg.Restarts, "Starts of eventsd over each filled store.")
	f.StringVar(&cfg.EtcdBinary, "etcd-binary", "", "etcd server binary (default: internal/etcdproc's build of go.mod's etcd).")
	f.Int64Var(&cfg.EtcdQuotaBytes, "quota-backend-bytes", cfg.EtcdQuotaBytes, "etcd's --quota-backend-bytes (10M events take about 10 GB).")
	f.BoolVar(&cfg.Profile, "profile", false, "Run eventsd with --profiling and save a heap profile of each settled start under --dir.")
	f.StringVar(&cfg.Out, "out", "", "Write the JSON report here.")
	f.StringVar(&cfg.FillCPUProfile, "fill-cpuprofile", "", "Write a CPU profile of this process during the fill here.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

func (cfg *scaleConfig) logf(format string, args ...any) {
	logLine(cfg.Log, format, args...)
}

func (cfg *scaleConfig) validate() error {
	switch {
	case cfg.Backend != backendPebble && cfg.Backend != backendEtcd:
		return fmt.Errorf("--backend must be %s or %s", backendPebble, backendEtcd)
	case len(cfg.Events) == 0:
		return errors.New("--events is required")
	case len(cfg.Eventsd) == 0:
		return errors.New("--eventsd is required")
	case cfg.Reuse != "" && len(cfg.Events) != 1:
		return errors.New("--reuse measures one store: give its count as the one --events")
	case cfg.FillWorkers < 1 || cfg.Namespaces < 1 || cfg.ListRepeat < 1 || cfg.Restarts < 1:
		return errors.New("--fill-workers, --namespaces, --repeat and --restarts must be at least 1")
	}
	for _, n := range cfg.Events {
		if cfg.TargetCount < 1 || cfg.TargetCount > n {
			return fmt.Errorf("--target-count must be between 1 and each --events (%d)", n)
		}
	}
	return nil
}

// runScale measures each size in turn.
func runScale(ctx context.Context, cfg scaleConfig) (*scaleReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	rep := &scaleReport{Command: cfg.Command, Machine: machineInfo(cfg.Dir), Started: time.Now().UTC(), LoadAvg: []string{loadAvg()}}
	defer func() { rep.LoadAvg = append(rep.LoadAvg, loadAvg()) }()
	for _, n := range cfg.Events {
		dir, err := os.MkdirTemp(cfg.Dir, fmt.Sprintf("%s-%d-", cfg.Backend, n))
		if err != nil {
			return rep, err
		}
		p := &scalePoint{Backend: cfg.Backend, Events: n}
		rep.Sizes = append(rep.Sizes, p)
		if cfg.Backend == backendPebble {
			err = cfg.pebbleSize(ctx, p, dir)
		} else {
			err = cfg.etcdSize(ctx, p, dir)
		}
		if !cfg.Keep { // a reused store is outside dir
			err = errors.Join(err, os.RemoveAll(dir))
		}
		if err != nil {
			return rep, fmt.Errorf("%d events on %s: %w", n, cfg.Backend, err)
		}
	}
	return rep, nil
}

// fillConfigFor is the fill of n events: the etcd phase's plan (50 events
// per pod, spread over the namespaces, TargetCount about target-pod in
// bench-0).
func (cfg *scaleConfig) fillConfigFor(n int64) fillConfig {
	return fillConfig{Total: n, Clients: cfg.FillWorkers, Namespaces: cfg.Namespaces, Namespace: namespaceName(0),
		TargetPod: "target-pod", TargetCount: cfg.TargetCount, PerPod: 50, PodPrefix: "fill-pod",
		Progress: cfg.Log, ProgressEvery: 30 * time.Second}
}

// pebbleFillMethod describes the pebble fill, for the report.
const pebbleFillMethod = "in-process pebblestore.Store.Create (eventsd's own store: same keys, indexes, TTL queue and change log) " +
	"from --fill-workers goroutines, grouped by the store's committer, NoSync (the store is closed cleanly before eventsd opens it)"

func (cfg *scaleConfig) pebbleSize(ctx context.Context, p *scalePoint, dir string) error {
	data := filepath.Join(dir, "data")
	if cfg.Reuse != "" {
		data, p.FillMethod = cfg.Reuse, "reused: "+cfg.Reuse
	} else if err := cfg.pebbleFill(ctx, p, data); err != nil {
		return err
	}
	start := func(bin string) (*child, error) {
		extra := append([]string(nil), cfg.EventsdArgs...)
		if cfg.Profile {
			extra = append(extra, "--profiling")
		}
		// Not startEventsd's 30 s: over 10M events a start that rebuilds
		// the key presence set takes minutes on a loaded machine.
		return startChildWithin(ctx, 30*time.Minute, "eventsd", bin,
			append([]string{"--listen", "127.0.0.1:0", "--data-dir", data, "--event-ttl", "24h"}, extra...), eventsdURLRE, "", "/readyz")
	}
	if err := cfg.starts(ctx, p, dir, start); err != nil {
		return err
	}
	var err error
	p.Disk, err = dirUsage(data)
	p.DiskPerEvent = round3(float64(p.Disk.Bytes) / float64(p.Events))
	return err
}

// pebbleFill fills a new store in data.
func (cfg *scaleConfig) pebbleFill(ctx context.Context, p *scalePoint, data string) error {
	p.FillMethod = pebbleFillMethod
	st, err := pebblestore.Open(pebblestore.Options{Dir: data, DefaultTTL: fillEventTTL, NoSync: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	fc := cfg.fillConfigFor(p.Events)
	fc.NewCreator = func() (createFunc, error) {
		return func(ctx context.Context, ev *corev1.Event) error {
			_, err := st.Create(ctx, ev, storage.WriteOptions{TTL: fillEventTTL})
			if errors.Is(err, storage.ErrExists) {
				return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, ev.Name)
			}
			return err
		}, nil
	}
	cfg.logf("pebble fill: %d events into %s, %d workers", p.Events, data, fc.Clients)
	stopProfile, err := cfg.startFillProfile()
	if err != nil {
		return errors.Join(err, st.Close())
	}
	p.Fill, err = runFill(ctx, fc)
	err = errors.Join(err, stopProfile())
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pebble fill: %w", err)
	}
	cfg.logf("  filled in %.0fs (%.0f/s)", p.Fill.DurationS, p.Fill.PerSec)
	return nil
}

// etcdFillMethod describes the etcd bulk fill, for the report.
const etcdBulkFillMethod = "straight into etcd: transactions of 125 puts (etcd's --max-txn-ops is 128) of kube-apiserver's keys and " +
	"eventsd's values (etcdstore.NewValueEncoder), one lease per 1,000 events (as kube-apiserver's lease manager), " +
	"--fill-workers transactions in flight over one client; one revision per transaction, not per event"

func (cfg *scaleConfig) etcdSize(ctx context.Context, p *scalePoint, dir string) (err error) {
	bin := cfg.EtcdBinary
	if bin == "" {
		if bin, err = etcdproc.Binary(); err != nil {
			return err
		}
	}
	etcdDir := filepath.Join(dir, "etcd")
	if cfg.Reuse != "" {
		etcdDir = cfg.Reuse
	}
	etcd, err := etcdProc{Binary: bin, Quota: cfg.EtcdQuotaBytes, StartTimeout: 20 * time.Minute}.start(ctx, etcdDir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, etcd.stop()) }()
	if cfg.Reuse != "" {
		p.FillMethod = "reused: " + cfg.Reuse
	} else {
		p.FillMethod = etcdBulkFillMethod
		cfg.logf("etcd fill: %d events into etcd at %s (pid %d, %s), %d transactions in flight", p.Events, etcd.URL, etcd.pid(), etcdDir, cfg.FillWorkers)
		stopProfile, err := cfg.startFillProfile()
		if err != nil {
			return err
		}
		p.Fill, err = etcdBulkFill(ctx, etcd.URL, etcd.pid(), cfg.fillConfigFor(p.Events))
		if err = errors.Join(err, stopProfile()); err != nil {
			return fmt.Errorf("etcd fill: %w", err)
		}
		cfg.logf("  filled in %.0fs (%.0f/s), etcd CPU %s ms/event", p.Fill.DurationS, p.Fill.PerSec, fmtPtr(p.Fill.ServerCPUMsPerEvent, 4))
	}
	// One data directory for every start: the replica's on-disk index
	// lives there, so the first start builds it (a keys-only read and a
	// fetch of every event) and the later ones resume it.
	eventsdData := filepath.Join(dir, "eventsd")
	start := func(bin string) (*child, error) {
		args := []string{"--listen", "127.0.0.1:0", "--data-dir", eventsdData, "--event-ttl", "24h",
			"--storage-backend", backendEtcd, "--etcd-servers", etcd.URL}
		args = append(args, cfg.EventsdArgs...)
		if cfg.Profile {
			args = append(args, "--profiling")
		}
		return startChildWithin(ctx, 30*time.Minute, "eventsd on etcd", bin, args, eventsdURLRE, "http", "/readyz")
	}
	if err := cfg.starts(ctx, p, dir, start); err != nil {
		return err
	}
	p.EtcdRSS, _ = procStatus(etcd.pid(), "VmRSS")
	if u, err := dirUsage(eventsdData); err == nil && u.Bytes > 0 {
		p.IndexDisk = &u
		cfg.logf("  the replica's data directory (its on-disk index): %s", mib(u.Bytes))
	}
	p.Disk, err = dirUsage(etcdDir)
	p.DiskPerEvent = round3(float64(p.Disk.Bytes) / float64(p.Events))
	return err
}

// starts starts eventsd cfg.Restarts times over the filled store, the
// binaries in turn, and measures each start.
func (cfg *scaleConfig) starts(ctx context.Context, p *scalePoint, dir string, start func(bin string) (*child, error)) error {
	const targetPod = "target-pod"
	targetNS := namespaceName(0)
	list := func(ev *child) (*listResult, error) {
		l, err := runList(ctx, listConfig{Wire: wireProtobuf, Server: ev.URL, Namespace: targetNS, Pod: targetPod, Repeat: cfg.ListRepeat})
		if err != nil {
			return nil, err
		}
		if int64(l.Items) != cfg.TargetCount {
			return nil, fmt.Errorf("listing %s/%s found %d events, want %d", targetNS, targetPod, l.Items, cfg.TargetCount)
		}
		return l, nil
	}
	for i := range cfg.Restarts {
		s := &scaleStart{Binary: cfg.Eventsd[i%len(cfg.Eventsd)]}
		p.Starts = append(p.Starts, s)
		t0 := time.Now()
		ev, err := start(s.Binary)
		if err != nil {
			return err
		}
		err = cfg.measureStart(ctx, p, s, ev, list, t0, filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", i)))
		if err = errors.Join(err, ev.stop()); err != nil {
			return fmt.Errorf("start %d: %w", i+1, err)
		}
	}
	return nil
}

func (cfg *scaleConfig) measureStart(ctx context.Context, p *scalePoint, s *scaleStart, ev *child, list func(*child) (*listResult, error),
	t0 time.Time, profile string) (err error) {
	s.StartS = round3(time.Since(t0).Seconds())
	if s.RSSReady, err = procStatus(ev.pid(), "VmRSS"); err != nil {
		return err
	}
	if s.List, err = list(ev); err != nil {
		return err
	}
	cfg.logf("  %s over %d events: ready in %.1fs, RSS %s; lists first %.2f ms p50 %.2f ms p99 %.2f ms", cfg.Backend, p.Events,
		s.StartS, mib(s.RSSReady), s.List.FirstMs, s.List.P50Ms, s.List.P99Ms)
	if err := settle(ctx, ev.pid(), cfg.SettleMin, cfg.SettleMax); err != nil {
		return err
	}
	if s.Settled, err = list(ev); err != nil {
		return err
	}
	if s.RSSSettled, err = procStatus(ev.pid(), "VmRSS"); err != nil {
		return err
	}
	s.PeakRSS, _ = procStatus(ev.pid(), "VmHWM")
	if m, err := ev.scrapeMetrics(ctx); err == nil {
		s.Metrics = map[string]float64{}
		for _, k := range []string{"eventsd_stored_events", "go_memstats_heap_inuse_bytes", "go_memstats_heap_sys_bytes",
			"go_memstats_sys_bytes", "go_goroutines"} {
			if v, ok := m[k]; ok {
				s.Metrics[k] = v
			}
		}
		if n, ok := m["eventsd_stored_events"]; ok && int64(n) != p.Events {
			return fmt.Errorf("eventsd reports %d stored events, %d were filled", int64(n), p.Events)
		}
	}
	if cfg.Profile {
		if err := fetchHeapProfile(ctx, ev.URL, profile); err != nil {
			return err
		}
		s.Profile = profile
	}
	cfg.logf("  settled: RSS %s (peak %s), lists p50 %.2f ms p99 %.2f ms", mib(s.RSSSettled), mib(s.PeakRSS), s.Settled.P50Ms, s.Settled.P99Ms)
	return nil
}

// etcdBulkFill writes fc.Total events of fc's plan straight into etcd at
// url. Every worker takes a run of etcdLeaseObjects consecutive events,
// grants their lease and puts them etcdBatchOps at a time.
func etcdBulkFill(ctx context.Context, url string, pid int, fc fillConfig) (*fillResult, error) {
	fc.Server = url
	if err := fc.validate(); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second,
		MaxCallSendMsgSize: 8 << 20, Logger: nil})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	encode := etcdstore.NewValueEncoder()
	plan := newFillPlan(fc.Total, fc.TargetCount, fc.PerPod)
	target := newPod(fc.Namespace, fc.TargetPod)
	root := etcdstore.DefaultPrefix + "/events/"
	ttl := ttlSecondsFor(fillEventTTL)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, created atomic.Int64
	srv0, _ := procCPU(pid)
	self0, _ := procCPU(0)
	start := time.Now()
	var wg sync.WaitGroup
	for range fc.Clients {
		wg.Go(func() {
			ops := make([]clientv3.Op, 0, etcdBatchOps)
			for ctx.Err() == nil {
				first := (next.Add(1) - 1) * etcdLeaseObjects
				if first >= fc.Total {
					return
				}
				last := min(first+etcdLeaseObjects, fc.Total)
				lease, err := cli.Grant(ctx, ttl)
				if err != nil {
					cancel(fmt.Errorf("granting a lease: %w", err))
					return
				}
				for i := first; i < last; {
					ops = ops[:0]
					for ; i < last && len(ops) < etcdBatchOps; i++ {
						isTarget, podIdx := plan.at(i)
						p := target
						if !isTarget {
							p = newPod(namespaceName(int(podIdx%int64(fc.Namespaces))), fc.PodPrefix+"-"+strconv.FormatInt(podIdx, 10))
						}
						ev := newEvent(p, int(i))
						v, err := encode(ev)
						if err != nil {
							cancel(err)
							return
						}
						ops = append(ops, clientv3.OpPut(root+ev.Namespace+"/"+ev.Name, string(v), clientv3.WithLease(lease.ID)))
					}
					if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
						cancel(fmt.Errorf("putting events %d..%d: %w", i-int64(len(ops)), i-1, err))
						return
					}
					created.Add(int64(len(ops)))
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(fc.ProgressEvery)
	defer t.Stop()
	lastN, lastAt := int64(0), start
loop:
	for {
		select {
		case <-done:
			break loop
		case now := <-t.C:
			if fc.Progress != nil {
				n := created.Load()
				fmt.Fprintf(fc.Progress, "etcd fill: %d/%d events, %.0f/s now, %.0f/s overall\n",
					n, fc.Total, float64(n-lastN)/now.Sub(lastAt).Seconds(), float64(n)/now.Sub(start).Seconds())
				lastN, lastAt = n, now
			}
		}
	}
	elapsed := time.Since(start)
	srv1, srvErr := procCPU(pid)
	self1, _ := procCPU(0)
	res := &fillResult{Total: fc.Total, Created: created.Load(), TargetCount: fc.TargetCount, Pods: plan.pods, Clients: fc.Clients,
		DurationS: round3(elapsed.Seconds())}
	res.PerSec = round3(float64(res.Created) / elapsed.Seconds())
	if res.Created > 0 {
		res.ClientCPUMsPerEvent = round3(ms(self1-self0) / float64(res.Created))
		if srvErr == nil {
			v := round3(ms(srv1-srv0) / float64(res.Created))
			res.ServerCPUMsPerEvent = &v
		}
	}
	if err := context.Cause(ctx); err != nil {
		res.FirstError = err.Error()
		return res, err
	}
	return res, nil
}

// ttlSecondsFor is the lease TTL kube-apiserver's lease manager grants for
// ttl: ttl plus its reuse window, min(5% of ttl, 60 s).
func ttlSecondsFor(ttl time.Duration) int64 {
	return int64((ttl + min(ttl/20, time.Minute)) / time.Second)
}

func printScale(w io.Writer, rep *scaleReport) {
	fmt.Fprintf(w, "\n- Command: `%s`\n- Started %s; load average %s at the start, %s at the end\n", rep.Command,
		rep.Started.Format(time.RFC3339), rep.LoadAvg[0], rep.LoadAvg[len(rep.LoadAvg)-1])
	fmt.Fprintf(w, "- Machine: %d CPUs, %s, Go %s\n\n", rep.Machine.NProc, rep.Machine.CPUModel, rep.Machine.GoVersion)
	fmt.Fprintln(w, "| backend | events | fill s | fill /s | start (eventsd) | exec to ready s | list first ms | p50 ms | p99 ms | settled p50 ms | settled p99 ms | RSS ready | RSS settled | peak RSS | heap in use | disk | disk B/event |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range rep.Sizes {
		for i, s := range p.Starts {
			fillS, fillRate := "", ""
			if i == 0 && p.Fill != nil {
				fillS, fillRate = fmt.Sprintf("%.0f", p.Fill.DurationS), fmt.Sprintf("%.0f", p.Fill.PerSec)
			}
			row := fmt.Sprintf("| %s | %d | %s | %s | %d (%s) | %.1f |", p.Backend, p.Events, fillS, fillRate, i+1, filepath.Base(s.Binary), s.StartS)
			if s.List != nil {
				row += fmt.Sprintf(" %.2f | %.2f | %.2f |", s.List.FirstMs, s.List.P50Ms, s.List.P99Ms)
			} else {
				row += " | | |"
			}
			if s.Settled != nil {
				row += fmt.Sprintf(" %.2f | %.2f |", s.Settled.P50Ms, s.Settled.P99Ms)
			} else {
				row += " | |"
			}
			row += fmt.Sprintf(" %s | %s | %s | %s | %s | %.0f |", mib(s.RSSReady), mib(s.RSSSettled), mib(s.PeakRSS),
				mib(int64(s.Metrics["go_memstats_heap_inuse_bytes"])), mib(p.Disk.Bytes), p.DiskPerEvent)
			fmt.Fprintln(w, row)
		}
	}
	fmt.Fprintln(w)
	for _, p := range rep.Sizes {
		fmt.Fprintf(w, "- %s, %d events: %s", p.Backend, p.Events, p.FillMethod)
		if p.EtcdRSS > 0 {
			fmt.Fprintf(w, "; etcd RSS %s", mib(p.EtcdRSS))
		}
		fmt.Fprintln(w)
	}
}

// fetchHeapProfile saves server's heap profile (eventsd --profiling) at
// path.
func fetchHeapProfile(ctx context.Context, server, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/debug/pprof/heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s heap profile: %s", server, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// startFillProfile starts the fill's CPU profile, if asked for; the
// function returned stops it.
func (cfg *scaleConfig) startFillProfile() (func() error, error) {
	if cfg.FillCPUProfile == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(cfg.FillCPUProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}
