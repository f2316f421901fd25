// Command devcontainerd runs a real containerd 2.x for trying nodeagent
// on a real runtime: containerd, its runc shim, ctr and crictl built from
// tools/containerd (on the first run; cached in the user cache directory),
// started on a socket under a temporary directory with a busybox image
// made from the host's busybox-static (nothing is pulled), optionally with
// a crashlooping pod driven as the kubelet drives one. Ctrl-C stops it
// and removes every container, mount and cgroup it made. It needs root,
// overlayfs, cgroups, runc and busybox-static (the internal/containerdproc
// harness the tests use).
//
//	sudo go run ./cmd/devcontainerd --crashloop
//	go run ./cmd/devcontainerd --build-only   # only build (and cache) containerd, ctr and crictl
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/internal/containerdproc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := newCommand(os.Stdout).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "devcontainerd:", err)
		os.Exit(1)
	}
}

// options are devcontainerd's flags.
type options struct {
	buildOnly  bool
	crashloop  bool
	run        time.Duration
	maxBackoff time.Duration
	pods       int
	containers int
}

func newCommand(out io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "devcontainerd",
		Short: "Run a real containerd 2.x on a private socket until Ctrl-C, for nodeagent to follow",
		Long: `devcontainerd runs containerd 2.x (built from tools/containerd on the first run, minutes;
cached in the user cache directory) on a socket under a temporary directory, with runc, cgroupfs,
overlayfs and a busybox image made from the host's busybox-static, so nothing is pulled. Pods use
the host's network (no CNI). With --crashloop it runs pod default/crash, whose container app exits 1
after --run and is restarted as the kubelet restarts it (a new attempt after a back-off doubling from
1 s up to --max-backoff, the last dead container kept). Ctrl-C stops everything and removes what it
made. It needs root, overlayfs, cgroups, runc and busybox-static.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, out)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.buildOnly, "build-only", false, "Only build containerd, its shim, ctr and crictl into the user cache directory (the tests on a real containerd use this build), print where, and exit.")
	f.BoolVar(&o.crashloop, "crashloop", false, "Run pod default/crash with a container that keeps exiting 1, restarted as the kubelet would.")
	f.DurationVar(&o.run, "run", 500*time.Millisecond, "How long each attempt of the crashlooping container runs before it exits 1.")
	f.DurationVar(&o.maxBackoff, "max-backoff", 10*time.Second, "Longest back-off between attempts (the kubelet's is 5 minutes).")
	f.IntVar(&o.pods, "pods", 0, "Also run this many pods default/steady-N of --containers containers that sleep (a node at rest, for plegbench).")
	f.IntVar(&o.containers, "containers", 5, "Containers in each --pods pod.")
	buildinfo.AddVersionFlag(cmd)
	return cmd
}

func build(out io.Writer) (containerdproc.Binaries, error) {
	t0 := time.Now()
	if !containerdproc.Cached() {
		fmt.Fprintln(out, "building containerd, containerd-shim-runc-v2, ctr and crictl from tools/containerd (the first build takes minutes)...")
	}
	b, err := containerdproc.Build()
	if err != nil {
		return b, err
	}
	fmt.Fprintf(out, "containerd %s, containerd-shim-runc-v2, ctr and crictl: %s (%v)\n", b.Version, b.Dir, time.Since(t0).Round(time.Second))
	return b, nil
}

func run(ctx context.Context, o options, out io.Writer) error {
	b, err := build(out)
	if err != nil || o.buildOnly {
		return err
	}
	if err := containerdproc.CanRun(containerdproc.Options{}); err != nil {
		return err
	}
	c, err := containerdproc.Start(containerdproc.Options{Binaries: &b})
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devcontainerd: cleaning up:", err)
		}
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "containerd %s ready on %s (pid %d)\n  nodeagent --runtime-endpoint %s --server http://127.0.0.1:8080\n  %s --runtime-endpoint %s ps -a\n",
		c.Version(), c.Socket(), c.PID(), c.Endpoint(), b.Crictl(), c.Endpoint())
	if o.pods > 0 {
		if err := steadyPods(ctx, c, o, out); err != nil {
			return err
		}
	}
	if o.crashloop {
		if err := crashloop(ctx, c, o, out); err != nil && ctx.Err() == nil {
			return err
		}
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping containerd and removing its pods...")
	return nil
}

// crashloop runs pod default/crash until ctx ends: attempt N of container
// app created after attempt N-1 exited and a back-off, the dead one then
// removed, as the kubelet does.
func crashloop(ctx context.Context, c *containerdproc.Containerd, o options, out io.Writer) error {
	rt, closeRT, err := c.Dial()
	if err != nil {
		return err
	}
	defer closeRT()
	pod, err := c.RunPod(ctx, rt, "uid-crash", "default", "crash")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "pod default/crash: container app exits 1 and is restarted with a growing back-off")
	backoff, last := time.Second, ""
	for attempt := uint32(0); ; attempt++ {
		id, err := pod.StartContainer(ctx, rt, "app", attempt, fmt.Sprintf("sleep %.3f; exit 1", o.run.Seconds()))
		if err != nil {
			return err
		}
		if last != "" {
			if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: last}); err != nil {
				return err
			}
		}
		last = id
		if err := waitExited(ctx, rt, id); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.maxBackoff)
	}
}

// waitExited waits until the runtime reports container id exited.
func waitExited(ctx context.Context, rt runtimeapi.RuntimeServiceClient, id string) error {
	for {
		resp, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			return err
		}
		if resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// steadyPods runs o.pods pods of o.containers sleeping containers.
func steadyPods(ctx context.Context, c *containerdproc.Containerd, o options, out io.Writer) error {
	rt, closeRT, err := c.Dial()
	if err != nil {
		return err
	}
	defer closeRT()
	t0 := time.Now()
	for i := range o.pods {
		name := fmt.Sprintf("steady-%d", i)
		pod, err := c.RunPod(ctx, rt, "uid-"+name, "default", name)
		if err != nil {
			return err
		}
		for j := range o.containers {
			if _, err := pod.StartContainer(ctx, rt, fmt.Sprintf("c%d", j), 0, "exec sleep 2147483647"); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "%d pods of %d sleeping containers running (%v)\n", o.pods, o.containers, time.Since(t0).Round(time.Second))
	return nil
}
