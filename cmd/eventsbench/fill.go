package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fillConfig configures a fill.
type fillConfig struct {
	Server string
	// Wire is the clients' wire format (wireProtobuf or wireJSON).
	Wire string
	// Total is the number of events to create.
	Total int64
	// Clients is the number of concurrent clients.
	Clients int
	// Namespaces spreads the other pods over bench-0 … bench-K-1.
	Namespaces int
	// Namespace and TargetPod name the pod that gets exactly TargetCount
	// of the events, spread evenly through the fill.
	Namespace   string
	TargetPod   string
	TargetCount int64
	// PerPod is the number of events per other pod; they are named
	// "<PodPrefix>-<i>".
	PerPod    int64
	PodPrefix string
	// PID is the server's process id, for its CPU time; 0: not measured.
	PID int
	// NewCreator, when set, returns each client's create function instead
	// of a client-go clientset of Server (the etcd fill writes through
	// etcdstore in-process). A create of an event that exists must return
	// an error apierrors.IsAlreadyExists recognises.
	NewCreator func() (createFunc, error)
	// Progress receives a line every ProgressEvery; nil: none.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// createFunc creates one event.
type createFunc func(ctx context.Context, ev *corev1.Event) error

// clientsetCreator returns a create function over a new clientset of
// server.
func clientsetCreator(server, wire string) (createFunc, error) {
	cs, err := newClientset(server, wire, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev *corev1.Event) error {
		_, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	}, nil
}

// fillResult is the outcome of a fill.
type fillResult struct {
	Total       int64   `json:"total"`
	Created     int64   `json:"created"`
	TargetCount int64   `json:"target_count"`
	Pods        int64   `json:"pods"`
	Clients     int     `json:"clients"`
	DurationS   float64 `json:"duration_s"`
	PerSec      float64 `json:"creates_per_s"`
	Retries     int64   `json:"retries"`
	// Errors is the number of events that could not be created.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// ServerCPUMsPerEvent is the server's CPU time over the whole fill
	// (including its background work during it) per event created.
	ServerCPUMsPerEvent *float64 `json:"server_cpu_ms_per_event,omitempty"`
	ClientCPUMsPerEvent float64  `json:"client_cpu_ms_per_event"`
}

func newFillCommand() *cobra.Command {
	cfg := fillConfig{Wire: wireProtobuf, Total: 50_000, Clients: 64, Namespaces: 10, Namespace: namespaceName(0), TargetPod: "target-pod",
		TargetCount: 50, PerPod: 50, PodPrefix: "pod", Progress: os.Stderr, ProgressEvery: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "fill",
		Short: "Create T events over many pods, exactly C of them about a target pod",
		Long: `fill creates --total events with --clients concurrent client-go clients: about
--per-pod events for each pod <pod-prefix>-<i> (spread over --namespaces
namespaces bench-0 … bench-K-1, interleaved in time), and exactly
--target-count events about --namespace/--target-pod, spread evenly through
the fill. Failed creates are retried; the fill fails if one still fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runFill(cmd.Context(), cfg)
			if res != nil {
				printFill(cmd.OutOrStdout(), res)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "Base URL of the server.")
	f.StringVar(&cfg.Wire, "wire", cfg.Wire, "Wire format: protobuf (client-go's default for built-in types) or json (kubectl's).")
	f.Int64Var(&cfg.Total, "total", cfg.Total, "Number of events to create.")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "Number of concurrent clients.")
	f.IntVar(&cfg.Namespaces, "namespaces", cfg.Namespaces, "Number of namespaces the other pods are spread over.")
	f.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Namespace of the target pod.")
	f.StringVar(&cfg.TargetPod, "target-pod", cfg.TargetPod, "Name of the target pod.")
	f.Int64Var(&cfg.TargetCount, "target-count", cfg.TargetCount, "Number of events about the target pod.")
	f.Int64Var(&cfg.PerPod, "per-pod", cfg.PerPod, "Number of events per other pod.")
	f.StringVar(&cfg.PodPrefix, "pod-prefix", cfg.PodPrefix, "Name prefix of the other pods; use a new one to add pods to a filled server.")
	f.IntVar(&cfg.PID, "pid", 0, "Process id of the server, to report its CPU time per event.")
	_ = cmd.MarkFlagRequired("server")
	return cmd
}

// fillPlan decides what the i-th event of a fill is about.
type fillPlan struct {
	total, target, pods int64
}

func newFillPlan(total, target, perPod int64) fillPlan {
	others := total - target
	return fillPlan{total: total, target: target, pods: (others + perPod - 1) / perPod}
}

// at returns whether event i (0 ≤ i < total) is about the target pod and,
// if not, the index of its pod. Exactly target of the total events are
// about the target: those where floor(i·target/total) steps up.
func (p fillPlan) at(i int64) (target bool, pod int64) {
	before, upTo := i*p.target/p.total, (i+1)*p.target/p.total
	if upTo > before {
		return true, -1
	}
	return false, (i - upTo) % p.pods
}

func (c fillConfig) validate() error {
	switch {
	case c.Server == "" && c.NewCreator == nil:
		return errors.New("--server is required")
	case c.Total < 1 || c.Clients < 1 || c.Namespaces < 1 || c.PerPod < 1:
		return errors.New("--total, --clients, --namespaces and --per-pod must be at least 1")
	case c.TargetCount < 0 || c.TargetCount > c.Total:
		return errors.New("--target-count must be between 0 and --total")
	case c.TargetCount > 0 && (c.Namespace == "" || c.TargetPod == ""):
		return errors.New("--namespace and --target-pod are required with --target-count")
	case c.TargetPod != "" && strings.HasPrefix(c.TargetPod, c.PodPrefix+"-"):
		return fmt.Errorf("--target-pod %q must not start with --pod-prefix %q", c.TargetPod, c.PodPrefix+"-")
	}
	return nil
}

// runFill creates the events. With an error, the result (if any) says how
// far it got.
func runFill(ctx context.Context, cfg fillConfig) (*fillResult, error) {
	if cfg.NewCreator == nil {
		if err := checkWire(cfg.Wire); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	plan := newFillPlan(cfg.Total, cfg.TargetCount, cfg.PerPod)
	target := newPod(cfg.Namespace, cfg.TargetPod)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var next, created, retries, errCount atomic.Int64
	var firstErr error
	var errOnce sync.Once
	srv0, _ := procCPU(cfg.PID)
	self0, _ := procCPU(0)
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Clients {
		newCreator := cfg.NewCreator
		if newCreator == nil {
			newCreator = func() (createFunc, error) { return clientsetCreator(cfg.Server, cfg.Wire) }
		}
		create, err := newCreator()
		if err != nil {
			cancel(err)
			wg.Wait()
			return nil, err
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= cfg.Total {
					return
				}
				isTarget, podIdx := plan.at(i)
				p := target
				if !isTarget {
					p = newPod(namespaceName(int(podIdx%int64(cfg.Namespaces))), cfg.PodPrefix+"-"+strconv.FormatInt(podIdx, 10))
				}
				ev := newEvent(p, int(i))
				var err error
				for attempt := 1; attempt <= 5; attempt++ {
					if attempt > 1 {
						retries.Add(1)
						sleepUntil(ctx, time.Now().Add(time.Duration(attempt)*100*time.Millisecond))
					}
					// client-go encodes ev and decodes the answer into a new object:
					// ev is not modified, so retries can send it again.
					err = create(ctx, ev)
					if err == nil || (attempt > 1 && apierrors.IsAlreadyExists(err)) {
						// A retry may find the write of an attempt whose
						// answer was lost: it is there, so it counts.
						err = nil
						break
					}
					if ctx.Err() != nil {
						return
					}
				}
				if err != nil {
					errCount.Add(1)
					errOnce.Do(func() {
						firstErr = fmt.Errorf("creating event %d (%s/%s): %w", i, ev.Namespace, ev.Name, err)
						cancel(firstErr)
					})
					return
				}
				created.Add(1)
			}
		})
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if cfg.Progress != nil && cfg.ProgressEvery > 0 {
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		last, lastAt := int64(0), start
	loop:
		for {
			select {
			case <-done:
				break loop
			case now := <-t.C:
				n := created.Load()
				fmt.Fprintf(cfg.Progress, "fill: %d/%d events, %.0f/s now, %.0f/s overall\n",
					n, cfg.Total, float64(n-last)/now.Sub(lastAt).Seconds(), float64(n)/now.Sub(start).Seconds())
				last, lastAt = n, now
			}
		}
	}
	<-done
	elapsed := time.Since(start)
	srv1, srvErr := procCPU(cfg.PID)
	self1, _ := procCPU(0)

	res := &fillResult{
		Total: cfg.Total, Created: created.Load(), TargetCount: cfg.TargetCount, Pods: plan.pods, Clients: cfg.Clients,
		DurationS: round3(elapsed.Seconds()), Retries: retries.Load(), Errors: errCount.Load(),
	}
	res.PerSec = round3(float64(res.Created) / elapsed.Seconds())
	if res.Created > 0 {
		res.ClientCPUMsPerEvent = round3(ms(self1-self0) / float64(res.Created))
		if cfg.PID > 0 && srvErr == nil {
			v := round3(ms(srv1-srv0) / float64(res.Created))
			res.ServerCPUMsPerEvent = &v
		}
	}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
		return res, firstErr
	}
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	return res, nil
}

func printFill(w io.Writer, r *fillResult) {
	fmt.Fprintf(w, "fill: created %d/%d events (%d about the target, %d other pods) with %d clients in %.1fs: %.1f creates/s, %d retries, %d errors\n",
		r.Created, r.Total, r.TargetCount, r.Pods, r.Clients, r.DurationS, r.PerSec, r.Retries, r.Errors)
	if r.ServerCPUMsPerEvent != nil {
		fmt.Fprintf(w, "  server CPU %.4f ms/event\n", *r.ServerCPUMsPerEvent)
	}
	printJSON(w, r)
}
