package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// etcdFillMethod describes how the etcd phase fills etcd, for the report.
const etcdFillMethod = "in-process etcdstore.Store.Create (eventsd's own write path: kube-apiserver's key layout, protobuf values, " +
	"one Txn per event, leases reused as eventsd does) from --fill-clients goroutines over one etcd client; not through eventsd's HTTP API"

// fillEventTTL is the TTL of the events the etcd fill writes: eventsd's
// --event-ttl in this benchmark, so that none expires during a run.
const fillEventTTL = 24 * time.Hour

// etcdStorage is what the etcd phase measured: eventsd replicas
// (--storage-backend=etcd) over one etcd holding Events events.
type etcdStorage struct {
	Events int64 `json:"events"`
	// FillMethod says how the events were written.
	FillMethod string `json:"fill_method"`
	// Fill's server CPU is etcd's.
	Fill *fillResult `json:"fill"`
	// EtcdDisk is etcd's data directory after the fill; EtcdRSS its
	// memory then.
	EtcdDisk diskUsage `json:"etcd_disk"`
	EtcdRSS  int64     `json:"etcd_rss_bytes"`

	// Baseline is a replica over the empty etcd, after the same series of
	// lists and the same settling as the measured one.
	BaselineRSS       int64   `json:"baseline_rss_bytes"`
	BaselineHeapInuse float64 `json:"baseline_heap_inuse_bytes"`

	// StartS is how long the replica took from exec to ready (its index is
	// built before it serves).
	StartS    float64     `json:"replica_start_s"`
	RSSReady  int64       `json:"rss_ready_bytes"`
	ListFirst *listResult `json:"list_ready"`
	SettleS   float64     `json:"settle_s"`
	// RSSSettled and ListSettled are measured once the replica's CPU use
	// has settled; PeakRSS is its VmHWM then.
	RSSSettled  int64       `json:"rss_settled_bytes"`
	PeakRSS     int64       `json:"peak_rss_bytes"`
	ListSettled *listResult `json:"list_settled"`
	// RSSBytesPerEvent is (RSSSettled - BaselineRSS) / Events;
	// HeapBytesPerEvent the same of go_memstats_heap_inuse_bytes.
	RSSBytesPerEvent  float64            `json:"rss_bytes_per_event"`
	HeapBytesPerEvent float64            `json:"heap_inuse_bytes_per_event"`
	Metrics           map[string]float64 `json:"replica_metrics,omitempty"`

	// Reads are the read throughput benchmarks: one replica, then two.
	Reads []*listLoadResult `json:"reads,omitempty"`
}

// replicaMetrics are the eventsd metrics the etcd phase reports.
var replicaMetrics = []string{"eventsd_stored_events", "go_memstats_heap_inuse_bytes", "go_memstats_heap_sys_bytes",
	"go_memstats_sys_bytes", "go_goroutines"}

// storeCreator returns a create function over st for runFill: an event
// that exists gives apierrors' AlreadyExists, as eventsd would answer.
func storeCreator(st *etcdstore.Store) func() (createFunc, error) {
	return func() (createFunc, error) {
		return func(ctx context.Context, ev *corev1.Event) error {
			_, err := st.Create(ctx, ev, storage.WriteOptions{TTL: fillEventTTL})
			if errors.Is(err, storage.ErrExists) {
				return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, ev.Name)
			}
			return err
		}, nil
	}
}

// etcdPhase starts etcd, measures a replica over it while empty (the
// baseline), fills it with cfg.EtcdEvents events (cfg.TargetCount about
// one pod), and measures a replica over them: start time, list latency,
// RSS; then the read throughput of one replica and of two.
func (cfg *runConfig) etcdPhase(ctx context.Context, rep *runReport, self, eventsdBin, dir string) (err error) {
	es := &etcdStorage{Events: cfg.EtcdEvents, FillMethod: etcdFillMethod}
	rep.Etcd = es
	var children []*child
	// Stopped in reverse: eventsd before the etcd it uses.
	defer func() { err = errors.Join(err, stopReverse(children)) }()
	etcd, err := cfg.etcdProc(self).start(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return err
	}
	children = append(children, etcd)
	cfg.logf("etcd phase: etcd at %s (pid %d, data %s)", etcd.URL, etcd.pid(), filepath.Join(dir, "etcd"))
	const targetPod = "target-pod"
	targetNS := namespaceName(0)
	list := func(ev *child, want int64) (*listResult, error) {
		l, err := runList(ctx, listConfig{Wire: wireProtobuf, Server: ev.URL, Namespace: targetNS, Pod: targetPod, Repeat: cfg.ListRepeat})
		if err != nil {
			return nil, err
		}
		if int64(l.Items) != want {
			return nil, fmt.Errorf("listing %s/%s found %d events, want %d", targetNS, targetPod, l.Items, want)
		}
		return l, nil
	}
	heapInuse := func(ev *child) (float64, map[string]float64) {
		m, err := ev.scrapeMetrics(ctx)
		if err != nil {
			return 0, nil
		}
		out := map[string]float64{}
		for _, k := range replicaMetrics {
			if v, ok := m[k]; ok {
				out[k] = v
			}
		}
		return m["go_memstats_heap_inuse_bytes"], out
	}

	// The baseline: a replica over the empty etcd, through the same steps.
	base, err := startEventsdEtcd(ctx, eventsdBin, filepath.Join(dir, "eventsd-baseline"), etcd.URL, replicaStartTimeout)
	if err != nil {
		return err
	}
	if _, err := list(base, 0); err != nil {
		return errors.Join(fmt.Errorf("baseline replica: %w", err), base.stop())
	}
	if err := settle(ctx, base.pid(), cfg.SettleMin, cfg.SettleMax); err != nil {
		return errors.Join(err, base.stop())
	}
	if _, err := list(base, 0); err != nil {
		return errors.Join(fmt.Errorf("baseline replica: %w", err), base.stop())
	}
	es.BaselineRSS, err = procStatus(base.pid(), "VmRSS")
	es.BaselineHeapInuse, _ = heapInuse(base)
	if err = errors.Join(err, base.stop()); err != nil {
		return fmt.Errorf("baseline replica: %w", err)
	}
	cfg.logf("  baseline replica over the empty etcd: RSS %s, heap in use %s", mib(es.BaselineRSS), mib(int64(es.BaselineHeapInuse)))

	// The fill, through eventsd's store in this process.
	st, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{etcd.URL}, DefaultTTL: fillEventTTL, CompactionInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("etcd fill: %w", err)
	}
	fc := fillConfig{Total: cfg.EtcdEvents, Clients: cfg.FillClients, Namespaces: cfg.Namespaces,
		Namespace: targetNS, TargetPod: targetPod, TargetCount: cfg.TargetCount, PerPod: 50, PodPrefix: "fill-pod",
		PID: etcd.pid(), NewCreator: storeCreator(st), Progress: cfg.Log, ProgressEvery: 15 * time.Second}
	cfg.logf("etcd fill: %d events (%d about %s/%s), %d goroutines through etcdstore", fc.Total, fc.TargetCount, targetNS, targetPod, fc.Clients)
	es.Fill, err = runFill(ctx, fc)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = etcd.exited()
	}
	if err != nil {
		return fmt.Errorf("etcd fill: %w", err)
	}
	cfg.logf("  %.0f events/s, etcd CPU %s ms/event", es.Fill.PerSec, fmtPtr(es.Fill.ServerCPUMsPerEvent, 4))
	if es.EtcdDisk, err = dirUsage(filepath.Join(dir, "etcd")); err != nil {
		return err
	}
	es.EtcdRSS, _ = procStatus(etcd.pid(), "VmRSS")

	// The measured replica.
	t0 := time.Now()
	a, err := startEventsdEtcd(ctx, eventsdBin, filepath.Join(dir, "eventsd-a"), etcd.URL, replicaStartTimeout)
	if err != nil {
		return err
	}
	children = append(children, a)
	es.StartS = round3(time.Since(t0).Seconds())
	if es.RSSReady, err = procStatus(a.pid(), "VmRSS"); err != nil {
		return err
	}
	if es.ListFirst, err = list(a, cfg.TargetCount); err != nil {
		return fmt.Errorf("replica over %d events: %w", cfg.EtcdEvents, err)
	}
	cfg.logf("  replica ready in %.1fs: RSS %s, list p50 %.2f ms p99 %.2f ms (%d items)", es.StartS, mib(es.RSSReady),
		es.ListFirst.P50Ms, es.ListFirst.P99Ms, es.ListFirst.Items)
	settleStart := time.Now()
	if err := settle(ctx, a.pid(), cfg.SettleMin, cfg.SettleMax); err != nil {
		return err
	}
	es.SettleS = round3(time.Since(settleStart).Seconds())
	if es.ListSettled, err = list(a, cfg.TargetCount); err != nil {
		return fmt.Errorf("replica over %d events: %w", cfg.EtcdEvents, err)
	}
	if es.RSSSettled, err = procStatus(a.pid(), "VmRSS"); err != nil {
		return err
	}
	es.PeakRSS, _ = procStatus(a.pid(), "VmHWM")
	var heap float64
	heap, es.Metrics = heapInuse(a)
	es.RSSBytesPerEvent = round3(float64(es.RSSSettled-es.BaselineRSS) / float64(cfg.EtcdEvents))
	es.HeapBytesPerEvent = round3((heap - es.BaselineHeapInuse) / float64(cfg.EtcdEvents))
	if n, ok := es.Metrics["eventsd_stored_events"]; ok && int64(n) != cfg.EtcdEvents {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the etcd replica reports %d stored events after filling %d", int64(n), cfg.EtcdEvents))
	}
	cfg.logf("  settled after %.1fs: RSS %s (peak %s), %.0f B/event over the baseline (heap %.0f B/event), list p50 %.2f ms p99 %.2f ms",
		es.SettleS, mib(es.RSSSettled), mib(es.PeakRSS), es.RSSBytesPerEvent, es.HeapBytesPerEvent, es.ListSettled.P50Ms, es.ListSettled.P99Ms)

	// Read throughput: one replica, then two with the clients split.
	lc := listLoadConfig{Clients: cfg.ReadClients, Duration: cfg.Duration, Warmup: cfg.Warmup, Namespace: targetNS, Pod: targetPod,
		WantItems: int(cfg.TargetCount)}
	read := func(replicas ...*child) error {
		lc.Servers, lc.PIDs = nil, []int{etcd.pid()}
		for _, r := range replicas {
			lc.Servers, lc.PIDs = append(lc.Servers, r.URL), append(lc.PIDs, r.pid())
		}
		cfg.logf("reads: %d clients over %d replica(s) for %s after %s warmup", lc.Clients, len(replicas), lc.Duration, lc.Warmup)
		res, err := runListLoad(ctx, lc)
		if err == nil {
			for _, c := range children {
				err = errors.Join(err, c.exited())
			}
		}
		if res != nil {
			es.Reads = append(es.Reads, res)
		}
		if err != nil {
			return fmt.Errorf("read throughput over %d replica(s): %w", len(replicas), err)
		}
		if res.Errors > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("reads over %d replica(s): %d errors, the first: %s", len(replicas), res.Errors, res.FirstError))
		}
		cfg.logf("  %.0f lists/s, p50 %.2f ms, p99 %.2f ms, server CPU %s ms/list (replicas and etcd), %d errors",
			res.ListsPerSec, res.P50Ms, res.P99Ms, fmtPtr(res.ServerCPUMsPerList, 4), res.Errors)
		return nil
	}
	if err := read(a); err != nil {
		return err
	}
	b, err := startEventsdEtcd(ctx, eventsdBin, filepath.Join(dir, "eventsd-b"), etcd.URL, replicaStartTimeout)
	if err != nil {
		return err
	}
	children = append(children, b)
	if err := settle(ctx, b.pid(), cfg.SettleMin, cfg.SettleMax); err != nil {
		return err
	}
	return read(a, b)
}
