package demo_test

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/demo"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// serve runs an eventsd server over a new pebble store on loopback for
// the test and returns a client of it.
func serve(t *testing.T) kubernetes.Interface {
	t.Helper()
	store, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, cs := servertest.Serve(t, server.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	return cs
}

// start runs the demo against cs on a fake clock until the test ends,
// once its story is written.
func start(t *testing.T, cs kubernetes.Interface) *clocktesting.FakeClock {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- demo.Run(ctx, demo.Options{Client: cs, Clock: fc, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// The story is written before the tickers start.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("Run ended before the story went live: %v", err)
		default:
		}
		return fc.HasWaiters(), nil
	}); err != nil {
		t.Fatal("the demo did not start its live part within 30 s")
	}
	return fc
}

// legacyEvents are the core/v1 events of ns.
func legacyEvents(t *testing.T, cs kubernetes.Interface, ns string) []corev1.Event {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// reasonsOf lists the reasons of the events about kind/name, sorted.
func reasonsOf(evs []corev1.Event, kind, name string) []string {
	var rs []string
	for _, e := range evs {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			rs = append(rs, e.Reason)
		}
	}
	sort.Strings(rs)
	return rs
}

// TestStory writes the story through eventsd's API and checks that each
// of its threads is there, in the last half hour, written as the
// component that stands for it writes.
func TestStory(t *testing.T) {
	cs := serve(t)
	fc := start(t, cs)
	now := fc.Now()

	all := map[string][]corev1.Event{}
	for _, ns := range []string{demo.Namespace, demo.BatchNamespace, metav1.NamespaceDefault} {
		all[ns] = legacyEvents(t, cs, ns)
		for _, e := range all[ns] {
			// Read through core/v1, events.k8s.io/v1 events show their
			// eventTime and series' last observed time.
			first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
			if first.IsZero() {
				first = e.EventTime.Time
				last = first
				if e.Series != nil {
					last = e.Series.LastObservedTime.Time
				}
			}
			if first.Before(now.Add(-31*time.Minute)) || last.After(now) || last.Before(first) {
				t.Errorf("%s/%s (%s) spans %v to %v, want within the half hour before %v", ns, e.Name, e.Reason, first, last, now)
			}
		}
	}

	shop := all[demo.Namespace]
	for _, c := range []struct{ kind, name, want string }{
		{"Deployment", demo.Deployment, "ScalingReplicaSet ScalingReplicaSet"},
		{"ReplicaSet", demo.NewReplicaSet, "SuccessfulCreate"},
		{"Pod", demo.CrashingPod, "BackOff Created Created Pulled Pulled Pulling Scheduled Started Started"},
		{"Pod", demo.OOMPod, "Created Created Pulled Pulled Pulling Scheduled Started Started"},
	} {
		if got := strings.Join(reasonsOf(shop, c.kind, c.name), " "); got != c.want {
			t.Errorf("%s %s/%s: reasons %q, want %q", c.kind, demo.Namespace, c.name, got, c.want)
		}
	}
	if got := strings.Join(reasonsOf(all[metav1.NamespaceDefault], "Node", demo.Node2), " "); got != "NodeNotReady NodeReady" {
		t.Errorf("Node %s: reasons %q, want NotReady then Ready", demo.Node2, got)
	}
	if got := strings.Join(reasonsOf(all[metav1.NamespaceDefault], "Node", demo.Node1), " "); got != "OOMKilling" {
		t.Errorf("Node %s: reasons %q, want the OOM kill", demo.Node1, got)
	}
	if got := strings.Join(reasonsOf(all[demo.BatchNamespace], "Pod", demo.PendingPod), " "); got != "Created FailedScheduling Pulled Pulling Scheduled Started" {
		t.Errorf("Pod %s/%s: reasons %q", demo.BatchNamespace, demo.PendingPod, got)
	}

	// The scheduler writes through events.k8s.io/v1, its failures as a
	// series.
	sched, err := cs.EventsV1().Events(demo.BatchNamespace).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sched.Items) != 1 || sched.Items[0].Series == nil || sched.Items[0].Series.Count != 5 || sched.Items[0].ReportingController != "default-scheduler" {
		t.Errorf("FailedScheduling through events.k8s.io/v1: %+v, want one series of 5 by default-scheduler", sched.Items)
	}

	// The crashloop goes on: back-off counted at each of its ticks, the
	// container restarted at each of the restart's.
	backOff := func() corev1.Event {
		for _, e := range legacyEvents(t, cs, demo.Namespace) {
			if e.Reason == "BackOff" {
				return e
			}
		}
		t.Fatal("no BackOff event")
		return corev1.Event{}
	}
	b := backOff()
	if b.Count != 41 || b.Type != corev1.EventTypeWarning || b.Source.Host != demo.Node2 {
		t.Fatalf("BackOff at the start: count %d, type %s, host %s; want 41 Warnings from %s's kubelet", b.Count, b.Type, b.Source.Host, demo.Node2)
	}
	waitCount := func(reason string, count int32, at time.Time) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			for _, e := range legacyEvents(t, cs, demo.Namespace) {
				if e.InvolvedObject.Name == demo.CrashingPod && e.Reason == reason && e.Count == count && e.LastTimestamp.Time.Equal(at) {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("%s of %s did not reach count %d at %v", reason, demo.CrashingPod, count, at)
		}
	}
	fc.Step(demo.DefaultBackOffInterval)
	waitCount("BackOff", 42, fc.Now())
	fc.Step(demo.DefaultBackOffInterval)
	waitCount("BackOff", 43, fc.Now())
	fc.SetTime(now.Add(demo.DefaultRestartInterval))
	for _, r := range []string{"Pulled", "Created", "Started"} {
		waitCount(r, 6, fc.Now())
	}
	waitCount("BackOff", 44, fc.Now())
}

// TestRunWithoutClient: Run says what is missing.
func TestRunWithoutClient(t *testing.T) {
	if err := demo.Run(context.Background(), demo.Options{}); err == nil || !strings.Contains(err.Error(), "no client") {
		t.Errorf("Run without a client: %v", err)
	}
}
