package eventmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventmetrics"
	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/record"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clientevents "k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

var quiet = slog.New(slog.DiscardHandler)

// occurrences returns the counter's value per namespace (the overflow
// series under its marker) and their sum.
func occurrences(t *testing.T, c *eventmetrics.Counter) (map[string]float64, float64) {
	t.Helper()
	by := metricstest.Samples(t, c, eventmetrics.OccurrencesName, eventmetrics.LabelNamespace)
	sum := 0.0
	for _, v := range by {
		sum += v
	}
	return by, sum
}

// stored returns the occurrences the events of ns hold.
func stored(t *testing.T, st storage.Interface, ns string) float64 {
	t.Helper()
	l, err := st.List(context.Background(), storage.ListOptions{Selector: storage.Selector{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, ev := range l.Items {
		n += float64(eventapi.Occurrences(ev))
	}
	return n
}

// checkNamespace: the counter of ns is want, and so are the occurrences
// its stored events hold, but for deleted ones.
func checkNamespace(t *testing.T, c *eventmetrics.Counter, st storage.Interface, ns string, want, deleted float64) {
	t.Helper()
	by, _ := occurrences(t, c)
	if by[ns] != want {
		t.Errorf("%s: counter %v, want %v", ns, by[ns], want)
	}
	if got := stored(t, st, ns); got != want-deleted {
		t.Errorf("%s: stored events hold %v occurrences, want %v", ns, got, want-deleted)
	}
}

type backend struct {
	name string
	// open opens a store (a replica, on etcd) reporting to written.
	open func(t *testing.T, written storage.WriteObserver) storage.Interface
}

func backends(t *testing.T) []backend {
	return []backend{{
		name: "pebble",
		open: func(t *testing.T, written storage.WriteObserver) storage.Interface {
			st, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), Logger: quiet, NoSync: true, Written: written})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}, {
		name: "etcd",
		open: func() func(t *testing.T, written storage.WriteObserver) storage.Interface {
			var endpoint string
			return func(t *testing.T, written storage.WriteObserver) storage.Interface {
				if endpoint == "" {
					var e *embed.Etcd
					e, endpoint = etcdtest.Start(t, t.TempDir())
					t.Cleanup(e.Close) // after the stores close (cleanups run last first)
				}
				st, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout,
					CompactionInterval: -1, Logger: quiet, Written: written})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
		}(),
	}}
}

func pod(ns string) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", UID: types.UID("uid-" + ns)}}
}

// TestOccurrencesExact: the counter grows by exactly the occurrences
// written through kubectl, both recorders, folding and the mirror, on
// both backends, and equals what the stored events hold; deletions
// change nothing; on etcd each replica counts its own writes.
func TestOccurrencesExact(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			counter, err := eventmetrics.New(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			st := b.open(t, counter.Observe)
			foldCfg := &fold.Configuration{Rules: []fold.Rule{{Window: "1h"}}}
			foldCfg.Rules[0].Namespaces = []string{"folded"}
			url, cs := servertest.Serve(t, server.Config{Store: st, Logger: quiet, Fold: foldCfg})

			t.Run("kubectl", func(t *testing.T) {
				kubectlCreatePatchDelete(t, url, cs)
				checkNamespace(t, counter, st, "kubectl", 6, 1)
			})
			t.Run("record", func(t *testing.T) {
				br := record.NewBroadcaster(record.WithMetrics(prometheus.NewRegistry()))
				br.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
				rec := br.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
				for range 7 {
					rec.Event(pod("record"), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
				}
				rec.Event(pod("record"), corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed")
				br.Shutdown()
				checkNamespace(t, counter, st, "record", 8, 0)
			})
			t.Run("events", func(t *testing.T) {
				br := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, events.WithMetrics(prometheus.NewRegistry()),
					events.WithHostname("sched-1"))
				if err := br.StartRecordingToSinkWithContext(ctx); err != nil {
					t.Fatal(err)
				}
				rec := br.NewRecorder(scheme.Scheme, "default-scheduler")
				for range 6 {
					rec.Eventf(pod("events"), nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "0/3 nodes are available")
				}
				br.Shutdown()
				checkNamespace(t, counter, st, "events", 6, 0)
			})
			t.Run("fold", func(t *testing.T) {
				for i, n := range []int32{1, 1, 3, 1} {
					ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "folded", Name: fmt.Sprintf("oom.%d", i)},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "folded", Name: "batch-1", UID: "pod-uid"},
						Type:           corev1.EventTypeWarning, Reason: "OOMKilling", Message: "Memory cgroup out of memory", Count: n,
						Source: corev1.EventSource{Component: "kernel-monitor", Host: "node-1"}}
					if _, err := cs.CoreV1().Events("folded").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				l, err := cs.CoreV1().Events("folded").List(ctx, metav1.ListOptions{})
				if err != nil || len(l.Items) != 1 {
					t.Fatalf("folded events: %d, %v; want 1", len(l.Items), err)
				}
				checkNamespace(t, counter, st, "folded", 6, 0)
			})
			t.Run("mirror", func(t *testing.T) {
				src := mirror.NewFakeSource()
				m, err := mirror.New(mirror.Options{Source: src, Store: st.(mirror.Store), Registerer: prometheus.NewRegistry(), Logger: quiet,
					AllowExistingEvents: true, Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				mctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- m.Run(mctx) }()
				defer func() {
					cancel()
					if err := <-done; err != nil {
						t.Error(err)
					}
				}()
				ev := src.Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "mirrored", Name: "n.1"},
					InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-2"}, Type: corev1.EventTypeNormal, Reason: "NodeNotReady",
					Count: 2, Source: corev1.EventSource{Component: "node-controller"}})
				waitFor(t, "the mirror's create", func() bool { return stored(t, st, "mirrored") == 2 })
				ev = ev.DeepCopy()
				ev.Count = 5
				src.Update(ev)
				waitFor(t, "the mirror's update", func() bool { return stored(t, st, "mirrored") == 5 })
				checkNamespace(t, counter, st, "mirrored", 5, 0)
			})
			// Every occurrence above, nothing else: no overflow, no
			// other namespace.
			by, sum := occurrences(t, counter)
			if sum != 6+8+6+6+5 || by[eventmetrics.OverflowValue] != 0 {
				t.Errorf("counter %v (sum %v), want 31 over the namespaces above", by, sum)
			}

			if b.name != "etcd" {
				return
			}
			// A second replica on the same etcd: it counts the writes
			// it makes, the first replica does not see them.
			counter2, err := eventmetrics.New(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			st2 := b.open(t, counter2.Observe)
			_, cs2 := servertest.Serve(t, server.Config{Store: st2, Logger: quiet})
			if _, err := cs2.CoreV1().Events("replica").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "replica", Name: "r.1"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "replica", Name: "p"}, Reason: "Pulled", Count: 4}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			by1, _ := occurrences(t, counter)
			by2, sum2 := occurrences(t, counter2)
			if by1["replica"] != 0 || by2["replica"] != 4 || sum2 != 4 {
				t.Errorf("replica 1 counts %v, replica 2 %v: want 0 and 4 (each its own writes)", by1["replica"], by2["replica"])
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", what)
		}
	}
}

// kubectlCreatePatchDelete creates an event of count 3 with kubectl,
// patches its count to 5 and deletes another one it created.
func kubectlCreatePatchDelete(t *testing.T, url string, cs kubernetes.Interface) {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not on PATH")
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: kubectl}}]
current-context: c
`, url))
	ev := write("ev.yaml", `apiVersion: v1
kind: Event
metadata: {name: web.1, namespace: kubectl}
involvedObject: {kind: Pod, name: web, namespace: kubectl}
type: Warning
reason: BackOff
message: Back-off restarting failed container
count: 3
source: {component: kubelet}
---
apiVersion: v1
kind: Event
metadata: {name: web.2, namespace: kubectl}
involvedObject: {kind: Pod, name: web, namespace: kubectl}
type: Normal
reason: Pulled
message: image pulled
count: 0
`)
	run := func(args ...string) {
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("create", "-f", ev)                                                 // 3 + 1
	run("patch", "event", "web.1", "--type=merge", "-p", `{"count":5}`)     // +2
	run("patch", "event", "web.1", "--type=merge", "-p", `{"message":"x"}`) // +0
	run("delete", "event", "web.2")                                         // nothing
}

// TestRestart: after a restart the counter starts from 0 (a counter reset
// to Prometheus) and counts only the occurrences written since: nothing
// stored before is counted again, and an update counts its increase over
// the state stored before the restart.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() (*eventmetrics.Counter, storage.Interface) {
		c, err := eventmetrics.New(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := pebblestore.Open(pebblestore.Options{Dir: dir, Logger: quiet, Written: c.Observe})
		if err != nil {
			t.Fatal(err)
		}
		return c, st
	}
	c1, st := open()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "e"}, Reason: "BackOff", Count: 3,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "a", Name: "p"}}
	created, err := st.Create(ctx, ev.DeepCopy(), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, sum := occurrences(t, c1); sum != 3 {
		t.Fatalf("before the restart: %v, want 3", sum)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	c2, st := open()
	defer st.Close()
	if _, sum := occurrences(t, c2); sum != 0 {
		t.Fatalf("after the restart, before any write: %v, want 0", sum)
	}
	up := created.DeepCopy()
	up.Count = 4
	up.ResourceVersion = ""
	if _, err := st.Update(ctx, up, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if by, sum := occurrences(t, c2); sum != 1 || by["a"] != 1 {
		t.Fatalf("after the restart and an update 3 -> 4: %v, want 1", by)
	}
}

// scraper reads the counter as Prometheus' increase() does over the
// whole run: a series' growth between scrapes, and the whole value of a
// series that is new, came back after it vanished, or went down (a
// counter reset).
type scraper struct {
	prev     map[string]float64
	total    float64
	overflow float64 // the overflow series' value at the last scrape
}

// scrape gathers c once; it returns the label sets held and the
// expiries so far.
func (s *scraper) scrape(t *testing.T, c *eventmetrics.Counter) (sets, expired float64) {
	t.Helper()
	cur := metricstest.Samples(t, c, eventmetrics.OccurrencesName)
	for k, v := range cur {
		if strings.Contains(k, eventmetrics.LabelNamespace+"="+eventmetrics.OverflowValue) {
			s.overflow = v
		}
		if p, ok := s.prev[k]; ok && v >= p {
			s.total += v - p
		} else {
			s.total += v
		}
	}
	s.prev = cur
	return metricstest.Samples(t, c, eventmetrics.LabelSetsName)[""], metricstest.Samples(t, c, eventmetrics.LabelSetsExpiredName)[""]
}

// TestIdleExpiryExact: Pods churn through a store on a fake clock, each
// backing off for an hour, more of them than the counter's maximum of
// label sets (each with its name). Idle label sets are deleted and their
// places reused, so nothing overflows, and what a Prometheus reading the
// scrapes as increase() does adds up to exactly the occurrences the
// stored events hold, a Pod whose label set was deleted and that backs
// off again included.
func TestIdleExpiryExact(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	c, err := eventmetrics.New(&eventmetrics.Configuration{MaxLabelSets: 4, MaxNamedLabelSets: 4, IdleExpiry: "1h"}, clk)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), Logger: quiet, NoSync: true, Written: c.Observe})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored := map[string]*corev1.Event{}
	backOff := func(p string, count int32) {
		t.Helper()
		ev := stored[p]
		if ev == nil {
			ev = &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: p + ".backoff"}, Type: corev1.EventTypeWarning,
				Reason: "BackOff", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: p}, Count: count,
				Source: corev1.EventSource{Component: "kubelet"}}
			if ev, err = st.Create(ctx, ev, storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		} else {
			ev = ev.DeepCopy()
			ev.Count += count
			if ev, err = st.Update(ctx, ev, storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		stored[p] = ev
	}
	var s scraper
	const rounds = 12
	for r := range rounds {
		clk.SetTime(clk.Now().Add(30 * time.Minute))
		backOff(fmt.Sprintf("web-%d", r), 2)
		if r > 0 {
			backOff(fmt.Sprintf("web-%d", r-1), 3)
		}
		if r == 9 {
			backOff("web-1", 4) // its label set was deleted long ago: from 0
		}
		sets, _ := s.scrape(t, c)
		if sets > 4 {
			t.Fatalf("round %d: %v label sets, past the maximum of 4", r, sets)
		}
	}
	_, expired := s.scrape(t, c)
	want := 0.0
	for _, ev := range stored {
		want += float64(eventapi.Occurrences(ev))
	}
	if s.total != want {
		t.Errorf("increase over the scrapes %v, want the %v occurrences stored", s.total, want)
	}
	if s.overflow != 0 {
		t.Errorf("overflow %v, want 0: idle label sets should have made room", s.overflow)
	}
	// Each Pod's label set grew for the last time one round after its
	// first: deleted two rounds (an hour) later, but for the last ones
	// and web-1 twice.
	if expired != rounds-3+1 {
		t.Errorf("%v label sets expired, want %d", expired, rounds-3+1)
	}
}

// live returns the live series gauge by reason.
func live(t *testing.T, l *eventmetrics.LiveSeries) map[string]float64 {
	t.Helper()
	return metricstest.Samples(t, l, eventmetrics.LiveSeriesName, eventmetrics.LabelReason)
}

// TestLiveSeriesExact: eventsd_event_series_live through a real
// pebblestore, the store's TTLs and the gauge on one fake clock: a series
// counts from its write while its last observation is under 6 minutes
// old, an extension keeps it, a late write of a finished series (the
// recorder's final patch) does not revive it, events without a series
// and series observed long ago never count, a lastObservedTime in the
// future counts from the write; a TTL deletion of a finished series
// changes nothing, and one of a live series (a TTL under 6 minutes) is
// not seen: it counts until its window ends.
func TestLiveSeriesExact(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	l, err := eventmetrics.NewLiveSeries(nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), Logger: quiet, NoSync: true, Clock: clk,
		DefaultTTL: 10 * time.Minute, Written: l.Observe})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := clk.Now()
	at := func(d time.Duration) { clk.SetTime(t0.Add(d)) }
	series := func(name, reason string, count int32, observed time.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.EventTypeWarning, Reason: reason,
			InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name},
			ReportingController: "kubelet", ReportingInstance: "node-1", Action: "Restart",
			EventTime: metav1.NewMicroTime(t0), Series: &corev1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(observed)}}
	}
	write := func(ev *corev1.Event, ttl time.Duration) {
		t.Helper()
		if _, err := st.Update(ctx, ev, storage.WriteOptions{CreateIfMissing: true, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want map[string]float64) {
		t.Helper()
		if got := live(t, l); !maps.Equal(got, want) {
			t.Errorf("%s: live series %v, want %v", when, got, want)
		}
	}

	write(series("a", "BackOff", 2, t0), 0)                          // started
	write(series("old", "Unhealthy", 9, t0.Add(-10*time.Minute)), 0) // observed 10 minutes ago: finished
	write(series("future", "FailedMount", 2, t0.Add(time.Hour)), 0)  // a recorder's clock ahead: from the write
	write(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "legacy"}, Reason: "BackOff", Count: 40,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "legacy"}}, 0) // no series
	check("started", map[string]float64{"BackOff": 1, "FailedMount": 1})

	at(5 * time.Minute)
	write(series("a", "BackOff", 3, t0.Add(5*time.Minute)), 0) // extended to 11m
	check("extended", map[string]float64{"BackOff": 1, "FailedMount": 1})
	at(6*time.Minute - time.Nanosecond)
	check("just before 6m", map[string]float64{"BackOff": 1, "FailedMount": 1})
	at(6 * time.Minute)
	check("at 6m", map[string]float64{"BackOff": 1})
	at(11*time.Minute - time.Nanosecond)
	check("just before 11m", map[string]float64{"BackOff": 1})
	at(11 * time.Minute)
	check("at 11m", map[string]float64{})
	at(12 * time.Minute)
	write(series("a", "BackOff", 4, t0.Add(5*time.Minute)), 0) // the final patch, 7 minutes late
	check("finished, patched", map[string]float64{})

	// A short TTL deletes a live series; the gauge does not see it.
	write(series("short", "BackOff", 2, t0.Add(12*time.Minute)), 2*time.Minute)
	check("short TTL", map[string]float64{"BackOff": 1})
	expireBy := func(d time.Duration, name string) {
		t.Helper()
		clk.SetTime(t0.Add(d)) // the store's expiry ticks on the clock
		for i := 0; ; i++ {
			if _, err := st.Get(ctx, "ns", name); errors.Is(err, storage.ErrNotFound) {
				return
			}
			if i == 500 {
				t.Fatalf("%s not deleted by its TTL at %v", name, d)
			}
			clk.Step(time.Millisecond)
			time.Sleep(10 * time.Millisecond)
		}
	}
	expireBy(15*time.Minute, "short")
	check("short deleted by TTL", map[string]float64{"BackOff": 1})
	at(18 * time.Minute)
	check("short's window over", map[string]float64{})

	// A's TTL (10 minutes after its last write, at 12m) deletes a
	// finished series: nothing changes.
	expireBy(23*time.Minute, "a")
	check("a deleted by TTL", map[string]float64{})
}
