package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// listLoadConfig configures a read-throughput benchmark: clients list one
// pod's events (kubectl's field selector) back to back, spread over one
// or more replicas.
type listLoadConfig struct {
	// Servers are the replicas' base URLs; client i uses Servers[i mod n].
	Servers []string
	Clients int
	// Duration is the measured interval, after Warmup.
	Duration, Warmup time.Duration
	Namespace, Pod   string
	// WantItems is the number of events every list must return.
	WantItems int
	// Token, when set, is sent as a bearer token; Limit, when positive,
	// is each list's limit (kubectl events sends 500).
	Token string
	Limit int64
	// PIDs are the processes whose CPU time is the servers' (the replicas
	// and etcd).
	PIDs []int
}

// listLoadResult is the outcome of a read-throughput benchmark; as for
// creates, only lists that completed in the measured interval count.
type listLoadResult struct {
	Replicas    int     `json:"replicas"`
	Clients     int     `json:"clients"`
	DurationS   float64 `json:"duration_s"`
	Lists       int64   `json:"lists"`
	ListsPerSec float64 `json:"lists_per_s"`
	Items       int     `json:"items_per_list"`
	latencies
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// ServerCPUMsPerList is the CPU time of PIDs (replicas and etcd) over
	// the interval per list; ServerCPUCores the same per second.
	ServerCPUMsPerList *float64 `json:"server_cpu_ms_per_list,omitempty"`
	ServerCPUCores     *float64 `json:"server_cpu_cores,omitempty"`
	ClientCPUMsPerList float64  `json:"client_cpu_ms_per_list"`
	MachineBusyCores   float64  `json:"machine_busy_cores"`
}

// runListLoad runs the read-throughput benchmark. A list that fails or
// returns other than WantItems items is an error, counted.
func runListLoad(ctx context.Context, cfg listLoadConfig) (*listLoadResult, error) {
	if len(cfg.Servers) == 0 || cfg.Clients < 1 || cfg.Duration <= 0 {
		return nil, errors.New("list load: servers, clients >= 1 and a positive duration are required")
	}
	clients := make([]kubernetes.Interface, cfg.Clients)
	for i := range clients {
		cs, err := newClientsetAuth(cfg.Servers[i%len(cfg.Servers)], wireProtobuf, cfg.Token, nil)
		if err != nil {
			return nil, err
		}
		clients[i] = cs
	}
	sel := podSelector(cfg.Pod)
	start := time.Now()
	mStart, mEnd := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	workers := make([]createWorker, cfg.Clients)
	var wg sync.WaitGroup
	for i := range workers {
		w, cs := &workers[i], clients[i]
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(mEnd) {
				t0 := time.Now()
				l, err := cs.CoreV1().Events(cfg.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel, Limit: cfg.Limit})
				t1 := time.Now()
				if err == nil && len(l.Items) != cfg.WantItems {
					err = fmt.Errorf("list returned %d items, want %d", len(l.Items), cfg.WantItems)
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if !t1.Before(mStart) && t1.Before(mEnd) {
					w.samples = append(w.samples, t1.Sub(t0))
				}
			}
		})
	}
	var srv0, srv1, self0, self1, all0, all1 time.Duration
	var cpuErr error
	sample := func(srv, self, all *time.Duration) {
		for _, pid := range cfg.PIDs {
			v, err := procCPU(pid)
			*srv, cpuErr = *srv+v, errors.Join(cpuErr, err)
		}
		*self, _ = procCPU(0)
		*all, _ = machineCPU()
	}
	sleepUntil(ctx, mStart)
	sample(&srv0, &self0, &all0)
	sleepUntil(ctx, mEnd)
	sample(&srv1, &self1, &all1)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &listLoadResult{Replicas: len(cfg.Servers), Clients: cfg.Clients, DurationS: cfg.Duration.Seconds(), Items: cfg.WantItems}
	all, errs, firstErr := mergeWorkers(workers)
	res.Errors, res.FirstError = errs, firstErr
	res.Lists = int64(len(all))
	res.ListsPerSec = round3(float64(res.Lists) / cfg.Duration.Seconds())
	res.latencies = summarize(all)
	res.MachineBusyCores = round3((all1 - all0).Seconds() / cfg.Duration.Seconds())
	if res.Lists > 0 {
		res.ClientCPUMsPerList = round3(ms(self1-self0) / float64(res.Lists))
		if len(cfg.PIDs) > 0 && cpuErr == nil {
			per := round3(ms(srv1-srv0) / float64(res.Lists))
			cores := round3((srv1 - srv0).Seconds() / cfg.Duration.Seconds())
			res.ServerCPUMsPerList, res.ServerCPUCores = &per, &cores
		}
	}
	if cpuErr != nil {
		return res, fmt.Errorf("reading the servers' CPU time: %w", cpuErr)
	}
	return res, nil
}
