package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// createConfig configures a create benchmark.
type createConfig struct {
	Server     string
	Clients    int
	Duration   time.Duration
	Warmup     time.Duration
	Namespaces int
	Objects    int
	// PID is the server's process id, for its CPU time; 0: not measured.
	PID int
	// BackendPID, when not 0, is the process id of the server's storage
	// (etcd): its CPU time counts as the server's, and is also reported
	// apart.
	BackendPID int
	// PodPrefix names the pods: "<prefix>-<i>".
	PodPrefix string
	// Wire is the clients' wire format (wireProtobuf or wireJSON).
	Wire string
	// Token, when set, is sent as a bearer token.
	Token string
	// NewEvent returns the seq-th event of a client about p; nil:
	// newEvent (the kubelet's lifecycle events).
	NewEvent func(p pod, seq int) *corev1.Event
}

// createResult is the outcome of a create benchmark. Only requests that
// completed within the measured interval (after the warmup) count for the
// rate and the latencies; errors count whenever they happen.
type createResult struct {
	Server        string  `json:"server"`
	Clients       int     `json:"clients"`
	WarmupS       float64 `json:"warmup_s"`
	DurationS     float64 `json:"duration_s"`
	Requests      int64   `json:"requests"`
	CreatesPerSec float64 `json:"creates_per_s"`
	latencies
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Connections is how many TCP connections the clients opened in all.
	Connections int64 `json:"connections"`
	ServerPID   int   `json:"server_pid,omitempty"`
	// ServerCPUMsPerReq is the server's CPU time over the measured
	// interval divided by the requests completed in it.
	ServerCPUMsPerReq *float64 `json:"server_cpu_ms_per_req,omitempty"`
	// ServerCPUCores is the server's CPU time per second of the interval.
	ServerCPUCores *float64 `json:"server_cpu_cores,omitempty"`
	// BackendPID and BackendCPUMsPerReq are the storage process's (etcd's)
	// id and its part of ServerCPUMsPerReq.
	BackendPID         int      `json:"backend_pid,omitempty"`
	BackendCPUMsPerReq *float64 `json:"backend_cpu_ms_per_req,omitempty"`
	// ClientCPUMsPerReq is the load generator's own CPU time per request
	// (client-go encoding and decoding, HTTP), which competes with the
	// server for the same cores.
	ClientCPUMsPerReq float64 `json:"client_cpu_ms_per_req"`
	// MachineBusyCores is the CPU use of the whole machine during the
	// interval; OtherCores what neither the server nor this process used
	// (the kernel's network work on behalf of both, other processes).
	MachineBusyCores float64 `json:"machine_busy_cores"`
	OtherCores       float64 `json:"other_cores"`
}

func newCreateCommand() *cobra.Command {
	cfg := createConfig{Clients: 1, Duration: 10 * time.Second, Warmup: 2 * time.Second, Namespaces: 10, Objects: 1000, PodPrefix: "pod", Wire: wireProtobuf}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create events as fast as possible with N client-go clients and report creates/s and latency",
		Long: `create runs N goroutines, each with its own client-go clientset and connection,
creating legacy-recorder-shaped core/v1 Events about M pods spread over K
namespaces (bench-0 … bench-K-1) as fast as the server answers. It prints
creates/s, latency percentiles, errors (any non-2xx) and, with --pid, the
server's CPU time per request, then one JSON line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runCreate(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			printCreate(cmd.OutOrStdout(), res)
			if res.Errors > 0 {
				return fmt.Errorf("%d requests failed, the first with: %s", res.Errors, res.FirstError)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "Base URL of the server, e.g. http://127.0.0.1:8080.")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "Number of concurrent clients, each with its own clientset and connection.")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "Measured interval.")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "Load before the measured interval, not counted.")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Number of namespaces the pods are spread over.")
	f.IntVar(&cfg.Objects, "objects", cfg.Objects, "Number of pods the events are about.")
	f.IntVar(&cfg.PID, "pid", 0, "Process id of the server, to report its CPU time per request (from /proc/PID/stat).")
	f.IntVar(&cfg.BackendPID, "backend-pid", 0, "Process id of the server's storage (etcd), whose CPU time counts as the server's and is also reported apart.")
	f.StringVar(&cfg.PodPrefix, "pod-prefix", cfg.PodPrefix, "Pod name prefix.")
	f.StringVar(&cfg.Wire, "wire", cfg.Wire, "Wire format: protobuf (client-go's default for built-in types) or json (kubectl's).")
	_ = cmd.MarkFlagRequired("server")
	return cmd
}

func (c createConfig) validate() error {
	switch {
	case c.Server == "":
		return errors.New("--server is required")
	case c.Clients < 1:
		return errors.New("--clients must be at least 1")
	case c.Duration <= 0:
		return errors.New("--duration must be positive")
	case c.Warmup < 0:
		return errors.New("--warmup must not be negative")
	case c.Namespaces < 1 || c.Objects < 1:
		return errors.New("--namespaces and --objects must be at least 1")
	}
	return nil
}

// createWorker is one client's record of a load run (creates or lists).
type createWorker struct {
	samples  []time.Duration
	errors   int64
	firstErr error
}

// mergeWorkers gathers the workers' latencies, their error count and the
// first error any of them met ("" for none).
func mergeWorkers(workers []createWorker) (all []time.Duration, errors int64, firstErr string) {
	for i := range workers {
		w := &workers[i]
		all = append(all, w.samples...)
		errors += w.errors
		if w.firstErr != nil && firstErr == "" {
			firstErr = w.firstErr.Error()
		}
	}
	return all, errors, firstErr
}

// runCreate runs the create benchmark. It returns an error only if it could
// not run (bad config, interrupted); failed requests are in the result.
func runCreate(ctx context.Context, cfg createConfig) (*createResult, error) {
	if err := checkWire(cfg.Wire); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var dials atomic.Int64
	clients := make([]kubernetes.Interface, cfg.Clients)
	for i := range clients {
		cs, err := newClientsetAuth(cfg.Server, cfg.Wire, cfg.Token, &dials)
		if err != nil {
			return nil, err
		}
		clients[i] = cs
	}
	pods := make([]pod, cfg.Objects)
	for j := range pods {
		pods[j] = newPod(namespaceName(j%cfg.Namespaces), cfg.PodPrefix+"-"+strconv.Itoa(j))
	}

	makeEvent := cfg.NewEvent
	if makeEvent == nil {
		makeEvent = newEvent
	}
	start := time.Now()
	mStart, mEnd := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	workers := make([]createWorker, cfg.Clients)
	var wg sync.WaitGroup
	for i := range workers {
		w, cs := &workers[i], clients[i]
		w.samples = make([]time.Duration, 0, 4096)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for seq := 0; ctx.Err() == nil && time.Now().Before(mEnd); seq++ {
				p := pods[rng.IntN(len(pods))]
				ev := makeEvent(p, seq)
				t0 := time.Now()
				_, err := cs.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{})
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
					time.Sleep(10 * time.Millisecond) // no busy loop against a dead server
					continue
				}
				if !t1.Before(mStart) && t1.Before(mEnd) {
					w.samples = append(w.samples, t1.Sub(t0))
				}
			}
		})
	}

	// The server's and our own CPU time at the edges of the interval.
	var srv0, srv1, be0, be1, self0, self1, all0, all1 time.Duration
	var cpuErr error
	sample := func(srv, be, self, all *time.Duration) {
		if cfg.PID > 0 {
			v, err := procCPU(cfg.PID)
			*srv, cpuErr = v, errors.Join(cpuErr, err)
		}
		if cfg.BackendPID > 0 {
			v, err := procCPU(cfg.BackendPID)
			*be, cpuErr = v, errors.Join(cpuErr, err)
			*srv += v
		}
		*self, _ = procCPU(0)
		*all, _ = machineCPU()
	}
	sleepUntil(ctx, mStart)
	sample(&srv0, &be0, &self0, &all0)
	sleepUntil(ctx, mEnd)
	sample(&srv1, &be1, &self1, &all1)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := &createResult{
		Server: cfg.Server, Clients: cfg.Clients, ServerPID: cfg.PID, BackendPID: cfg.BackendPID,
		WarmupS: cfg.Warmup.Seconds(), DurationS: cfg.Duration.Seconds(),
		Connections: dials.Load(),
	}
	all, errs, firstErr := mergeWorkers(workers)
	res.Errors, res.FirstError = errs, firstErr
	res.Requests = int64(len(all))
	res.CreatesPerSec = round3(float64(res.Requests) / cfg.Duration.Seconds())
	res.latencies = summarize(all)
	res.MachineBusyCores = round3((all1 - all0).Seconds() / cfg.Duration.Seconds())
	// The three readings are 10 ms ticks taken at slightly different
	// moments: an idle rest can come out a hair below zero.
	res.OtherCores = max(0, round3((all1-all0-(srv1-srv0)-(self1-self0)).Seconds()/cfg.Duration.Seconds()))
	if res.Requests > 0 {
		res.ClientCPUMsPerReq = round3(ms(self1-self0) / float64(res.Requests))
		if cfg.PID > 0 && cpuErr == nil {
			perReq := round3(ms(srv1-srv0) / float64(res.Requests))
			cores := round3((srv1 - srv0).Seconds() / cfg.Duration.Seconds())
			res.ServerCPUMsPerReq, res.ServerCPUCores = &perReq, &cores
			if cfg.BackendPID > 0 {
				be := round3(ms(be1-be0) / float64(res.Requests))
				res.BackendCPUMsPerReq = &be
			}
		}
	}
	if cpuErr != nil {
		return res, fmt.Errorf("reading the server's CPU time: %w", cpuErr)
	}
	return res, nil
}

// sleepUntil sleeps until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

func printCreate(w io.Writer, r *createResult) {
	fmt.Fprintf(w, "server %s, %d clients, %d connections, %.0fs measured after %.0fs warmup\n",
		r.Server, r.Clients, r.Connections, r.DurationS, r.WarmupS)
	fmt.Fprintf(w, "  creates/s %.1f (%d requests)\n", r.CreatesPerSec, r.Requests)
	fmt.Fprintf(w, "  latency p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms\n", r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs)
	fmt.Fprintf(w, "  errors %d", r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, " (first: %s)", r.FirstError)
	}
	fmt.Fprintln(w)
	if r.ServerCPUMsPerReq != nil {
		fmt.Fprintf(w, "  server CPU %.4f ms/request (%.2f cores)\n", *r.ServerCPUMsPerReq, *r.ServerCPUCores)
	}
	if r.BackendCPUMsPerReq != nil {
		fmt.Fprintf(w, "  of which the backend (pid %d) %.4f ms/request\n", r.BackendPID, *r.BackendCPUMsPerReq)
	}
	fmt.Fprintf(w, "  client CPU %.4f ms/request; machine busy %.2f cores, %.2f of them neither server nor client\n",
		r.ClientCPUMsPerReq, r.MachineBusyCores, r.OtherCores)
	printJSON(w, r)
}

// printJSON writes v as one JSON line.
func printJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}
