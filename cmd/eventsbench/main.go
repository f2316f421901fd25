// Command eventsbench is the load generator and benchmark orchestrator for
// eventsd. It drives servers with client-go, the way real clients do, and
// compares eventsd with a trivial echo server measured in the same run.
//
//	eventsbench echo   --listen 127.0.0.1:PORT
//	eventsbench create --server URL --clients N --duration D [--warmup W] [--namespaces K] [--objects M] [--pid P]
//	eventsbench list   --server URL --namespace NS --pod NAME [--repeat R]
//	eventsbench fill   --server URL --total T --clients N --target-pod NAME --target-count C
//	eventsbench run    --eventsd PATH --out results.json [--quick] [--backends pebble,etcd] [--storage-backends etcd] [--etcd-events N]
//	                   [--etcd-binary PATH] [--kube-apiserver PATH|built]
//	eventsbench mirror --eventsd PATH [--kube-apiserver PATH|built] [--quick] [--events N] [--rate R] [--out results.json]
//	eventsbench watchstorm --eventsd PATH[,PATH] [--labels A,B] [--events N] [--watches W]
//	eventsbench scale  --eventsd PATH --backend pebble|etcd --events 1000000,10000000 [--dir /tmp/scale] [--profile]
//	eventsbench family --eventsd PATH [--kube-apiserver PATH|built] [--phases query,follow,create] [--events N] [--objects M] [--out results.json]
//	eventsbench fleet  [--phases mirror,list] [--sources 20] [--rate 2000] [--clusters 20] [--cluster-events 100000] [--store-dir D] [--out results.json]
//	eventsbench etcd   --data-dir D [--listen-client URL] [--quota-backend-bytes N]   (hidden: the etcd run starts)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kubevents/kubevents/internal/buildinfo"
)

func main() {
	os.Exit(execute(os.Args[1:]))
}

// execute runs the command line args and returns the exit code. Ctrl-C and
// SIGTERM cancel the command's context, so children and load stop cleanly.
func execute(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := newRootCommand()
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "eventsbench:", err)
		return 1
	}
	return 0
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "eventsbench",
		Short:         "Benchmark eventsd with client-go against a trivial echo server",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newEchoCommand(), newCreateCommand(), newListCommand(), newFillCommand(), newRunCommand(), newRecordersCommand(), newEtcdCommand(), newExportCommand(), newWatchStormCommand(), newMirrorCommand(), newFoldCommand(), newScaleCommand(), newFamilyCommand(), newSearchCommand(), newMetricsCommand(), newFleetCommand())
	buildinfo.AddVersionFlag(root)
	return root
}
