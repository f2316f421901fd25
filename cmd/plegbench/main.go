// Command plegbench measures the generic and the evented PLEG side by side
// against a CRI runtime (fakecri, started separately): the runtime RPCs
// each makes per minute and the CPU it spends, at steady state and with
// about one container state change per second, and the latency from a
// state change to its PodLifecycleEvent.
//
//	go run ./cmd/fakecri --listen unix:///tmp/plegbench.sock --scenario steady --pods 100 --containers 5 &
//	go run ./cmd/plegbench --runtime-endpoint unix:///tmp/plegbench.sock
//
// Steady state runs the PLEG on a fake clock through --steady simulated
// minutes (relists happen as often as they would; the runtime is real), so
// the evented PLEG's 300 s relists are counted without waiting for them.
// The changing workload runs in real time for --churn per mode.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/pleg"
)

type options struct {
	endpoint string
	steady   time.Duration
	churn    time.Duration
	modes    []string
	// runtimePID, when set, is the runtime's process: its CPU is measured.
	runtimePID int
	// command, when set, is what the churn's new containers run (a real
	// runtime needs an image and a command; fakecri needs neither).
	command string
}

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

// newCommand returns the plegbench command.
func newCommand() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:          "plegbench",
		Short:        "Measure the generic and evented PLEG against a CRI runtime",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.endpoint, "runtime-endpoint", "unix:///tmp/plegbench.sock", "The runtime to measure against (fakecri --scenario steady).")
	f.DurationVar(&o.steady, "steady", 10*time.Minute, "Simulated time of the steady-state measurement, per mode.")
	f.DurationVar(&o.churn, "churn", 2*time.Minute, "Real time of the changing workload, per mode.")
	f.StringSliceVar(&o.modes, "modes", []string{"generic", "evented"}, "PLEGs to measure.")
	f.IntVar(&o.runtimePID, "runtime-pid", 0, "The runtime's process ID, to measure the CPU it spends serving each PLEG (devcontainerd prints containerd's).")
	f.StringVar(&o.command, "command", "", "For a real runtime (containerd): the shell command the changing workload's new containers run, with the image and labels of the containers they replace (devcontainerd --pods: \"exec sleep 2147483647\").")
	buildinfo.AddVersionFlag(cmd)
	return cmd
}

// counting is a pleg.Runtime that counts the calls made through it.
type counting struct {
	pleg.Runtime
	unary, streams atomic.Int64
}

func (c *counting) ListPodSandbox(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	c.unary.Add(1)
	return c.Runtime.ListPodSandbox(ctx)
}

func (c *counting) ListContainers(ctx context.Context, id string) ([]*runtimeapi.Container, error) {
	c.unary.Add(1)
	return c.Runtime.ListContainers(ctx, id)
}

func (c *counting) PodSandboxStatus(ctx context.Context, id string) (*runtimeapi.PodSandboxStatusResponse, error) {
	c.unary.Add(1)
	return c.Runtime.PodSandboxStatus(ctx, id)
}

func (c *counting) ContainerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	c.unary.Add(1)
	return c.Runtime.ContainerStatus(ctx, id)
}

func (c *counting) GetContainerEvents(ctx context.Context) (pleg.EventStream, error) {
	c.streams.Add(1)
	return c.Runtime.GetContainerEvents(ctx)
}

// cpu returns the process's user+system CPU time.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns a process's user+system CPU time from /proc (0 when
// pid is 0 or unreadable).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is 3rd, utime 14th, stime 15th.
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// plegUnderTest is either PLEG with what the benchmark needs of it.
type plegUnderTest interface {
	pleg.PodLifecycleEventGenerator
}

func newPLEG(mode string, rt pleg.Runtime, clk clock.Clock, m *pleg.Metrics) plegUnderTest {
	if mode == "evented" {
		return pleg.NewEvented(rt, pleg.EventedConfig{Clock: clk, Metrics: m})
	}
	return pleg.NewGeneric(rt, pleg.GenericConfig{Clock: clk, Metrics: m})
}

func relists(m *pleg.Metrics) uint64 {
	var d dto.Metric
	_ = m.RelistDuration.(prometheus.Metric).Write(&d)
	return d.GetHistogram().GetSampleCount()
}

func value(c prometheus.Collector) float64 {
	var d dto.Metric
	_ = c.(prometheus.Metric).Write(&d)
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// waitFor polls cond for up to a minute.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// drainEvents discards a PLEG's events until stop is closed.
func drainEvents(p plegUnderTest, stop <-chan struct{}, wg *sync.WaitGroup, seen func(*pleg.PodLifecycleEvent)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case ev := <-p.Watch():
				if seen != nil {
					seen(ev)
				}
			}
		}
	}()
}

type result struct {
	mode                       string
	containers                 int
	steadyRPCs, steadyCPU      float64       // per simulated minute
	steadyRuntimeCPU           float64       // the runtime's, per simulated minute
	churnRPCs, churnCPU        float64       // per real minute
	churnRuntimeCPU            float64       // the runtime's, per real minute
	stamp50, stamp99           time.Duration // the runtime's own delay, from the change to its event's created_at
	fromChange50, fromChange99 time.Duration // from the change itself (the status's started_at or finished_at) to the PLEG event
	streams                    int64
	changes                    int
	p50, p99, maxL             time.Duration
	missed, discards, drops    float64
}

func run(ctx context.Context, o options, out io.Writer) error {
	conn, err := grpc.NewClient(o.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	cri := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("listing the runtime's containers: %w", err)
	}
	var results []result
	for _, mode := range o.modes {
		if mode != "generic" && mode != "evented" {
			return fmt.Errorf("--modes: unknown PLEG %q", mode)
		}
		r := result{mode: mode, containers: len(list.Containers)}
		if err := steady(ctx, o, conn, mode, &r); err != nil {
			return fmt.Errorf("%s steady state: %w", mode, err)
		}
		if err := churn(ctx, o, conn, cri, mode, &r); err != nil {
			return fmt.Errorf("%s changing workload: %w", mode, err)
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "%s done\n", mode)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if o.runtimePID != 0 {
		fmt.Fprintln(tw, "PLEG\tcontainers\tsteady RPC/min\tsteady CPU ms/min\truntime CPU ms/min\t1/s RPC/min\t1/s CPU ms/min\truntime CPU ms/min\tchanges\tlatency p50\tp99\tmax\tfrom the change p50\tp99\truntime stamping p50\tp99\tstreams\tmissed")
	} else {
		fmt.Fprintln(tw, "PLEG\tcontainers\tsteady RPC/min\tsteady CPU ms/min\t1/s RPC/min\t1/s CPU ms/min\tchanges\tlatency p50\tp99\tmax\tstreams\tmissed")
	}
	for _, r := range results {
		lat := fmt.Sprintf("%d\t%v\t%v\t%v", r.changes, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.maxL.Round(10*time.Microsecond))
		if o.runtimePID != 0 {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t%v\t%v\t%v\t%v\t%d\t%.0f\n", r.mode, r.containers,
				r.steadyRPCs, r.steadyCPU, r.steadyRuntimeCPU, r.churnRPCs, r.churnCPU, r.churnRuntimeCPU, lat,
				r.fromChange50.Round(time.Millisecond), r.fromChange99.Round(time.Millisecond),
				r.stamp50.Round(time.Millisecond), r.stamp99.Round(time.Millisecond), r.streams, r.missed)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%d\t%.0f\n", r.mode, r.containers,
			r.steadyRPCs, r.steadyCPU, r.churnRPCs, r.churnCPU, lat, r.streams, r.missed)
	}
	return tw.Flush()
}

// steady runs the PLEG on a fake clock through o.steady of simulated time
// with the runtime unchanged.
func steady(ctx context.Context, o options, conn *grpc.ClientConn, mode string, r *result) error {
	clk := clocktesting.NewFakeClock(time.Now())
	m := pleg.NewMetrics()
	rt := &counting{Runtime: pleg.NewCRIRuntime(conn)}
	p := newPLEG(mode, rt, clk, m)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	drainEvents(p, stop, &wg, nil)
	defer func() { p.Stop(); close(stop); wg.Wait() }()
	p.Start()
	if err := waitFor(ctx, "the first relist", func() bool { return relists(m) >= 1 }); err != nil {
		return err
	}
	if mode == "evented" {
		// The stream counts as established after a second open.
		clk.Step(time.Second)
		if err := waitFor(ctx, "the stream", func() bool { return value(m.EventedInUse) == 1 && relists(m) >= 2 }); err != nil {
			return err
		}
	}
	time.Sleep(2 * time.Second) // let replayed events settle
	unary0, cpu0, rcpu0, n0 := rt.unary.Load(), cpu(), procCPU(o.runtimePID), relists(m)
	steps := int(o.steady / time.Second)
	for i := 1; i <= steps; i++ {
		clk.Step(time.Second)
		if mode == "generic" {
			want := n0 + uint64(i)
			if err := waitFor(ctx, "a relist", func() bool { return relists(m) >= want }); err != nil {
				return err
			}
		} else if i%300 == 0 {
			want := n0 + uint64(i/300)
			if err := waitFor(ctx, "a relist", func() bool { return relists(m) >= want }); err != nil {
				return err
			}
		}
	}
	minutes := o.steady.Minutes()
	r.steadyRPCs = float64(rt.unary.Load()-unary0) / minutes
	r.steadyCPU = float64((cpu() - cpu0).Milliseconds()) / minutes
	r.steadyRuntimeCPU = float64((procCPU(o.runtimePID) - rcpu0).Milliseconds()) / minutes
	return nil
}

// churn runs the PLEG in real time while, about every second, a container
// is stopped (ContainerDied) or, the next time, replaced by a new one that
// starts (ContainerStarted); it measures each change's latency, from the
// CRI call to the PLEG event.
func churn(ctx context.Context, o options, conn *grpc.ClientConn, cri runtimeapi.RuntimeServiceClient, mode string, r *result) error {
	m := pleg.NewMetrics()
	rt := &counting{Runtime: pleg.NewCRIRuntime(conn)}
	p := newPLEG(mode, rt, clock.RealClock{}, m)

	type key struct {
		t  pleg.PodLifeCycleEventType
		id string
	}
	var mu sync.Mutex
	pending := map[key]time.Time{}
	var lat, fromChange []time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	drainEvents(p, stop, &wg, func(ev *pleg.PodLifecycleEvent) {
		now := time.Now()
		id, _ := ev.Data.(string)
		mu.Lock()
		defer mu.Unlock()
		if t0, ok := pending[key{ev.Type, id}]; ok {
			lat = append(lat, now.Sub(t0))
			delete(pending, key{ev.Type, id})
			if at := changedAt(ev, id); at != 0 {
				fromChange = append(fromChange, now.Sub(time.Unix(0, at)))
			}
		}
	})
	defer func() { p.Stop(); close(stop); wg.Wait() }()
	p.Start()
	if err := waitFor(ctx, "the first relist", func() bool { return relists(m) >= 1 }); err != nil {
		return err
	}
	if mode == "evented" {
		if err := waitFor(ctx, "the stream", func() bool { return value(m.EventedInUse) == 1 && relists(m) >= 2 }); err != nil {
			return err
		}
	}
	sandboxes, err := cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var victims []*runtimeapi.Container
	list, err := cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return err
	}
	victims = list.Containers
	if len(victims) == 0 || len(sandboxes.Items) == 0 {
		return errors.New("the runtime runs no containers: start fakecri with --scenario steady")
	}

	stamps, stopStamps, err := watchStamping(ctx, cri)
	if err != nil {
		return err
	}
	defer stopStamps()
	unary0, cpu0, rcpu0 := rt.unary.Load(), cpu(), procCPU(o.runtimePID)
	start := time.Now()
	changes := 0
	var stopped *runtimeapi.Container
	var stoppedAt int // its index in victims, where its replacement goes
	for time.Since(start) < o.churn {
		// About one change a second, at a random phase: a fixed period
		// would lock onto the generic PLEG's relists and bias its latency.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500*time.Millisecond + rand.N(time.Second)):
		}
		if stopped == nil {
			stoppedAt = changes % len(victims)
			c := victims[stoppedAt]
			mu.Lock()
			pending[key{pleg.ContainerDied, c.Id}] = time.Now()
			mu.Unlock()
			if _, err := cri.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 0}); err != nil {
				return err
			}
			stopped = c
		} else {
			md := stopped.Metadata
			req := &runtimeapi.CreateContainerRequest{PodSandboxId: stopped.PodSandboxId,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: md.Name, Attempt: md.Attempt + 1}}}
			if o.command != "" {
				// Before the removal: it reads the container's status.
				if err := asReplacement(ctx, cri, stopped, o.command, req); err != nil {
					return err
				}
			}
			if _, err := cri.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: stopped.Id}); err != nil {
				return err
			}
			resp, err := cri.CreateContainer(ctx, req)
			if err != nil {
				return err
			}
			mu.Lock()
			pending[key{pleg.ContainerStarted, resp.ContainerId}] = time.Now()
			mu.Unlock()
			if _, err := cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
				return err
			}
			victims[stoppedAt] = &runtimeapi.Container{Id: resp.ContainerId, PodSandboxId: stopped.PodSandboxId,
				Metadata: &runtimeapi.ContainerMetadata{Name: md.Name, Attempt: md.Attempt + 1}, Image: stopped.Image, Labels: stopped.Labels}
			stopped = nil
		}
		changes++
	}
	elapsed := time.Since(start)
	if err := waitFor(ctx, "the last changes' events", func() bool { mu.Lock(); defer mu.Unlock(); return len(pending) == 0 }); err != nil {
		return err
	}
	minutes := elapsed.Minutes()
	r.churnRPCs = float64(rt.unary.Load()-unary0) / minutes
	r.churnCPU = float64((cpu() - cpu0).Milliseconds()) / minutes
	r.churnRuntimeCPU = float64((procCPU(o.runtimePID) - rcpu0).Milliseconds()) / minutes
	r.stamp50, r.stamp99 = stamps()
	r.streams = rt.streams.Load()
	r.changes = changes
	r.missed = value(m.MissedEvents)
	mu.Lock()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.p50, r.p99, r.maxL = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	}
	slices.Sort(fromChange)
	if n := len(fromChange); n > 0 {
		r.fromChange50, r.fromChange99 = fromChange[n/2], fromChange[min(n-1, n*99/100)]
	}
	mu.Unlock()
	return nil
}

// changedAt is when the container of a PLEG event changed, by the
// runtime's status: started_at for ContainerStarted, finished_at for
// ContainerDied; 0 when the event carries no status of it.
func changedAt(ev *pleg.PodLifecycleEvent, id string) int64 {
	if ev.Status == nil {
		return 0
	}
	for _, c := range ev.Status.ContainerStatuses {
		if c.GetId() != id {
			continue
		}
		if ev.Type == pleg.ContainerStarted {
			return c.StartedAt
		}
		return c.FinishedAt
	}
	return 0
}

// asReplacement makes req create, on a real runtime, a container like the
// one it replaces: its image and labels, running command, with its
// sandbox's metadata, labels and network mode as the sandbox config.
func asReplacement(ctx context.Context, cri runtimeapi.RuntimeServiceClient, old *runtimeapi.Container, command string, req *runtimeapi.CreateContainerRequest) error {
	st, err := cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: old.Id, Verbose: true})
	if err != nil && old.Image == nil {
		return fmt.Errorf("status of the container replaced: %w", err)
	}
	image, labels := old.Image, old.Labels
	if err == nil {
		image, labels = st.GetStatus().GetImage(), st.GetStatus().GetLabels()
	}
	sb, err := cri.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: old.PodSandboxId})
	if err != nil {
		return fmt.Errorf("status of its sandbox: %w", err)
	}
	req.Config.Image = image
	req.Config.Labels = labels
	req.Config.Command = []string{"/bin/sh", "-c", command}
	req.Config.Linux = &runtimeapi.LinuxContainerConfig{}
	req.SandboxConfig = &runtimeapi.PodSandboxConfig{Metadata: sb.Status.Metadata, Labels: sb.Status.Labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroupParent(st.GetInfo()),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: sb.Status.GetLinux().GetNamespaces().GetOptions()}}}
	return nil
}

// cgroupParent is the cgroup parent of a container by its verbose
// status (containerd's info: the OCI spec's cgroupsPath, PARENT/ID under
// cgroupfs), so that its replacement goes where the pod's containers are
// (and where whoever made the pod cleans up); "" when it is not there.
func cgroupParent(info map[string]string) string {
	var v struct {
		RuntimeSpec struct {
			Linux struct {
				CgroupsPath string `json:"cgroupsPath"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(info["info"]), &v); err != nil || v.RuntimeSpec.Linux.CgroupsPath == "" {
		return ""
	}
	return path.Dir(v.RuntimeSpec.Linux.CgroupsPath)
}

// watchStamping follows the runtime's event stream beside the PLEG and
// measures the runtime's own delay: from a container's start or finish
// (its status's started_at or finished_at) to the created_at the runtime
// stamped its STARTED or STOPPED event with. stats returns its p50 and p99
// so far; zero when the runtime has no stream.
func watchStamping(ctx context.Context, cri runtimeapi.RuntimeServiceClient) (stats func() (p50, p99 time.Duration), stop func(), err error) {
	sctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var delays []time.Duration
	done := make(chan struct{})
	s, err := cri.GetContainerEvents(sctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	go func() {
		defer close(done)
		for {
			ev, err := s.Recv()
			if err != nil {
				return
			}
			for _, c := range ev.ContainersStatuses {
				if c.Id != ev.ContainerId {
					continue
				}
				var at int64
				switch ev.ContainerEventType {
				case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
					at = c.StartedAt
				case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
					at = c.FinishedAt
				}
				if at != 0 {
					mu.Lock()
					delays = append(delays, time.Duration(ev.CreatedAt-at))
					mu.Unlock()
				}
			}
		}
	}()
	stats = func() (time.Duration, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		d := slices.Clone(delays)
		slices.Sort(d)
		if len(d) == 0 {
			return 0, 0
		}
		return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
	}
	return stats, func() { cancel(); <-done }, nil
}
