package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clienttools "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// crashloopFolding folds repeats of BackOff within 10 minutes.
var crashloopFolding = &fold.Configuration{Rules: []fold.Rule{{Name: "crashloop", Window: "10m"}}}

func init() { crashloopFolding.Rules[0].Reasons = []string{"BackOff"} }

// warnings collects the Warning headers a client gets.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// foldServer is one eventsd replica in process, with its client.
type foldServer struct {
	cs   kubernetes.Interface
	reg  *prometheus.Registry
	warn *warnings
}

// startFoldServer serves store with folding configured by fc (nil: off)
// on clk.
func startFoldServer(t *testing.T, store storage.Interface, clk *clocktesting.FakeClock, fc *fold.Configuration) *foldServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	srv, err := server.New(server.Config{Store: store, Clock: clk, Registry: reg, Fold: fc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.BeginShutdown()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Drain(context.Background())
	})
	w := &warnings{}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL, QPS: -1, WarningHandler: w})
	if err != nil {
		t.Fatal(err)
	}
	return &foldServer{cs: cs, reg: reg, warn: w}
}

// foldBackends open each backend, closed at the test's end.
var foldBackends = map[string]func(t *testing.T, clk *clocktesting.FakeClock) storage.Interface{
	"pebble": func(t *testing.T, clk *clocktesting.FakeClock) storage.Interface {
		s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
	"etcd": func(t *testing.T, _ *clocktesting.FakeClock) storage.Interface {
		_, endpoint := startEtcd(t)
		return openEtcdStore(t, endpoint)
	},
}

func startEtcd(t *testing.T) (func(), string) {
	e, endpoint := etcdtest.Start(t, t.TempDir())
	t.Cleanup(func() { e.Close() })
	return func() { e.Close() }, endpoint
}

func openEtcdStore(t *testing.T, endpoint string) storage.Interface {
	t.Helper()
	s, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, CompactionInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// naiveCreate is what a script or an operator that never dedupes does for
// each occurrence: a typed Create of a new Event, named as client-go
// names events, about pod, through the core/v1 or events.k8s.io/v1 API.
// It returns the stored event's name and count as answered.
func naiveCreate(ctx context.Context, cs kubernetes.Interface, eventsV1 bool, pod string, now time.Time, i int) (string, int32, error) {
	name := fmt.Sprintf("%s.%x", pod, now.UnixNano())
	ref := corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID("uid-" + pod), APIVersion: "v1"}
	msg := fmt.Sprintf("Back-off restarting failed container app (restart %d)", i)
	if eventsV1 {
		out, err := cs.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NewMicroTime(now), Regarding: ref,
			Reason: "BackOff", Action: "Restart", Type: corev1.EventTypeWarning, Note: msg,
			ReportingController: "crashloop-script", ReportingInstance: "crashloop-script-1",
		}, metav1.CreateOptions{})
		if err != nil {
			return "", 0, err
		}
		n := int32(1)
		if out.Series != nil {
			n = out.Series.Count
		}
		return out.Name, n, nil
	}
	out, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: ref, Reason: "BackOff", Type: corev1.EventTypeWarning, Message: msg,
		Source: corev1.EventSource{Component: "crashloop-script"}, Count: 1,
		FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now),
	}, metav1.CreateOptions{})
	if err != nil {
		return "", 0, err
	}
	return out.Name, out.Count, nil
}

// storedCounts lists the namespace default's BackOff events about pod:
// name to count (series count for series-style events).
func storedCounts(t *testing.T, ctx context.Context, cs kubernetes.Interface, pod string) map[string]int32 {
	t.Helper()
	l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=BackOff"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, ev := range l.Items {
		out[ev.Name] = fold.Occurrences(&ev)
	}
	return out
}

// TestFoldNaiveCrashloop: a naive client crashlooping 600 times in 60 s
// (on the server's fake clock) stores one event whose count is 600, on
// both backends and through both groups: every create is answered with
// that event, the 599 folded with a Warning naming it; a watcher sees one
// ADDED and 599 MODIFIED; the folds are counted by rule and reason. A
// repeat after the window starts a new event; with folding off, every
// create is its own object and nothing is folded.
func TestFoldNaiveCrashloop(t *testing.T) {
	for backend, open := range foldBackends {
		for _, group := range []string{"core", "events.k8s.io"} {
			t.Run(backend+"/"+group, func(t *testing.T) {
				clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				s := startFoldServer(t, open(t, clk), clk, crashloopFolding)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				w, err := s.cs.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				eventsV1 := group == "events.k8s.io"
				var first string
				for i := range 600 {
					clk.Step(100 * time.Millisecond)
					name, count, err := naiveCreate(ctx, s.cs, eventsV1, "web", clk.Now(), i)
					if err != nil {
						t.Fatalf("create %d: %v", i, err)
					}
					if i == 0 {
						first = name
					}
					if name != first || count != int32(i+1) {
						t.Fatalf("create %d answered %s count %d, want %s count %d", i, name, count, first, i+1)
					}
				}
				if got := storedCounts(t, ctx, s.cs, "web"); len(got) != 1 || got[first] != 600 {
					t.Fatalf("stored %v, want %s: 600", got, first)
				}
				warns := s.warn.all()
				if len(warns) != 599 || !strings.Contains(warns[598], "default/"+first) || !strings.Contains(warns[598], "count 600") {
					t.Fatalf("%d warnings, last %q; want 599 naming default/%s", len(warns), warns[len(warns)-1], first)
				}
				types := map[watch.EventType]int{}
				for range 600 {
					select {
					case e := <-w.ResultChan():
						types[e.Type]++
					case <-ctx.Done():
						t.Fatalf("watch got %v", types)
					}
				}
				if types[watch.Added] != 1 || types[watch.Modified] != 599 {
					t.Fatalf("watch got %v, want 1 ADDED and 599 MODIFIED", types)
				}
				if got := metricstest.Sum(t, s.reg, "eventsd_fold_creates_total", "rule", "crashloop", "reason", "BackOff"); got != 599 {
					t.Fatalf("eventsd_fold_creates_total = %v, want 599", got)
				}
				// A dry run answers the fold and stores nothing; a create
				// of the folded event's own name is refused as before.
				dry := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.dry"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "uid-web", APIVersion: "v1"},
					Reason: "BackOff", Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: "crashloop-script"}, Count: 1}
				if !eventsV1 {
					out, err := s.cs.CoreV1().Events("default").Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					if err != nil || out.Name != first || out.Count != 601 {
						t.Fatalf("dry run: %v, %v; want %s count 601", out, err, first)
					}
					dry.Name = first
					if _, err := s.cs.CoreV1().Events("default").Create(ctx, dry, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
						t.Fatalf("create of %s: %v, want AlreadyExists", first, err)
					}
				}
				if got := storedCounts(t, ctx, s.cs, "web"); len(got) != 1 || got[first] != 600 {
					t.Fatalf("after a dry run: stored %v, want %s: 600", got, first)
				}
				// Past the window a repeat is a new event.
				clk.Step(10*time.Minute + time.Second)
				name, count, err := naiveCreate(ctx, s.cs, eventsV1, "web", clk.Now(), 600)
				if err != nil || name == first || count != 1 {
					t.Fatalf("after the window: %s count %d, %v; want a new event", name, count, err)
				}
				// Another reason is not folded by this rule.
				ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "web."}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "uid-web"}, Reason: "Started"}
				for range 2 {
					if _, err := s.cs.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if l, err := s.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Started"}); err != nil || len(l.Items) != 2 {
					t.Fatalf("Started events: %v, %v; want 2", l, err)
				}
			})
		}
	}
	t.Run("off", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		s := startFoldServer(t, foldBackends["pebble"](t, clk), clk, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, eventsV1 := range []bool{false, true} {
			for i := range 300 {
				clk.Step(100 * time.Millisecond)
				if _, count, err := naiveCreate(ctx, s.cs, eventsV1, "web", clk.Now(), i); err != nil || count != 1 {
					t.Fatalf("create %d: count %d, %v", i, count, err)
				}
			}
		}
		if got := storedCounts(t, ctx, s.cs, "web"); len(got) != 600 {
			t.Fatalf("%d events stored, want 600", len(got))
		}
		if w := s.warn.all(); len(w) != 0 {
			t.Fatalf("warnings without folding: %q", w)
		}
		if got := metricstest.Sum(t, s.reg, "eventsd_fold_creates_total"); got != 0 {
			t.Fatalf("eventsd_fold_creates_total = %v without folding", got)
		}
	})
}

// TestFoldTwoReplicasOverEtcd: two replicas over one etcd. A naive
// crashloop whose creates alternate between them stores one event of
// count 600. Creates racing on both at once lose no count and leave at
// most one extra object: the later stored of two racing first creates
// merges into the earlier unless the earlier was already written to.
func TestFoldTwoReplicasOverEtcd(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, endpoint := startEtcd(t)
	a := startFoldServer(t, openEtcdStore(t, endpoint), clk, crashloopFolding)
	b := startFoldServer(t, openEtcdStore(t, endpoint), clk, crashloopFolding)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	replicas := []*foldServer{a, b}
	for i := range 600 {
		clk.Step(100 * time.Millisecond)
		if _, _, err := naiveCreate(ctx, replicas[i%2].cs, i%3 == 0, "alternate", clk.Now(), i); err != nil {
			t.Fatal(err)
		}
	}
	// Through both groups the events are series-style when the first
	// create was (i=0 is events.k8s.io): core/v1 creates are another key.
	counts := storedCounts(t, ctx, b.cs, "alternate")
	total := int32(0)
	for _, n := range counts {
		total += n
	}
	if len(counts) != 2 || total != 600 {
		t.Fatalf("stored %v, want two series (one per style) of 600 in all", counts)
	}

	for round := range 5 {
		pod := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for ri, r := range replicas {
			wg.Go(func() {
				for i := range 60 {
					// Distinct names on each replica: a create of a taken
					// name is refused, folded or not.
					at := clk.Now().Add(time.Duration(2*i+ri) * time.Millisecond)
					if _, _, err := naiveCreate(ctx, r.cs, false, pod, at, i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		counts := storedCounts(t, ctx, a.cs, pod)
		total := int32(0)
		for _, n := range counts {
			total += n
		}
		if total != 120 || len(counts) > 2 {
			t.Fatalf("round %d: stored %v, want 120 occurrences in at most 2 events", round, counts)
		}
		t.Logf("round %d: %d event(s) %v", round, len(counts), counts)
	}
	races := metricstest.Sum(t, a.reg, "eventsd_fold_races_total") + metricstest.Sum(t, b.reg, "eventsd_fold_races_total")
	lost := metricstest.Sum(t, a.reg, "eventsd_fold_races_total", "outcome", "lost") + metricstest.Sum(t, b.reg, "eventsd_fold_races_total", "outcome", "lost")
	t.Logf("races resolved: %v", races)
	if lost != 0 {
		t.Fatalf("%v occurrences lost in races", lost)
	}
}

// TestFoldRecordersRestarted: client-go's recorders restarted in the
// middle of a crashloop continue the series the first process stored,
// through the folding of their first create: tools/record patches the
// event it is answered with (its count too), tools/events writes its
// series to its own name, whose creates are folded by the count they
// add. Without folding each process stores its own event.
func TestFoldRecordersRestarted(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web", ResourceVersion: "1"}}
	for _, tc := range []struct {
		recorder string
		// emit starts a recorder process, emits n BackOff events about
		// pod and returns its shutdown.
		emit func(t *testing.T, cs kubernetes.Interface, n int) func()
		// perProcess is what each process stores: the recorder writes
		// all of tools/record's 10 occurrences, but only 2 of tools/events'
		// (its create and the series' first patch: later counts wait for
		// the series' end, 6 minutes on, which a shutdown does not write).
		perProcess int32
	}{
		{"tools/record", func(t *testing.T, cs kubernetes.Interface, n int) func() {
			b := record.NewBroadcaster()
			b.StartRecordingToSink(&typedCoreSink{cs})
			r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node1"})
			for range n {
				// kubelet's message is the same every time: tools/record's
				// deduplication key has the message.
				r.Event(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod web")
			}
			return b.Shutdown
		}, 10},
		{"tools/events", func(t *testing.T, cs kubernetes.Interface, n int) func() {
			b := clienttools.NewBroadcaster(&clienttools.EventSinkImpl{Interface: cs.EventsV1()})
			ctx, cancel := context.WithCancel(context.Background())
			if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
				t.Fatal(err)
			}
			r := b.NewRecorder(scheme.Scheme, "kubelet")
			for i := range n {
				r.Eventf(pod, nil, corev1.EventTypeWarning, "BackOff", "Restart", "Back-off restarting failed container app (%d)", i)
			}
			return func() { cancel(); b.Shutdown() }
		}, 2},
	} {
		for _, folding := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/folding=%v", tc.recorder, folding), func(t *testing.T) {
				// The recorders stamp events with the real clock; the
				// window is judged on the server's.
				clk := clocktesting.NewFakeClock(time.Now())
				fc := crashloopFolding
				if !folding {
					fc = nil
				}
				s := startFoldServer(t, foldBackends["pebble"](t, clk), clk, fc)
				ctx := context.Background()
				deadline := time.Now().Add(30 * time.Second)
				n := int(tc.perProcess)
				for process := 1; process <= 2; process++ {
					shutdown := tc.emit(t, s.cs, n)
					want := map[bool]string{true: fmt.Sprintf("one event of count %d", int32(process)*tc.perProcess), false: fmt.Sprintf("%d events of count %d", process, tc.perProcess)}[folding]
					for {
						counts := storedCounts(t, ctx, s.cs, "web")
						var got []int32
						for _, c := range counts {
							got = append(got, c)
						}
						if (folding && len(got) == 1 && got[0] == int32(process)*tc.perProcess) ||
							(!folding && len(got) == process && !slices.ContainsFunc(got, func(c int32) bool { return c != tc.perProcess })) {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("process %d: stored %v, want %s", process, counts, want)
						}
						time.Sleep(20 * time.Millisecond)
					}
					shutdown()
				}
				// Nothing more arrives: the counts stay.
				time.Sleep(200 * time.Millisecond)
				total := int32(0)
				for _, c := range storedCounts(t, ctx, s.cs, "web") {
					total += c
				}
				if total != 2*tc.perProcess {
					t.Fatalf("%d occurrences stored, want %d", total, 2*tc.perProcess)
				}
			})
		}
	}
}

// typedCoreSink is client-go's typed core/v1 EventSink, as controllers
// give tools/record.
type typedCoreSink struct{ cs kubernetes.Interface }

func (s *typedCoreSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	return s.cs.CoreV1().Events(ev.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
}

func (s *typedCoreSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return s.cs.CoreV1().Events(ev.Namespace).Update(context.Background(), ev, metav1.UpdateOptions{})
}

func (s *typedCoreSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.cs.CoreV1().Events(ev.Namespace).Patch(context.Background(), ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// TestFoldSeriesWritesOfOneName: what tools/events sends for a series
// whose first create was folded (its PATCHes get 404, so it creates its
// own name again with the series' whole count) adds each occurrence once:
// Y stored, then Z with no series, series 2 and series 10 → Y counts 11;
// Z's count 10 again writes nothing.
func TestFoldSeriesWritesOfOneName(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := startFoldServer(t, foldBackends["pebble"](t, clk), clk, crashloopFolding)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev := func(name string, series int32) *eventsv1.Event {
		e := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name}, EventTime: metav1.NewMicroTime(clk.Now()),
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "uid-web", APIVersion: "v1"},
			Reason:    "BackOff", Action: "Restart", Type: corev1.EventTypeWarning, Note: "back-off " + name,
			ReportingController: "kubelet", ReportingInstance: "kubelet-node1",
		}
		if series > 0 {
			e.Series = &eventsv1.EventSeries{Count: series, LastObservedTime: metav1.NewMicroTime(clk.Now())}
		}
		return e
	}
	var last *eventsv1.Event
	for i, step := range []struct {
		name   string
		series int32
		want   int32
	}{{"y", 0, 1}, {"y", 2, 0}, {"z", 0, 3}, {"z", 2, 4}, {"z", 10, 12}} {
		clk.Step(time.Second)
		out, err := s.cs.EventsV1().Events("default").Create(ctx, ev(step.name, step.series), metav1.CreateOptions{})
		if step.want == 0 {
			// tools/events' series write after a PATCH 404 of its own,
			// stored name: refused, as before (it retries the PATCH).
			if !apierrors.IsAlreadyExists(err) {
				t.Fatalf("step %d: %v, want AlreadyExists", i, err)
			}
			if _, err := s.cs.EventsV1().Events("default").Patch(ctx, "y", types.StrategicMergePatchType,
				fmt.Appendf(nil, `{"series":{"count":2,"lastObservedTime":%q}}`, clk.Now().Format("2006-01-02T15:04:05.000000Z")), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		n := int32(1)
		if out.Series != nil {
			n = out.Series.Count
		}
		if out.Name != "y" || n != step.want {
			t.Fatalf("step %d (%s, series %d): answered %s count %d, want y count %d", i, step.name, step.series, out.Name, n, step.want)
		}
		last = out
	}
	clk.Step(time.Second)
	out, err := s.cs.EventsV1().Events("default").Create(ctx, ev("z", 10), metav1.CreateOptions{})
	if err != nil || out.Series.Count != 12 || out.ResourceVersion != last.ResourceVersion {
		t.Fatalf("z's count 10 again: %v, %v; want y unchanged at count 12, resourceVersion %s", out, err, last.ResourceVersion)
	}
	if got := storedCounts(t, ctx, s.cs, "web"); len(got) != 1 || got["y"] != 12 {
		t.Fatalf("stored %v, want y: 12", got)
	}
}
