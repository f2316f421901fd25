// Command evctl answers the questions about Kubernetes events that kubectl
// can't: an object's timeline (as regarding or related object), filters by
// action, controller, instance and age, series shown with their state, and
// a watch that survives disconnects without duplicates or gaps.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubevents/kubevents/evctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := evctl.NewCommand(os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
