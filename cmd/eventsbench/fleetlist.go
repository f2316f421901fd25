package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// fleetStoreFile records, beside the list phase's kept stores
// (--store-dir), what they were filled with.
const fleetStoreFile = "fleet-fill.json"

// fleetStoreInfo is what fleetStoreFile holds.
type fleetStoreInfo struct {
	Clusters      int       `json:"clusters"`
	ClusterEvents int       `json:"cluster_events"`
	Namespaces    int       `json:"namespaces"`
	ListCluster   int       `json:"list_cluster"`
	Filled        time.Time `json:"filled"`
	FillS         float64   `json:"fill_s"`
}

func (i fleetStoreInfo) sameStore(cfg *fleetBenchConfig) bool {
	return i.Clusters == cfg.Clusters && i.ClusterEvents == cfg.ClusterEvents && i.Namespaces == cfg.Namespaces && i.ListCluster == cfg.ListCluster
}

// fleetLists is the list phase's report.
type fleetLists struct {
	// FleetEvents are in the fleet store, ClusterEvents in the listed
	// cluster (and alone in the reference store).
	FleetEvents   int64   `json:"fleet_events"`
	ClusterEvents int64   `json:"cluster_events"`
	FillS         float64 `json:"fill_s"`
	FillPerSec    float64 `json:"fill_per_s"`
	StoreReused   bool    `json:"store_reused"`
	// Cases are the lists timed, each on both stores.
	Cases []*fleetListCase `json:"cases"`
}

// fleetListCase is one list timed on the fleet store (through
// /clusters/NAME/) and on the reference store (at its root).
type fleetListCase struct {
	Name string `json:"name"`
	// Path is the request's path at the root, with its query.
	Path string `json:"path"`
	// Paged: the case walks every page; each sample is the whole walk,
	// FirstPage the first page's answer alone.
	Paged bool `json:"paged"`
	// Items and Pages of one walk (the same on both stores, checked).
	Items int `json:"items"`
	Pages int `json:"pages"`
	// Fleet and Single are the samples' summaries; Ratio the fleet's p50
	// over the single store's.
	Fleet           latencies  `json:"fleet"`
	Single          latencies  `json:"single"`
	FleetFirstPage  *latencies `json:"fleet_first_page,omitempty"`
	SingleFirstPage *latencies `json:"single_first_page,omitempty"`
	RatioP50        float64    `json:"ratio_p50"`
	// Bytes of one walk's answers on the fleet store.
	Bytes int64 `json:"bytes"`
}

// fleetEvent is event i of cluster c's fill: kubelet-like, about one of
// 50 events' pod, the same for the cluster's events in either store.
func (cfg *fleetBenchConfig) fleetEvent(c, i int, base time.Time) *corev1.Event {
	ns := namespaceName(i % cfg.Namespaces)
	p := newPod(ns, fmt.Sprintf("pod-%d", i/cfg.Namespaces/50))
	l := lifecycle[(i/cfg.Namespaces)%len(lifecycle)]
	msg := l.message
	if l.reason == "BackOff" {
		msg = fmt.Sprintf(msg, p.Name, p.Namespace, p.UID)
	}
	t := metav1.NewTime(base.Add(time.Duration(i) * time.Millisecond))
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name + "." + strconv.FormatInt(int64(c)<<40|int64(i), 16), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID, APIVersion: "v1",
			ResourceVersion: "4242", FieldPath: "spec.containers{app}"},
		Reason: l.reason, Message: msg, Type: l.typ, Count: 1, FirstTimestamp: t, LastTimestamp: t,
		Source:              corev1.EventSource{Component: "kubelet", Host: p.Node},
		ReportingController: "kubelet", ReportingInstance: p.Node,
	}
}

// listPhase fills (or reuses) the two stores, serves them, and times the
// lists.
func (cfg *fleetBenchConfig) listPhase(ctx context.Context, rep *fleetReport, tmp string) (*fleetLists, error) {
	dir := filepath.Join(tmp, "lists")
	if cfg.StoreDir != "" {
		dir = cfg.StoreDir
	}
	res := &fleetLists{FleetEvents: int64(cfg.Clusters) * int64(cfg.ClusterEvents), ClusterEvents: int64(cfg.ClusterEvents)}
	if err := cfg.reuseOrFillFleet(ctx, dir, res); err != nil {
		return res, err
	}
	logger := slog.New(slog.NewTextHandler(logWriter{cfg.Log}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	open := func(name string) (*pebblestore.Store, error) {
		return pebblestore.Open(pebblestore.Options{Dir: filepath.Join(dir, name), DefaultTTL: fillEventTTL, Logger: logger})
	}
	fleetStore, err := open("fleet")
	if err != nil {
		return res, err
	}
	singleStore, err := open("single")
	if err != nil {
		return res, errors.Join(err, fleetStore.Close())
	}
	clusters := make([]server.Cluster, cfg.Clusters)
	for i := range clusters {
		clusters[i] = server.Cluster{Name: clusterName(i), ReadOnly: "mirrored"}
	}
	fleetURL, stopFleet, err := serveLoopback(server.Config{Store: fleetStore, Clusters: clusters})
	if err != nil {
		return res, errors.Join(err, fleetStore.Close(), singleStore.Close())
	}
	defer func() {
		stopFleet()
		if err := fleetStore.Close(); err != nil {
			cfg.logf("closing the fleet store: %v", err)
		}
	}()
	singleURL, stopSingle, err := serveLoopback(server.Config{Store: singleStore})
	if err != nil {
		return res, errors.Join(err, singleStore.Close())
	}
	defer func() {
		stopSingle()
		if err := singleStore.Close(); err != nil {
			cfg.logf("closing the single store: %v", err)
		}
	}()
	fleetBase := fleetURL + server.ClustersPathPrefix + clusterName(cfg.ListCluster)

	ns := namespaceName(0)
	reason := "reason=" + cfg.Reason
	type caseSpec struct {
		name, path, selector string
		paged                bool
	}
	var specs []caseSpec
	for _, scope := range []struct{ name, path string }{
		{"namespace " + ns, "/api/v1/namespaces/" + ns + "/events"},
		{"all namespaces", "/api/v1/events"},
	} {
		for _, sel := range []string{"", reason} {
			for _, paged := range []bool{false, true} {
				name := scope.name
				if sel != "" {
					name += ", " + sel
				}
				if paged {
					name += fmt.Sprintf(", pages of %d", cfg.PageSize)
				} else {
					name += ", whole"
				}
				specs = append(specs, caseSpec{name: name, path: scope.path, selector: sel, paged: paged})
			}
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()

	var stopProfile func() error
	if cfg.ProfileDir != "" {
		p := filepath.Join(cfg.ProfileDir, "fleet-lists.pprof")
		if stopProfile, err = startCPUProfile(p); err != nil {
			return res, err
		}
		rep.addProfile("CPU, the list phase's lists (both stores, alternating)", p)
		defer func() {
			if err := stopProfile(); err != nil {
				cfg.logf("%v", err)
			}
		}()
	}
	for _, sp := range specs {
		lc := &fleetListCase{Name: sp.name, Path: sp.path, Paged: sp.paged}
		q := url.Values{}
		if sp.selector != "" {
			q.Set("fieldSelector", sp.selector)
		}
		if sp.paged {
			q.Set("limit", strconv.FormatInt(cfg.PageSize, 10))
		}
		if len(q) > 0 {
			lc.Path += "?" + q.Encode()
		}
		var fleetS, singleS, fleetFirst, singleFirst []time.Duration
		for r := range cfg.Repeat {
			// Alternate which store goes first.
			order := []bool{r%2 == 0, r%2 != 0}
			for _, onFleet := range order {
				base := singleURL
				if onFleet {
					base = fleetBase
				}
				w, err := cfg.walk(ctx, hc, base+lc.Path)
				if err != nil {
					return res, fmt.Errorf("%s on the %s store: %w", sp.name, storeName(onFleet), err)
				}
				if lc.Items == 0 {
					lc.Items, lc.Pages = w.items, w.pages
				} else if w.items != lc.Items || w.pages != lc.Pages {
					return res, fmt.Errorf("%s: %d items in %d pages on the %s store, %d in %d before", sp.name, w.items, w.pages, storeName(onFleet), lc.Items, lc.Pages)
				}
				if onFleet {
					fleetS, fleetFirst = append(fleetS, w.total), append(fleetFirst, w.first)
					lc.Bytes = w.bytes
				} else {
					singleS, singleFirst = append(singleS, w.total), append(singleFirst, w.first)
				}
			}
		}
		if lc.Items == 0 {
			return res, fmt.Errorf("%s: no items: the stores hold none of these events", sp.name)
		}
		lc.Fleet, lc.Single = summarize(fleetS), summarize(singleS)
		if sp.paged {
			f, s := summarize(fleetFirst), summarize(singleFirst)
			lc.FleetFirstPage, lc.SingleFirstPage = &f, &s
		}
		if lc.Single.P50Ms > 0 {
			lc.RatioP50 = round3(lc.Fleet.P50Ms / lc.Single.P50Ms)
		}
		cfg.logf("  %s: %d items in %d pages; fleet p50 %.2f ms p99 %.2f ms, single p50 %.2f ms p99 %.2f ms (x%.2f)",
			sp.name, lc.Items, lc.Pages, lc.Fleet.P50Ms, lc.Fleet.P99Ms, lc.Single.P50Ms, lc.Single.P99Ms, lc.RatioP50)
		res.Cases = append(res.Cases, lc)
	}
	return res, nil
}

func storeName(fleet bool) string {
	if fleet {
		return "fleet"
	}
	return "single-cluster"
}

// listWalk is one timed list: every page of it.
type listWalk struct {
	items, pages int
	first, total time.Duration
	bytes        int64
}

// walk GETs u and its continuations, reading each answer whole. The
// items are counted from the JSON answer's items, or from the protobuf
// answer's metadata: the list's remainingItemCount is not asked for, so
// a protobuf answer is decoded to count.
func (cfg *fleetBenchConfig) walk(ctx context.Context, hc *http.Client, u string) (listWalk, error) {
	var w listWalk
	start := time.Now()
	cont := ""
	for {
		pu := u
		if cont != "" {
			sep := "?"
			if strings.Contains(u, "?") {
				sep = "&"
			}
			pu += sep + "continue=" + url.QueryEscape(cont)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, pu, nil)
		if err != nil {
			return w, err
		}
		req.Header.Set("Accept", cfg.Accept)
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return w, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return w, err
		}
		if w.pages == 0 {
			w.first = time.Since(t0)
		}
		if resp.StatusCode != http.StatusOK {
			return w, fmt.Errorf("GET %s: %s: %.300s", pu, resp.Status, body)
		}
		w.pages++
		w.bytes += int64(len(body))
		n, next, err := countList(resp.Header.Get("Content-Type"), body)
		if err != nil {
			return w, fmt.Errorf("GET %s: %w", pu, err)
		}
		w.items += n
		if next == "" {
			break
		}
		cont = next
	}
	w.total = time.Since(start)
	return w, nil
}

// countList returns a list answer's item count and continue token, from
// JSON or protobuf. Counting is outside the timed answer: the timer of a
// page stops at its last byte.
func countList(contentType string, body []byte) (int, string, error) {
	var l corev1.EventList
	switch {
	case strings.HasPrefix(contentType, "application/json"):
		if err := json.Unmarshal(body, &l); err != nil {
			return 0, "", fmt.Errorf("decoding the list: %w", err)
		}
	default:
		if err := decodeProtobufList(body, &l); err != nil {
			return 0, "", err
		}
	}
	return len(l.Items), l.Continue, nil
}

// serveLoopback serves a server of cfg on 127.0.0.1; stop shuts it down
// (not the store).
func serveLoopback(cfg server.Config) (string, func(), error) {
	srv, err := server.New(cfg)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	return "http://" + ln.Addr().String(), func() {
		srv.BeginShutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		_ = srv.Drain(ctx)
		wg.Wait()
	}, nil
}

// reuseOrFillFleet makes dir/fleet (every cluster's events) and
// dir/single (the listed cluster's alone, at the root), or reuses them
// when dir's fleetStoreFile says they were filled with these settings
// less than familyStoreMaxAge ago.
func (cfg *fleetBenchConfig) reuseOrFillFleet(ctx context.Context, dir string, res *fleetLists) error {
	recPath := filepath.Join(dir, fleetStoreFile)
	b, err := os.ReadFile(recPath)
	switch {
	case err == nil:
		var info fleetStoreInfo
		if err := json.Unmarshal(b, &info); err != nil {
			return fmt.Errorf("--store-dir: %s: %w", recPath, err)
		}
		if info.sameStore(cfg) && time.Since(info.Filled) < familyStoreMaxAge {
			res.StoreReused, res.FillS = true, info.FillS
			res.FillPerSec = round3(float64(res.FleetEvents+res.ClusterEvents) / info.FillS)
			cfg.logf("--store-dir: reusing the stores filled %s (%.0fs then)", info.Filled.Format(time.RFC3339), info.FillS)
			return nil
		}
		cfg.logf("--store-dir: the kept stores (filled %s with %+v) are not this run's; filling new ones", info.Filled.Format(time.RFC3339), info)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("--store-dir: %w", err)
	}
	// Only what this mode writes there is removed.
	if err := errors.Join(os.Remove(recPath), os.RemoveAll(filepath.Join(dir, "fleet")), os.RemoveAll(filepath.Join(dir, "single"))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--store-dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--store-dir: %w", err)
	}
	filled := time.Now()
	base := filled.Add(-time.Hour)
	if err := cfg.fillStore(ctx, filepath.Join(dir, "single"), []int{cfg.ListCluster}, true, base); err != nil {
		return err
	}
	all := make([]int, cfg.Clusters)
	for i := range all {
		all[i] = i
	}
	if err := cfg.fillStore(ctx, filepath.Join(dir, "fleet"), all, false, base); err != nil {
		return err
	}
	res.FillS = round3(time.Since(filled).Seconds())
	res.FillPerSec = round3(float64(res.FleetEvents+res.ClusterEvents) / res.FillS)
	info := fleetStoreInfo{Clusters: cfg.Clusters, ClusterEvents: cfg.ClusterEvents, Namespaces: cfg.Namespaces, ListCluster: cfg.ListCluster,
		Filled: filled, FillS: res.FillS}
	if b, err = json.MarshalIndent(info, "", "  "); err == nil {
		err = os.WriteFile(recPath, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("--store-dir: recording the fill: %w", err)
	}
	return nil
}

// fillStore writes the events of clusters into a new store in dir, each
// cluster's through its view, or at the root when root is set (one
// cluster).
func (cfg *fleetBenchConfig) fillStore(ctx context.Context, dir string, clusters []int, root bool, base time.Time) error {
	st, err := pebblestore.Open(pebblestore.Options{Dir: dir, DefaultTTL: fillEventTTL, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	total := len(clusters) * cfg.ClusterEvents
	cfg.logf("fill: %d events (%d clusters of %d) into %s", total, len(clusters), cfg.ClusterEvents, dir)
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type job struct {
		store storage.Interface
		ev    *corev1.Event
	}
	ch := make(chan job, 1024)
	var wg sync.WaitGroup
	for range cfg.FillWorkers {
		wg.Go(func() {
			for j := range ch {
				if _, err := j.store.Create(ctx, j.ev, storage.WriteOptions{TTL: fillEventTTL}); err != nil {
					cancel(fmt.Errorf("creating %s/%s: %w", j.ev.Namespace, j.ev.Name, err))
					for range ch {
					}
					return
				}
			}
		})
	}
	written := 0
	last := time.Now()
fill:
	for _, c := range clusters {
		var view storage.Interface = st
		if !root {
			view = clusterview.New(st, clusterName(c))
		}
		for i := range cfg.ClusterEvents {
			select {
			case ch <- job{store: view, ev: cfg.fleetEvent(c, i, base)}:
			case <-ctx.Done():
				break fill
			}
			written++
			if time.Since(last) > 10*time.Second {
				last = time.Now()
				cfg.logf("  fill: %d/%d events, %.0f/s", written, total, float64(written)/time.Since(start).Seconds())
			}
		}
	}
	close(ch)
	wg.Wait()
	err = context.Cause(ctx)
	if got := st.Stats().Events; err == nil && got != int64(total) {
		err = fmt.Errorf("%d events stored, want %d", got, total)
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	cfg.logf("  fill: %d events in %.1fs", written, time.Since(start).Seconds())
	return nil
}
