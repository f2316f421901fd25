// Command nodeagent follows a CRI runtime's container events (with
// relisting as the safety net) and records Kubernetes Events about pods to
// an API server: Started, exits with their exit codes, and BackOff while a
// container crashloops, each repeat counted in one event series.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubevents/kubevents/nodeagent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := nodeagent.NewCommand(os.Stderr).ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}
