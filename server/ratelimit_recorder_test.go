package server_test

import (
	"context"
	"fmt"
	"github.com/kubevents/kubevents/internal/metricstest"
	"testing"
	"time"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/record"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// The sinks below write through client-go's REST clients once per call:
// client-go's own retry of a 429 (which sleeps the Retry-After on the real
// clock) is turned off, so that what is tested is the recorders' backoff,
// on the test's fake clock.

// coreSink is client-go's core/v1 EventSink without client-go's retry.
type coreSink struct {
	cs  kubernetes.Interface
	ctx context.Context
}

func (s coreSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.cs.CoreV1().RESTClient().Post().Namespace(ev.Namespace).Resource("events").Body(ev).MaxRetries(0).Do(s.ctx).Into(out)
	return out, err
}

func (s coreSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.cs.CoreV1().RESTClient().Put().Namespace(ev.Namespace).Resource("events").Name(ev.Name).Body(ev).MaxRetries(0).Do(s.ctx).Into(out)
	return out, err
}

func (s coreSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.cs.CoreV1().RESTClient().Patch(types.StrategicMergePatchType).Namespace(ev.Namespace).Resource("events").Name(ev.Name).
		Body(data).MaxRetries(0).Do(s.ctx).Into(out)
	return out, err
}

// eventsSink is client-go's events.k8s.io/v1 EventSink without client-go's
// retry.
type eventsSink struct{ cs kubernetes.Interface }

func (s eventsSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := s.cs.EventsV1().RESTClient().Post().Namespace(ev.Namespace).Resource("events").Body(ev).MaxRetries(0).Do(ctx).Into(out)
	return out, err
}

func (s eventsSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := s.cs.EventsV1().RESTClient().Put().Namespace(ev.Namespace).Resource("events").Name(ev.Name).Body(ev).MaxRetries(0).Do(ctx).Into(out)
	return out, err
}

func (s eventsSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out := &eventsv1.Event{}
	err := s.cs.EventsV1().RESTClient().Patch(types.StrategicMergePatchType).Namespace(ev.Namespace).Resource("events").Name(ev.Name).
		Body(data).MaxRetries(0).Do(ctx).Into(out)
	return out, err
}

// stormLimits are tight: three writes at once in the namespace, then one a
// second, and one a second per source and object.
var stormLimits = []eventratelimit.Limit{
	{Type: eventratelimit.NamespaceLimitType, QPS: 1, Burst: 3},
	{Type: eventratelimit.SourceAndObjectLimitType, QPS: 1, Burst: 1},
}

// A storm is stormBackOffs BackOff events about each of stormPods pods,
// with stormUnhealthies Unhealthy events (a new reason) half way through.
const (
	stormPods        = 8
	stormBackOffs    = 12
	stormUnhealthies = 6
)

// storm emits a storm through emit.
func storm(emit func(pod *corev1.Pod, reason string)) {
	for i := range stormBackOffs {
		for p := range stormPods {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", p), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-web-%d", p))}}
			emit(pod, "BackOff")
			if i == stormBackOffs/2 {
				for range stormUnhealthies {
					emit(pod, "Unhealthy")
				}
			}
		}
	}
}

// stormCounted reports whether counts, by "pod/reason", are the storm's.
func stormCounted(counts map[string]int32) (bool, string) {
	for p := range stormPods {
		if counts[fmt.Sprintf("web-%d/BackOff", p)] != stormBackOffs || counts[fmt.Sprintf("web-%d/Unhealthy", p)] != stormUnhealthies {
			return false, fmt.Sprint(counts)
		}
	}
	return true, ""
}

// shutdownDriven runs shutdown while stepping the fake clock, on which the
// recorders time their shutdown.
func shutdownDriven(e *rateEnv, shutdown func()) {
	done := make(chan struct{})
	go func() { shutdown(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-time.After(2 * time.Millisecond):
			e.clock.Step(100 * time.Millisecond)
		}
	}
}

// driveUntil waits for the limit to refuse a write (before the fake clock
// moves, the recorder's first writes meet full buckets), then steps the
// fake clock a second at a time, giving the recorder and the server a
// moment between steps, until done holds.
func driveUntil(t *testing.T, e *rateEnv, what string, done func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for metricstest.Sum(t, e.reg, "eventsd_event_rate_limit_refusals_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the storm was never refused: the limit did not bite")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; ; i++ {
		if i%20 == 0 {
			if ok, state := done(); ok {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last state: %s", what, state)
			}
		}
		e.clock.Step(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRateLimitRecordStorm: a storm through the core/v1 recorder under a
// tight SourceAndObject limit is refused many times, yet the recorder backs
// off as the Retry-After says and every occurrence ends up counted; a new
// reason in the middle of the storm is stored too.
func TestRateLimitRecordStorm(t *testing.T) {
	e := newRateEnv(t, nil, stormLimits...)
	b := record.NewBroadcaster(record.WithClock(e.clock), record.WithMetrics(prometheus.NewRegistry()))
	defer shutdownDriven(e, b.Shutdown)
	b.StartRecordingToSink(coreSink{cs: e.cs, ctx: e.ctx})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
	storm(func(pod *corev1.Pod, reason string) {
		rec.Event(pod, corev1.EventTypeWarning, reason, reason+" happened")
	})
	driveUntil(t, e, "every occurrence counted", func() (bool, string) {
		l, err := e.cs.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		counts := map[string]int32{}
		for _, ev := range l.Items {
			counts[ev.InvolvedObject.Name+"/"+ev.Reason] += ev.Count
		}
		return stormCounted(counts)
	})
}

// TestRateLimitEventsStorm: the same through the events.k8s.io/v1 recorder,
// whose series count ends up equal to the occurrences.
func TestRateLimitEventsStorm(t *testing.T) {
	e := newRateEnv(t, nil, stormLimits...)
	b := events.NewBroadcaster(eventsSink{cs: e.cs}, events.WithClock(e.clock), events.WithMetrics(prometheus.NewRegistry()),
		events.WithHostname("node-1"))
	defer shutdownDriven(e, b.Shutdown)
	if err := b.StartRecordingToSinkWithContext(e.ctx); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(scheme.Scheme, "kubelet")
	storm(func(pod *corev1.Pod, reason string) {
		rec.Eventf(pod, nil, corev1.EventTypeWarning, reason, "Act", reason+" happened")
	})
	driveUntil(t, e, "every occurrence counted", func() (bool, string) {
		l, err := e.cs.EventsV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		counts := map[string]int32{}
		for _, ev := range l.Items {
			n := int32(1)
			if ev.Series != nil {
				n = ev.Series.Count
			}
			counts[ev.Regarding.Name+"/"+ev.Reason] += n
		}
		return stormCounted(counts)
	})
	if n := metricstest.Sum(t, e.reg, "eventsd_event_rate_limit_refusals_total"); n == 0 {
		mfs, _ := e.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "eventsd_requests_total" {
				t.Log(mf.String())
			}
		}
		t.Error("the storm was never refused: the limit did not bite")
	}
}
