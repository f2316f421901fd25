package nodeagent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// scriptedSink answers each write with the next error of errs (nil: it
// worked); with block set, it waits for the write's context instead.
type scriptedSink struct {
	errs  []error
	block bool
}

func (s *scriptedSink) next(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if s.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	if err != nil {
		return nil, err
	}
	return ev, nil
}

func (s *scriptedSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return s.next(ctx, ev)
}

func (s *scriptedSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return s.next(ctx, ev)
}

func (s *scriptedSink) Patch(ctx context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return s.next(ctx, ev)
}

func textLogger(buf *syncbuf.Buffer) *logr.Logger {
	l := logr.FromSlogHandler(slog.NewTextHandler(buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	return &l
}

// lines returns the log lines written since the last call.
func lines(buf *syncbuf.Buffer, seen *int) []string {
	all := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(all) == 1 && all[0] == "" {
		all = nil
	}
	out := all[*seen:]
	*seen = len(all)
	return out
}

// TestReportingSinkLogsFailuresAsTheyHappen: the first failed write is
// logged at once, the next ones once per interval with how many lines were
// held back, and the first write that works again says so; the errors that
// are part of the recorder's protocol are not failures.
func TestReportingSinkLogsFailuresAsTheyHappen(t *testing.T) {
	down := errors.New("connect: connection refused")
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	fake := &scriptedSink{errs: []error{
		down, down, unavailable, down, // four failures in one interval
		down,                                                                // after the interval
		nil,                                                                 // works again
		apierrors.NewAlreadyExists(gr, "e"), apierrors.NewNotFound(gr, "e"), // the recorder's business
		down,
	}}
	var buf syncbuf.Buffer
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	s := newReportingSink(fake, sinkConfig{Logger: textLogger(&buf), Clock: clk, LogInterval: 10 * time.Second})
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "crash.1"}, Reason: "BackOff"}
	ctx := context.Background()
	seen := 0

	if _, err := s.Create(ctx, ev); !errors.Is(err, down) {
		t.Fatalf("Create = %v, want the sink's error passed on", err)
	}
	got := lines(&buf, &seen)
	if len(got) != 1 || !strings.Contains(got[0], "level=ERROR") || !strings.Contains(got[0], "Writing an event to the API server failed") ||
		!strings.Contains(got[0], "connection refused") || !strings.Contains(got[0], "event=default/crash.1") ||
		!strings.Contains(got[0], "reason=BackOff") || !strings.Contains(got[0], "verb=create") {
		t.Fatalf("after the first failure: %q, want one error line naming the event and the error", got)
	}
	s.Patch(ctx, ev, nil)
	s.Create(ctx, ev)
	s.Update(ctx, ev)
	if got := lines(&buf, &seen); len(got) != 0 {
		t.Fatalf("within the interval: %q, want nothing", got)
	}
	clk.Step(10 * time.Second)
	s.Create(ctx, ev)
	got = lines(&buf, &seen)
	if len(got) != 1 || !strings.Contains(got[0], "suppressedSinceLastLog=3") || !strings.Contains(got[0], "failedWritesInARow=5") {
		t.Fatalf("after the interval: %q, want one line standing for the 3 held back", got)
	}
	if _, err := s.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	got = lines(&buf, &seen)
	if len(got) != 1 || !strings.Contains(got[0], "level=INFO") || !strings.Contains(got[0], "works again") || !strings.Contains(got[0], "failedWrites=5") {
		t.Fatalf("after recovering: %q", got)
	}
	if _, err := s.Create(ctx, ev); !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := s.Patch(ctx, ev, nil); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if got := lines(&buf, &seen); len(got) != 0 {
		t.Fatalf("AlreadyExists and NotFound: %q, want nothing", got)
	}
	clk.Step(10 * time.Second)
	s.Create(ctx, ev)
	got = lines(&buf, &seen)
	if len(got) != 1 || !strings.Contains(got[0], "failedWritesInARow=1") || strings.Contains(got[0], "suppressed") {
		t.Fatalf("a new failure: %q", got)
	}
}

// TestReportingSinkWriteTimeout: a write the server never answers fails
// after the write timeout, and is logged.
func TestReportingSinkWriteTimeout(t *testing.T) {
	var buf syncbuf.Buffer
	s := newReportingSink(&scriptedSink{block: true}, sinkConfig{Logger: textLogger(&buf), WriteTimeout: 50 * time.Millisecond})
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}}
	_, err := s.Create(context.Background(), ev)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create = %v, want the write timed out", err)
	}
	if !strings.Contains(buf.String(), "context deadline exceeded") {
		t.Errorf("log: %q", buf.String())
	}
}

// TestReportingSinkResumes: the agent's sink lists, so a recorder over it
// continues the series an earlier agent on the node left unknown at its
// Shutdown instead of starting a second event for the same key.
func TestReportingSinkResumes(t *testing.T) {
	now := time.Now()
	earlier := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "crash.1", Namespace: "default", Annotations: map[string]string{events.SeriesStateAnnotation: events.SeriesUnknown}},
		EventTime:           metav1.NewMicroTime(now.Add(-time.Minute)),
		Series:              &eventsv1.EventSeries{Count: 5, LastObservedTime: metav1.NewMicroTime(now.Add(-30 * time.Second))},
		ReportingController: ReportingController, ReportingInstance: ReportingController + "-node-1",
		Action: "StartContainer", Reason: "Started", Type: corev1.EventTypeNormal, Note: "Started container app",
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "crash", UID: "uid-crash", FieldPath: "spec.containers{app}"},
	}
	cs := fake.NewClientset(earlier)
	sink := newReportingSink(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, sinkConfig{})
	b := events.NewBroadcaster(sink, events.WithHostname("node-1"), events.WithClock(clocktesting.NewFakeClock(now)))
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(scheme.Scheme, ReportingController)
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "crash", UID: "uid-crash", FieldPath: "spec.containers{app}"}
	rec.Eventf(ref, nil, corev1.EventTypeNormal, "Started", "StartContainer", "Started container app")
	b.Shutdown()
	list, err := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d events stored, want the earlier one continued: %+v", len(list.Items), list.Items)
	}
	if got := list.Items[0].Series; got == nil || got.Count != 6 {
		t.Errorf("series %+v, want the earlier count 5 plus this occurrence", got)
	}
}
