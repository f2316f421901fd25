package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchStormConfig configures a watch storm: many watches of all
// namespaces without a resourceVersion (each starts with every stored
// event) opened at once, with creates timed beside them, against each
// eventsd binary in turn.
type watchStormConfig struct {
	// Binaries are the eventsd builds compared, each with a fresh data
	// directory; Labels name them in the report.
	Binaries, Labels []string
	// Events are stored first; Watches are then opened at once.
	Events, Watches int
	// Lists makes the storm one of unpaginated lists of all namespaces
	// instead of watches.
	Lists bool
	// CreateEvery spaces the timed creates during the storm.
	CreateEvery time.Duration
	// WatchTimeout bounds each watch: one that has not received its
	// initial events by then counts as failed.
	WatchTimeout time.Duration
	Dir          string
	Out          string
	Progress     io.Writer
}

// watchStormResult is one binary's outcome.
type watchStormResult struct {
	Label string `json:"label"`
	// Completed watches received all their initial events; Refused got
	// 429; Failed got neither within the watch timeout (no headers, or
	// the stream ended early).
	Completed int64 `json:"completed"`
	Refused   int64 `json:"refused_429"`
	Failed    int64 `json:"failed"`
	// NoHeaders10s counts watches without response headers 10 s after
	// they were sent.
	NoHeaders10s int64 `json:"no_headers_within_10s"`
	// StormS is the time until every watch completed, was refused or
	// failed.
	StormS float64 `json:"storm_s"`
	// Creates are timed during the storm.
	Creates      latencies `json:"creates"`
	CreateCount  int       `json:"create_count"`
	CreateErrors int       `json:"create_errors"`
	// RSS of eventsd before the storm, its peak during it, and 5 s after
	// the watches ended.
	RSSBeforeMiB float64 `json:"rss_before_mib"`
	RSSPeakMiB   float64 `json:"rss_peak_mib"`
	RSSAfterMiB  float64 `json:"rss_after_mib"`
	// CPUS is eventsd's CPU time during the storm.
	CPUS float64 `json:"cpu_s"`
}

func newWatchStormCommand() *cobra.Command {
	cfg := watchStormConfig{Events: 5000, Watches: 1000, CreateEvery: 50 * time.Millisecond, WatchTimeout: 2 * time.Minute, Progress: os.Stderr}
	var binaries, labels string
	cmd := &cobra.Command{
		Use:   "watchstorm",
		Short: "Open many watches that start with every stored event at once; time creates beside them and follow eventsd's memory",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Binaries = strings.Split(binaries, ",")
			cfg.Labels = cfg.Binaries
			if labels != "" {
				cfg.Labels = strings.Split(labels, ",")
			}
			if len(cfg.Labels) != len(cfg.Binaries) {
				return errors.New("--labels must name each of --eventsd")
			}
			if cfg.Dir == "" {
				d, err := os.MkdirTemp("", "watchstorm-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				cfg.Dir = d
			}
			res, err := runWatchStorm(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			printWatchStorm(cmd.OutOrStdout(), cfg, res)
			if cfg.Out != "" {
				var buf bytes.Buffer
				printJSON(&buf, res)
				return os.WriteFile(cfg.Out, buf.Bytes(), 0o644)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&binaries, "eventsd", "", "Comma-separated eventsd binaries to compare, each run in turn.")
	f.StringVar(&labels, "labels", "", "Comma-separated names of the binaries in the report (default: their paths).")
	f.IntVar(&cfg.Events, "events", cfg.Events, "Events stored before the storm.")
	f.IntVar(&cfg.Watches, "watches", cfg.Watches, "Watches opened at once.")
	f.BoolVar(&cfg.Lists, "lists", false, "Unpaginated lists of all namespaces instead of watches.")
	f.DurationVar(&cfg.CreateEvery, "create-every", cfg.CreateEvery, "Interval of the timed creates during the storm.")
	f.DurationVar(&cfg.WatchTimeout, "watch-timeout", cfg.WatchTimeout, "Time a watch has to receive its initial events.")
	f.StringVar(&cfg.Dir, "dir", "", "Directory for the data directories (default: a temporary one, removed).")
	f.StringVar(&cfg.Out, "out", "", "Write the results as JSON to this file.")
	_ = cmd.MarkFlagRequired("eventsd")
	return cmd
}

func runWatchStorm(ctx context.Context, cfg watchStormConfig) ([]watchStormResult, error) {
	var out []watchStormResult
	for i, bin := range cfg.Binaries {
		r, err := watchStormOnce(ctx, cfg, bin, filepath.Join(cfg.Dir, fmt.Sprintf("data-%d", i)))
		if err != nil {
			return out, fmt.Errorf("%s: %w", cfg.Labels[i], err)
		}
		r.Label = cfg.Labels[i]
		out = append(out, *r)
	}
	return out, nil
}

func watchStormOnce(ctx context.Context, cfg watchStormConfig, bin, dir string) (res *watchStormResult, err error) {
	ev, err := startEventsd(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, ev.stop()) }()
	fmt.Fprintf(cfg.Progress, "watchstorm: %s at %s, storing %d events\n", bin, ev.URL, cfg.Events)
	if _, err := runFill(ctx, fillConfig{Server: ev.URL, Wire: wireProtobuf, Total: int64(cfg.Events), Clients: 16, Namespaces: 10,
		PerPod: 5, PodPrefix: "pod"}); err != nil {
		return nil, err
	}
	pid := ev.pid()
	res = &watchStormResult{}
	rss0, _ := procStatus(pid, "VmRSS")
	res.RSSBeforeMiB = toMiB(rss0)
	cpu0, _ := procCPU(pid)

	var peak atomic.Int64
	peak.Store(rss0)
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampleDone)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				if v, err := procStatus(pid, "VmRSS"); err == nil && v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()

	transport := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	stormCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var headers, completed, refused, failed atomic.Int64
	for range cfg.Watches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read := watchInitial
			if cfg.Lists {
				read = listAll
			}
			switch read(stormCtx, client, ev.URL, cfg.Events, cfg.WatchTimeout, &headers) {
			case watchCompleted:
				completed.Add(1)
			case watchRefused:
				refused.Add(1)
			default:
				failed.Add(1)
			}
		}()
	}
	var noHeaders atomic.Int64
	noHeaders.Store(-1)
	go func() {
		select {
		case <-time.After(10 * time.Second):
			noHeaders.Store(int64(cfg.Watches) - headers.Load())
		case <-stormCtx.Done():
		}
	}()
	stormDone := make(chan struct{})
	go func() { wg.Wait(); close(stormDone) }()

	cs, err := newClientset(ev.URL, wireProtobuf, nil)
	if err != nil {
		return nil, err
	}
	var samples []time.Duration
	p := newPod("bench-0", "storm-pod")
	tick := time.NewTicker(cfg.CreateEvery)
	defer tick.Stop()
loop:
	for seq := 0; ; seq++ {
		select {
		case <-stormDone:
			break loop
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		t0 := time.Now()
		if _, err := cs.CoreV1().Events(p.Namespace).Create(ctx, newEvent(p, seq), metav1.CreateOptions{}); err != nil {
			res.CreateErrors++
			continue
		}
		samples = append(samples, time.Since(t0))
	}
	res.StormS = round3(time.Since(start).Seconds())
	res.Completed, res.Refused, res.Failed = completed.Load(), refused.Load(), failed.Load()
	cpu1, _ := procCPU(pid)
	res.CPUS = round3((cpu1 - cpu0).Seconds())
	res.NoHeaders10s = max(noHeaders.Load(), 0)
	res.CreateCount = len(samples)
	res.Creates = summarize(samples)
	close(stopSampling)
	<-sampleDone
	res.RSSPeakMiB = toMiB(peak.Load())
	transport.CloseIdleConnections()
	time.Sleep(5 * time.Second)
	rss2, _ := procStatus(pid, "VmRSS")
	res.RSSAfterMiB = toMiB(rss2)
	return res, nil
}

func toMiB(b int64) float64 { return round3(float64(b) / (1 << 20)) }

// Outcomes of one storm watch.
const (
	watchCompleted = iota
	watchRefused
	watchFailed
)

// watchInitial watches all namespaces from the current state and reads
// until want ADDED events have come (then closes), the server refuses it,
// or timeout passes.
func watchInitial(ctx context.Context, c *http.Client, server string, want int, timeout time.Duration, headers *atomic.Int64) int {
	return stormGet(ctx, c, server+"/api/v1/events?watch=1", timeout, headers, func(body io.Reader) bool {
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for n := 0; sc.Scan(); {
			if bytes.HasPrefix(sc.Bytes(), []byte(`{"type":"ADDED"`)) {
				if n++; n >= want {
					return true
				}
			}
		}
		return false
	})
}

// listAll lists every event (no limit) and reads the answer, with the
// outcomes of watchInitial.
func listAll(ctx context.Context, c *http.Client, server string, _ int, timeout time.Duration, headers *atomic.Int64) int {
	return stormGet(ctx, c, server+"/api/v1/events", timeout, headers, func(body io.Reader) bool {
		_, err := io.Copy(io.Discard, body)
		return err == nil
	})
}

// stormGet GETs url as JSON within timeout, counts its headers, and reads
// a 200's body with complete, which says whether it got what it wanted.
func stormGet(ctx context.Context, c *http.Client, url string, timeout time.Duration, headers *atomic.Int64, complete func(io.Reader) bool) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return watchFailed
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return watchFailed
	}
	defer resp.Body.Close()
	headers.Add(1)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return watchRefused
	case resp.StatusCode != http.StatusOK || !complete(resp.Body):
		return watchFailed
	}
	return watchCompleted
}

func printWatchStorm(w io.Writer, cfg watchStormConfig, rs []watchStormResult) {
	what := "watches of all namespaces without resourceVersion, each starting with"
	if cfg.Lists {
		what = "unpaginated lists of all namespaces, each of"
	}
	fmt.Fprintf(w, "%d %s %d stored events; a create every %v meanwhile\n\n", cfg.Watches, what, cfg.Events, cfg.CreateEvery)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "eventsd\tcompleted\t429\tfailed\tno headers at 10s\tstorm s\tcreates\tcreate p50 ms\tp99 ms\tmax ms\tRSS before MiB\tpeak\tafter\tCPU s")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%d (%d errors)\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.1f\n", r.Label, r.Completed, r.Refused, r.Failed, r.NoHeaders10s,
			r.StormS, r.CreateCount, r.CreateErrors, r.Creates.P50Ms, r.Creates.P99Ms, r.Creates.MaxMs, r.RSSBeforeMiB, r.RSSPeakMiB, r.RSSAfterMiB, r.CPUS)
	}
	tw.Flush()
}
