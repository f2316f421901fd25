package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"

	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/internal/duration"
	"github.com/kubevents/kubevents/pleg"
)

// ReportingController is the reporting controller of the agent's events.
const ReportingController = "kubevents.io/nodeagent"

// criReconnect is how often the CRI connection is redialled while the
// runtime is down. gRPC's default waits 1 s, then 1.6 times longer after
// each failure, and fails calls at once meanwhile; a relist every second
// while the stream is down (pleg.GenericRelistPeriod) would then fail
// for seconds after the runtime is back, missing any container that
// started, exited and was removed in that time. Redialling a local socket
// is cheap, so the delay never exceeds one relist period.
var criReconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: pleg.GenericRelistPeriod},
	MinConnectTimeout: 20 * time.Second,
}

// Options are the nodeagent command's flags.
type Options struct {
	RuntimeEndpoint string
	Kubeconfig      string
	Server          string
	NodeName        string
	MetricsAddr     string
	PLEG            string
	LogLevel        string
	ShutdownTimeout time.Duration
	// LiveSeriesCounts writes a series' count as it ages (see
	// events.WithLiveSeriesCounts); default true.
	LiveSeriesCounts bool
	// StateFile, when set, is where the agent leaves its state when it
	// stops (State) and takes its predecessor's from when it starts, so
	// that what happened while it was down is recorded, once.
	StateFile string
	// Ready, when set, receives the metrics server's address once the
	// agent runs (for tests that listen on port 0).
	Ready func(metricsAddr string)
}

// NewCommand returns the nodeagent command, logging to stderr.
func NewCommand(stderr io.Writer) *cobra.Command {
	o := Options{}
	cmd := &cobra.Command{
		Use:   "nodeagent",
		Short: "Record pod lifecycle Events from a CRI runtime's event stream",
		Long: `nodeagent follows a CRI runtime (its GetContainerEvents stream, relisting
every 5 minutes, or every second while the stream is down or the runtime has
none) and records Kubernetes Events about pods to an API server: a container
started, a container exited with its exit code, and BackOff while a container
keeps failing. Repeats become event series, not a flood.`,
		Example: `  nodeagent --runtime-endpoint unix:///run/containerd/containerd.sock --server http://127.0.0.1:8080
  nodeagent --runtime-endpoint unix:///tmp/fakecri.sock --kubeconfig ~/.kube/config --node-name node-1`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.NodeName == "" {
				host, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("--node-name is not set and this machine's host name is unknown: %w", err)
				}
				o.NodeName = host
			}
			return Run(cmd.Context(), o, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.RuntimeEndpoint, "runtime-endpoint", "", "The CRI runtime's endpoint: unix:///path/to.sock, or the socket's path (required).")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "Kubeconfig of the API server to record events to (default: $KUBECONFIG, else ~/.kube/config).")
	f.StringVar(&o.Server, "server", "", "URL of the API server to record events to (overrides the kubeconfig's).")
	f.StringVar(&o.NodeName, "node-name", "", "Node name, in the events' reporting instance (default: this machine's host name).")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "127.0.0.1:9470", "Address serving /metrics and /healthz; empty to serve none.")
	f.StringVar(&o.PLEG, "pleg", "evented", "evented (follow the runtime's event stream, relisting rarely) or generic (relist every second).")
	f.StringVar(&o.LogLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "How long to write pending event counts on SIGTERM or SIGINT.")
	f.BoolVar(&o.LiveSeriesCounts, "live-series-counts", true, "Write a repeating event's count as its series ages (at 10 s, then whenever its age doubles, up to every 30 min), not only when it starts, every 30 min and when it ends.")
	f.StringVar(&o.StateFile, "state-file", "", "File the agent leaves its state in when it stops and resumes from when it starts, so that what happens while it is down (a container completing) is recorded, once; empty: each start records only what happens from then on.")
	duration.HintFlags(f)
	buildinfo.AddVersionFlag(cmd)
	return cmd
}

// Run runs the agent until ctx ends, then writes what it has pending.
func Run(ctx context.Context, o Options, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	target, err := criTarget(o.RuntimeEndpoint)
	if err != nil {
		return err
	}
	if o.PLEG != "evented" && o.PLEG != "generic" {
		return fmt.Errorf("--pleg %q: want evented or generic", o.PLEG)
	}
	restCfg, err := restConfig(o)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("API server client: %w", err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(criReconnect))
	if err != nil {
		return fmt.Errorf("CRI client for %s: %w", target, err)
	}
	defer conn.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pm := pleg.NewMetrics()
	if err := pm.Register(reg); err != nil {
		return fmt.Errorf("registering PLEG metrics: %w", err)
	}
	plegLog := log.WithName("pleg")
	var p interface {
		pleg.PodLifecycleEventGenerator
		Cache() *pleg.Cache
	}
	rt := pleg.NewCRIRuntime(conn)
	if o.PLEG == "evented" {
		p = pleg.NewEvented(rt, pleg.EventedConfig{Metrics: pm, Logger: &plegLog})
	} else {
		p = pleg.NewGeneric(rt, pleg.GenericConfig{Metrics: pm, Logger: &plegLog})
	}

	sinkLog := log.WithName("sink")
	sink := newReportingSink(&clientevents.EventSinkImpl{Interface: client.EventsV1()}, sinkConfig{Logger: &sinkLog})
	b := events.NewBroadcaster(sink,
		events.WithHostname(o.NodeName), events.WithLogger(log.WithName("events")), events.WithMetrics(reg),
		events.WithShutdownTimeout(o.ShutdownTimeout), events.WithLiveSeriesCounts(o.LiveSeriesCounts))
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		return err
	}
	defer b.Shutdown() // writes the series' pending counts
	rec := b.NewRecorder(scheme.Scheme, ReportingController)
	agentLog := log.WithName("agent")
	var resume *State
	if o.StateFile != "" {
		if resume, err = takeState(o.StateFile); err != nil {
			return err
		}
	}
	agent := New(p.Watch(), p.Cache(), rec, Config{Logger: &agentLog, Registerer: reg, Resume: resume})

	if o.MetricsAddr != "" {
		lis, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if ok, err := p.Healthy(); !ok {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "metrics server")
			}
		}()
		defer hs.Close()
		if o.Ready != nil {
			o.Ready(lis.Addr().String())
		}
	} else if o.Ready != nil {
		o.Ready("")
	}

	log.Info("Recording pod lifecycle events", "runtime", target, "apiServer", restCfg.Host,
		"pleg", o.PLEG, "metrics", o.MetricsAddr, "node", o.NodeName)
	p.Start()
	agent.Run(ctx)
	p.Stop()
	// What the PLEG sent before it stopped is handled, so that the state
	// left holds it.
	for drained := false; !drained; {
		select {
		case ev := <-p.Watch():
			agent.Handle(ev)
		default:
			drained = true
		}
	}
	if o.StateFile != "" {
		if err := writeState(o.StateFile, agent.State()); err != nil {
			log.Error(err, "Writing the agent's state; the next start records only what happens from then on")
		} else {
			log.Info("Left the agent's state for the next start", "file", o.StateFile, "containers", len(agent.State().Containers))
		}
	}
	log.Info("Stopping; writing pending event counts")
	return nil
}
