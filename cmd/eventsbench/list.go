package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listConfig configures a list benchmark.
type listConfig struct {
	Server    string
	Namespace string
	Pod       string
	Repeat    int
	// Wire is the client's wire format (wireProtobuf or wireJSON).
	Wire string
}

// listResult is the outcome of a list benchmark: the latency of
// CoreV1().Events(ns).List with kubectl's field selector for one pod, as
// client-go observes it (request, server, decoding).
type listResult struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Selector  string `json:"field_selector"`
	Repeat    int    `json:"repeat"`
	Items     int    `json:"items"`
	// FirstMs is the first list of the series (cold caches, new connection).
	FirstMs float64 `json:"first_ms"`
	latencies
}

func newListCommand() *cobra.Command {
	cfg := listConfig{Namespace: namespaceName(0), Pod: "target-pod", Repeat: 50, Wire: wireProtobuf}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Time listing one pod's events with the field selector kubectl uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runList(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			printList(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", "", "Base URL of the server.")
	f.StringVar(&cfg.Wire, "wire", cfg.Wire, "Wire format: protobuf (client-go's default for built-in types) or json (kubectl's).")
	f.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "Namespace of the pod.")
	f.StringVar(&cfg.Pod, "pod", cfg.Pod, "Name of the pod whose events are listed.")
	f.IntVar(&cfg.Repeat, "repeat", cfg.Repeat, "Number of lists.")
	_ = cmd.MarkFlagRequired("server")
	return cmd
}

// runList lists R times over one connection. Every list must return the
// same number of items.
func runList(ctx context.Context, cfg listConfig) (*listResult, error) {
	if err := checkWire(cfg.Wire); err != nil {
		return nil, err
	}
	if cfg.Server == "" || cfg.Namespace == "" || cfg.Pod == "" || cfg.Repeat < 1 {
		return nil, errors.New("--server, --namespace, --pod and --repeat >= 1 are required")
	}
	cs, err := newClientset(cfg.Server, cfg.Wire, nil)
	if err != nil {
		return nil, err
	}
	res := &listResult{Namespace: cfg.Namespace, Pod: cfg.Pod, Selector: podSelector(cfg.Pod), Repeat: cfg.Repeat}
	samples := make([]time.Duration, 0, cfg.Repeat)
	for i := range cfg.Repeat {
		t0 := time.Now()
		l, err := cs.CoreV1().Events(cfg.Namespace).List(ctx, metav1.ListOptions{FieldSelector: res.Selector})
		d := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("list %d: %w", i+1, err)
		}
		if i == 0 {
			res.Items, res.FirstMs = len(l.Items), ms(d)
		} else if len(l.Items) != res.Items {
			return nil, fmt.Errorf("list %d returned %d items, the first %d", i+1, len(l.Items), res.Items)
		}
		for _, ev := range l.Items {
			if ev.InvolvedObject.Name != cfg.Pod || ev.Namespace != cfg.Namespace {
				return nil, fmt.Errorf("list returned event %s/%s about %q", ev.Namespace, ev.Name, ev.InvolvedObject.Name)
			}
		}
		samples = append(samples, d)
	}
	res.latencies = summarize(samples)
	return res, nil
}

func printList(w io.Writer, r *listResult) {
	fmt.Fprintf(w, "list %s events of pod %s (%s): %d items\n", r.Namespace, r.Pod, r.Selector, r.Items)
	fmt.Fprintf(w, "  %d lists: first %.3f ms  p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", r.Repeat, r.FirstMs, r.P50Ms, r.P99Ms, r.MaxMs)
	printJSON(w, r)
}
