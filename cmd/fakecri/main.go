// Command fakecri serves a scriptable fake CRI runtime (package fakecri)
// on a socket: the CRI RuntimeService with GetContainerEvents, driven by a
// built-in scenario and/or a script, with the event buffering of
// containerd 2.x (block), containerd 1.7 (drop) or CRI-O (broadcast), and
// optional faults. It serves until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kubevents/kubevents/fakecri"
	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/spf13/cobra"
)

// options are fakecri's flags.
type options struct {
	listen               string
	scenario             string
	script               string
	mode                 string
	buffer               int
	pods                 int
	containers           int
	timeScale            float64
	crashAfter           time.Duration
	churnInterval        time.Duration
	churnLifetime        time.Duration
	unimplemented        bool
	eventsDisabled       bool
	statusWithContainers bool
	logLevel             string
}

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

// newCommand returns the fakecri command.
func newCommand() *cobra.Command {
	o := options{}
	cmd := &cobra.Command{
		Use:   "fakecri",
		Short: "A scriptable fake CRI runtime",
		Long: `fakecri serves a fake CRI RuntimeService (ListPodSandbox, PodSandboxStatus,
ListContainers, ContainerStatus, GetContainerEvents, ...) on a socket, with
pods and containers driven by a built-in scenario or a script, the event
buffering of a real runtime and optional faults. It serves until SIGINT or
SIGTERM. See the fakecri package documentation for the script language.`,
		Example: `  fakecri --listen unix:///tmp/fakecri.sock --scenario steady --pods 100 --containers 5
  fakecri --scenario crashloop --time-scale 10
  fakecri --script pod.fcri --mode drop`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "unix:///tmp/fakecri.sock", "Endpoint to serve on: unix:///path, a socket path, or tcp://host:port. A stale socket file is replaced; one another process serves on is an error.")
	f.StringVar(&o.scenario, "scenario", "", "Built-in scenario to run: steady, crashloop or churn; empty for none.")
	f.StringVar(&o.script, "script", "", "Script file to run (see the fakecri package documentation), alongside --scenario.")
	f.StringVar(&o.mode, "mode", "block", "Event buffering: block (containerd 2.x), drop (containerd 1.7) or broadcast (CRI-O).")
	f.IntVar(&o.buffer, "buffer", 0, "Event buffer size; 0 for the mode's default (block 100 per subscriber, drop and broadcast 1000 shared).")
	f.IntVar(&o.pods, "pods", 0, "Pods of the steady scenario; 0 for the default (10).")
	f.IntVar(&o.containers, "containers", 0, "Containers per pod (steady, churn); 0 for the default (steady 2, churn 1).")
	f.Float64Var(&o.timeScale, "time-scale", 1, "Speed-up of scenario durations: 10 runs ten times faster.")
	f.DurationVar(&o.crashAfter, "crash-after", 0, "How long each crashloop attempt runs; 0 for the default (5s).")
	f.DurationVar(&o.churnInterval, "churn-interval", 0, "Time between two churn pod creations; 0 for the default (1s).")
	f.DurationVar(&o.churnLifetime, "churn-lifetime", 0, "Lifetime of a churn pod; 0 for the default (10s).")
	f.BoolVar(&o.unimplemented, "unimplemented", false, "GetContainerEvents answers Unimplemented (containerd 1.6).")
	f.BoolVar(&o.eventsDisabled, "events-disabled", false, "GetContainerEvents returns at once, the client sees EOF (CRI-O with enable_pod_events=false).")
	f.BoolVar(&o.statusWithContainers, "status-with-containers", false, "PodSandboxStatus fills containers_statuses and timestamp (CRI-O with pod events).")
	f.StringVar(&o.logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	buildinfo.AddVersionFlag(cmd)
	return cmd
}

// run serves until ctx ends.
func run(ctx context.Context, o options, logOut io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	mode, err := fakecri.ParseBufferMode(o.mode)
	if err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	if o.timeScale <= 0 {
		return errors.New("--time-scale must be positive")
	}
	switch o.scenario {
	case "", fakecri.ScenarioSteady, fakecri.ScenarioCrashloop, fakecri.ScenarioChurn:
	default:
		return fmt.Errorf("--scenario: unknown scenario %q (want steady, crashloop or churn)", o.scenario)
	}
	var script *fakecri.Script
	if o.script != "" {
		f, err := os.Open(o.script)
		if err != nil {
			return fmt.Errorf("--script: %w", err)
		}
		script, err = fakecri.ParseScript(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--script %s: %w", o.script, err)
		}
	}

	rt := fakecri.New(fakecri.Options{Mode: mode, Buffer: o.buffer, StatusWithContainers: o.statusWithContainers, Logger: log})
	defer rt.Close()
	if o.unimplemented || o.eventsDisabled {
		rt.UpdateFaults(func(f *fakecri.Faults) {
			f.Unimplemented = o.unimplemented
			f.EventsDisabled = o.eventsDisabled
		})
	}
	// No deferred stop: the one return after Listen calls stop explicitly,
	// and on a panic the deferred rt.Close stops the server too.
	addr, stop, err := rt.Listen(o.listen)
	if err != nil {
		return err
	}
	log.Info("fakecri serving", "address", addr, "mode", mode, "scenario", o.scenario, "script", o.script)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	if o.scenario != "" {
		wg.Go(func() {
			errc <- rt.RunScenario(ctx, o.scenario, fakecri.ScenarioOptions{
				Pods: o.pods, Containers: o.containers, TimeScale: o.timeScale, CrashAfter: o.crashAfter,
				ChurnInterval: o.churnInterval, ChurnLifetime: o.churnLifetime,
			})
		})
	}
	if script != nil {
		wg.Go(func() {
			err := script.Run(ctx, rt)
			if err == nil && ctx.Err() == nil {
				log.Info("script finished", "script", o.script)
			}
			if err != nil {
				err = fmt.Errorf("--script %s: %w", o.script, err)
			}
			errc <- err
		})
	}
	var runErr error
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case err := <-errc:
			if err != nil {
				log.Error("stopping", "err", err)
				runErr = err
				done = true
			}
		}
	}
	log.Info("shutting down")
	cancel()
	// Close before waiting: it unblocks a scenario stuck publishing to a
	// subscriber that does not read.
	stop()
	rt.Close()
	wg.Wait()
	return runErr
}
