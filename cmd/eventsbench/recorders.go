package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clientevents "k8s.io/client-go/tools/events"
	clientrecord "k8s.io/client-go/tools/record"

	ourevents "github.com/kubevents/kubevents/events"
	ourrecord "github.com/kubevents/kubevents/record"
)

// recordersConfig configures the recorder workloads.
type recordersConfig struct {
	Eventsd, Server string
	// Period is the crashloop's emission interval; Crashloop its length.
	Period, Crashloop time.Duration
	// ReasonsPeriod is the five-reasons workload's interval; it runs 18
	// intervals, the sixth reason from the 7th on.
	ReasonsPeriod time.Duration
	// Settle is how long to wait after Shutdown for writes client-go's
	// recorders still have in flight.
	Settle time.Duration
	// Heartbeat, when set, adds a run of this project's events recorder
	// with this heartbeat interval (to measure what a shorter one costs).
	Heartbeat time.Duration
	Out       string
}

func newRecordersCommand() *cobra.Command {
	cfg := recordersConfig{Period: 100 * time.Millisecond, Crashloop: time.Minute, ReasonsPeriod: 10 * time.Second, Settle: 3 * time.Second}
	cmd := &cobra.Command{
		Use:   "recorders",
		Short: "Compare this project's recorders with client-go's on the crashloop and five-reasons workloads",
		Long: `recorders runs two workloads, each with four recorders at once (client-go's
tools/record and tools/events, this project's record and events), every one
with its own namespace, against eventsd, in real time:

  crashloop:    one Warning BackOff for one pod every --period for --crashloop
                (10/s for 60 s by default: 600 emissions);
  five-reasons: five reasons on one pod every --reasons-period for 18 periods,
                and a sixth reason from the 7th period on (every 10 s for
                3 min, the sixth from t=60 s: 102 emissions).

Then it shuts the broadcasters down (client-go's do not write pending counts
on shutdown), waits --settle, and reports the writes each recorder sent and
what eventsd stores: objects and counts per reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecorders(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Eventsd, "eventsd", "", "eventsd binary to start (a fresh data directory); or use --server.")
	f.StringVar(&cfg.Server, "server", "", "An events API server to use instead of starting eventsd.")
	f.DurationVar(&cfg.Period, "period", cfg.Period, "Crashloop emission interval.")
	f.DurationVar(&cfg.Crashloop, "crashloop", cfg.Crashloop, "Crashloop length.")
	f.DurationVar(&cfg.ReasonsPeriod, "reasons-period", cfg.ReasonsPeriod, "Five-reasons interval.")
	f.DurationVar(&cfg.Settle, "settle", cfg.Settle, "Wait after shutdown before listing.")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", 0, "Also run this project's events recorder with this heartbeat interval.")
	f.StringVar(&cfg.Out, "out", "", "Write the results as JSON here.")
	return cmd
}

// countingSink counts the writes a recorder sends.
type counts struct{ creates, patches atomic.Int64 }

type coreSink struct {
	*typedcorev1.EventSinkImpl
	n *counts
}

func (s coreSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.n.creates.Add(1)
	return s.EventSinkImpl.Create(e)
}

func (s coreSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.n.patches.Add(1)
	return s.EventSinkImpl.Patch(e, data)
}

// List lets this project's record package resume (nothing to resume on a
// fresh server, but it is the sink a user would pass).
func (s coreSink) List(ctx context.Context, opts metav1.ListOptions) (*corev1.EventList, error) {
	return s.EventSinkImpl.Interface.List(ctx, opts)
}

type v1Sink struct {
	*clientevents.EventSinkImpl
	n *counts
}

func (s v1Sink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.n.creates.Add(1)
	return s.EventSinkImpl.Create(ctx, e)
}

func (s v1Sink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.n.patches.Add(1)
	return s.EventSinkImpl.Patch(ctx, e, data)
}

// List lets this project's events package resume.
func (s v1Sink) List(ctx context.Context, opts metav1.ListOptions) (*eventsv1.EventList, error) {
	return s.EventSinkImpl.Interface.Events(metav1.NamespaceAll).List(ctx, opts)
}

// emitter is one recorder under test: emit records an event about a pod,
// stop shuts its broadcaster down.
type emitter struct {
	name string
	emit func(pod *corev1.Pod, typ, reason, msg string)
	stop func()
	n    *counts
}

// newEmitters builds the recorders; host names the node each of this
// project's events recorders reports from, distinct per workload as
// distinct processes would be (a recorder resumes the series its own
// reporting instance wrote).
func newEmitters(cs kubernetes.Interface, heartbeat time.Duration, host string) []*emitter {
	var out []*emitter
	{ // client-go tools/record
		n := &counts{}
		b := clientrecord.NewBroadcaster()
		b.StartRecordingToSink(coreSink{&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}, n})
		r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
		out = append(out, &emitter{name: "client-go tools/record", n: n, stop: b.Shutdown,
			emit: func(p *corev1.Pod, typ, reason, msg string) { r.Event(p, typ, reason, msg) }})
	}
	{ // client-go tools/events
		n := &counts{}
		b := clientevents.NewBroadcaster(v1Sink{&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, n})
		ctx, cancel := context.WithCancel(context.Background())
		_ = b.StartRecordingToSinkWithContext(ctx)
		r := b.NewRecorder(scheme.Scheme, "kubelet")
		out = append(out, &emitter{name: "client-go tools/events", n: n, stop: func() { b.Shutdown(); cancel() },
			emit: func(p *corev1.Pod, typ, reason, msg string) { r.Eventf(p, nil, typ, reason, "Act", msg) }})
	}
	{ // this project's record
		n := &counts{}
		b := ourrecord.NewBroadcaster()
		b.StartRecordingToSink(coreSink{&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}, n})
		r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
		out = append(out, &emitter{name: "kubevents record", n: n, stop: b.Shutdown,
			emit: func(p *corev1.Pod, typ, reason, msg string) { r.Event(p, typ, reason, msg) }})
	}
	ours := func(name string, opts ...ourevents.Option) {
		opts = append([]ourevents.Option{ourevents.WithHostname(fmt.Sprintf("%s-%d", host, len(out)))}, opts...)
		n := &counts{}
		b := ourevents.NewBroadcaster(v1Sink{&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, n}, opts...)
		_ = b.StartRecordingToSinkWithContext(context.Background())
		r := b.NewRecorder(scheme.Scheme, "kubelet")
		out = append(out, &emitter{name: name, n: n, stop: b.Shutdown,
			emit: func(p *corev1.Pod, typ, reason, msg string) { r.Eventf(p, nil, typ, reason, "Act", msg) }})
	}
	ours("kubevents events")
	ours("kubevents events, strict schedule", ourevents.WithLiveSeriesCounts(false))
	if heartbeat > 0 {
		ours(fmt.Sprintf("kubevents events, heartbeat %v", heartbeat), ourevents.WithHeartbeatInterval(heartbeat))
	}
	return out
}

// recorderResult is what one recorder did in one workload.
type recorderResult struct {
	Workload string           `json:"workload"`
	Recorder string           `json:"recorder"`
	Emitted  map[string]int   `json:"emitted"`
	Creates  int64            `json:"creates"`
	Patches  int64            `json:"patches"`
	Objects  int              `json:"objects"`
	Stored   map[string]int32 `json:"stored"`
	// AtEnd is what the server stored when the workload's last emission
	// was made, before the broadcaster shut down: how far behind the truth
	// a reader of a live series is.
	AtEnd     map[string]int32 `json:"stored_at_end"`
	Exact     bool             `json:"exact"`
	Namespace string           `json:"namespace"`
	counts    *counts
}

func runRecorders(ctx context.Context, cfg recordersConfig, w io.Writer) error {
	server := cfg.Server
	if server == "" {
		if cfg.Eventsd == "" {
			return errors.New("give --eventsd (a binary to start) or --server")
		}
		dir, err := os.MkdirTemp("", "eventsbench-recorders-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		ev, err := startEventsd(ctx, cfg.Eventsd, dir)
		if err != nil {
			return err
		}
		defer ev.stop() //nolint:errcheck // best effort at exit
		server = ev.URL
	}
	cs, err := newClientset(server, wireProtobuf, nil)
	if err != nil {
		return err
	}
	type workload struct {
		name string
		run  func(e *emitter, pod func(string) *corev1.Pod, emitted map[string]int)
	}
	workloads := []workload{
		{"crashloop", func(e *emitter, pod func(string) *corev1.Pod, emitted map[string]int) {
			t := time.NewTicker(cfg.Period)
			defer t.Stop()
			for i := 0; i < int(cfg.Crashloop/cfg.Period); i++ {
				e.emit(pod("crash"), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app")
				emitted["BackOff"]++
				<-t.C
			}
		}},
		{"five-reasons", func(e *emitter, pod func(string) *corev1.Pod, emitted map[string]int) {
			t := time.NewTicker(cfg.ReasonsPeriod)
			defer t.Stop()
			for i := 0; i < 18; i++ {
				reasons := []string{"Pulling", "Pulled", "Created", "Started", "Unhealthy"}
				if i >= 6 {
					reasons = append(reasons, "Killing")
				}
				for _, r := range reasons {
					e.emit(pod("web"), corev1.EventTypeNormal, r, r+" for container app")
					emitted[r]++
				}
				<-t.C
			}
		}},
	}
	var (
		mu       sync.Mutex
		results  []*recorderResult
		wg       sync.WaitGroup
		firstErr error
	)
	for wi, wl := range workloads {
		for ei, e := range newEmitters(cs, cfg.Heartbeat, wl.name) {
			ns := fmt.Sprintf("rec-%d-%d", wi, ei)
			pod := func(name string) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)}}
			}
			wg.Go(func() {
				emitted := map[string]int{}
				wl.run(e, pod, emitted)
				atEnd, _, err := storedCounts(ctx, cs, ns)
				e.stop()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results = append(results, &recorderResult{Workload: wl.name, Recorder: e.name, Emitted: emitted, AtEnd: atEnd, Namespace: ns, counts: e.n})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	time.Sleep(cfg.Settle)
	for _, r := range results {
		if err := r.collect(ctx, cs); err != nil {
			return err
		}
	}
	sort.Slice(results, func(i, j int) bool {
		return results[i].Workload < results[j].Workload || results[i].Workload == results[j].Workload && results[i].Recorder < results[j].Recorder
	})
	printRecorders(w, cfg, results)
	if cfg.Out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		return os.WriteFile(cfg.Out, b, 0o644)
	}
	return nil
}

// collect lists what the server stores in r's namespace, through core/v1
// (which shows both kinds of events): legacy events count with count,
// new-style ones with their series count (1 without a series).
func (r *recorderResult) collect(ctx context.Context, cs kubernetes.Interface) error {
	r.Creates, r.Patches = r.counts.creates.Load(), r.counts.patches.Load()
	var err error
	if r.Stored, r.Objects, err = storedCounts(ctx, cs, r.Namespace); err != nil {
		return err
	}
	r.Exact = len(r.Stored) == len(r.Emitted)
	for reason, n := range r.Emitted {
		if int(r.Stored[reason]) != n {
			r.Exact = false
		}
	}
	return nil
}

// storedCounts lists what the server stores in namespace, through core/v1
// (which shows both kinds of events): the count per reason (legacy events
// count with count, new-style ones with their series count, 1 without a
// series) and the number of objects.
func storedCounts(ctx context.Context, cs kubernetes.Interface, namespace string) (map[string]int32, int, error) {
	l, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("listing the events in %s: %w", namespace, err)
	}
	out := map[string]int32{}
	for _, ev := range l.Items {
		n := ev.Count
		if !ev.EventTime.IsZero() {
			n = 1
			if ev.Series != nil {
				n = ev.Series.Count
			}
		}
		out[ev.Reason] += n
	}
	return out, len(l.Items), nil
}

func printRecorders(w io.Writer, cfg recordersConfig, results []*recorderResult) {
	fmt.Fprintf(w, "## Recorders: crashloop (%v every %v) and five reasons (every %v for 18 periods, the sixth from the 7th)\n\n",
		cfg.Crashloop, cfg.Period, cfg.ReasonsPeriod)
	fmt.Fprintln(w, "| workload | recorder | emitted | writes (create + patch) | stored objects | stored count per reason | stored at the last emission | every emission counted |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---|---|")
	for _, r := range results {
		emitted := 0
		for _, n := range r.Emitted {
			emitted += n
		}
		var parts, atEnd []string
		for _, reason := range slices.Sorted(maps.Keys(r.Emitted)) {
			parts = append(parts, fmt.Sprintf("%s %d/%d", reason, r.Stored[reason], r.Emitted[reason]))
			atEnd = append(atEnd, fmt.Sprintf("%s %d", reason, r.AtEnd[reason]))
		}
		exact := "no"
		if r.Exact {
			exact = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d (%d + %d) | %d | %s | %s | %s |\n", r.Workload, r.Recorder, emitted,
			r.Creates+r.Patches, r.Creates, r.Patches, r.Objects, strings.Join(parts, ", "), strings.Join(atEnd, ", "), exact)
	}
}
