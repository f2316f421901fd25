package eventfilter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/eventfilter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func event() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "shop", Name: "web-1.abc", Labels: map[string]string{"team": "payments"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-1"},
		Reason:         "OOMKilling",
		Message:        "Memory cgroup out of memory: Killed process 1234 (java)",
		Type:           corev1.EventTypeWarning,
		Count:          4,
		LastTimestamp:  metav1.NewTime(t0),
		EventTime:      metav1.NewMicroTime(t0.Add(-time.Minute)),
		Series:         &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t0)},
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		version eventapi.Version
		expr    string
		want    bool
	}{
		{eventapi.CoreV1, `object.message.contains("out of memory")`, true},
		{eventapi.CoreV1, `object.message.matches("Killed process [0-9]+ \\(java\\)")`, true},
		{eventapi.CoreV1, `object.message.matches("^Killed")`, false},
		{eventapi.CoreV1, `object.involvedObject.kind == "Pod" && object.count > 3`, true},
		{eventapi.CoreV1, `object.count > 4`, false},
		{eventapi.CoreV1, `object.lastTimestamp > timestamp("2026-03-01T11:00:00Z")`, true},
		{eventapi.CoreV1, `timestamp("2026-03-01T12:30:00Z") - object.lastTimestamp < duration("1h")`, true},
		{eventapi.CoreV1, `object.lastTimestamp.getHours() == 12`, true},
		{eventapi.CoreV1, `object.metadata.labels["team"] == "payments"`, true},
		{eventapi.CoreV1, `"team" in object.metadata.labels && object.metadata.namespace == "shop"`, true},
		{eventapi.CoreV1, `object.reason.lowerAscii().startsWith("oom")`, true},
		// A field the event lacks is an evaluation error: not selected,
		// as a field selector does not select it.
		{eventapi.CoreV1, `object.related.name == "x"`, false},
		{eventapi.EventsV1, `object.note.contains("out of memory") && object.regarding.name == "web-1"`, true},
		{eventapi.EventsV1, `object.series.count == 3 && object.series.lastObservedTime == timestamp("2026-03-01T12:00:00Z")`, true},
		{eventapi.EventsV1, `object.eventTime < object.series.lastObservedTime`, true},
		{eventapi.EventsV1, `object.deprecatedCount == 4`, true},
		{eventapi.KubeventsV1, `object.regarding.kind == "Pod" && has(object.series)`, true},
	} {
		f, err := eventfilter.Compile(c.version, c.expr, eventfilter.Limits{})
		if err != nil {
			t.Fatalf("%s %s: %v", c.version, c.expr, err)
		}
		got, err := f.Matches(event())
		if err != nil || got != c.want {
			t.Errorf("%s %s: got %v, %v; want %v", c.version, c.expr, got, err, c.want)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	nested := strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300)
	for _, c := range []struct {
		version eventapi.Version
		expr    string
		msg     string
	}{
		{eventapi.CoreV1, `object.message.`, "Syntax error"},
		{eventapi.CoreV1, `object.message`, "must evaluate to a bool, not string"},
		{eventapi.CoreV1, `object.count + 1`, "must evaluate to a bool, not int"},
		// Each group has its own shape: core/v1 has no note, events.k8s.io/v1 no message.
		{eventapi.CoreV1, `object.note == "x"`, "undefined field 'note'"},
		{eventapi.EventsV1, `object.message == "x"`, "undefined field 'message'"},
		{eventapi.KubeventsV1, `object.involvedObject.name == "x"`, "undefined field 'involvedObject'"},
		{eventapi.CoreV1, `object.count == "4"`, "no matching overload"},
		// Hostile expressions: a comprehension over a long string, one
		// nested in another, deep nesting, a huge literal.
		{eventapi.CoreV1, `object.message.split("").exists(c, object.message.contains(c + c))`, "estimated cost on one event"},
		{eventapi.CoreV1, `object.message.split(" ").all(a, object.message.split(" ").all(b, a != b || a == b))`, "estimated cost on one event"},
		{eventapi.CoreV1, nested, "recursion limit exceeded"},
		{eventapi.CoreV1, `object.message == "` + strings.Repeat("x", 5000) + `"`, "over the limit of 4096"},
	} {
		_, err := eventfilter.Compile(c.version, c.expr, eventfilter.Limits{})
		if !errors.Is(err, eventfilter.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %.60s: got %v, want ErrInvalid saying %q", c.version, c.expr, err, c.msg)
		}
	}
}

// TestEstimateWithinLimit: the estimate is on the worst case (strings of
// the largest request) and the limit is the one kube-apiserver puts on a
// CRD rule's estimate: a regex on the message passes, and the refusal
// gives the estimate and the limit.
func TestEstimateWithinLimit(t *testing.T) {
	f, err := eventfilter.Compile(eventapi.CoreV1, `object.message.matches("Back-off [0-9]+s restarting")`, eventfilter.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if f.EstimatedCost() <= eventfilter.DefaultPerEventCostLimit || f.EstimatedCost() > eventfilter.DefaultEstimatedCostLimit {
		t.Fatalf("estimate %d: want between the per-event and the estimated limits", f.EstimatedCost())
	}
	_, err = eventfilter.Compile(eventapi.CoreV1, `object.message.matches("Back-off [0-9]+s restarting")`, eventfilter.Limits{EstimatedCostLimit: 1000})
	if err == nil || !strings.Contains(err.Error(), "over the limit of 1000") {
		t.Fatalf("got %v, want a refusal naming the limit", err)
	}
}

// TestActualCostLimit: an expression whose cost grows with the event is
// cut on an event past the per-event limit, naming it.
func TestActualCostLimit(t *testing.T) {
	f, err := eventfilter.Compile(eventapi.CoreV1, `object.message.contains("zzz")`, eventfilter.Limits{PerEventCostLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ev := event()
	if ok, err := f.Matches(ev); ok || err != nil {
		t.Fatalf("short message: %v, %v", ok, err)
	}
	ev.Message = strings.Repeat("a", 10000)
	_, err = f.Matches(ev)
	if !errors.Is(err, eventfilter.ErrCostExceeded) || !strings.Contains(err.Error(), "shop/web-1.abc") {
		t.Fatalf("long message: got %v, want ErrCostExceeded naming the event", err)
	}
}

// TestRunBudget: a run sums the cost of its evaluations; past the
// request's budget it fails once, answers false from then on, closes
// Done and cancels the context it was bound to.
func TestRunBudget(t *testing.T) {
	f, err := eventfilter.Compile(eventapi.CoreV1, `object.count > 0`, eventfilter.Limits{RequestCostBudget: 100})
	if err != nil {
		t.Fatal(err)
	}
	run := f.NewRun()
	ctx, cancel := run.Bind(context.Background())
	defer cancel()
	ev := event()
	n := 0
	for run.Matches(ev) {
		n++
		if n > 1000 {
			t.Fatal("the budget never ran out")
		}
	}
	if n == 0 || run.Spent() <= 100 {
		t.Fatalf("ran out after %d events, %d spent", n, run.Spent())
	}
	if err := run.Err(); !errors.Is(err, eventfilter.ErrCostExceeded) || !strings.Contains(err.Error(), "budget of 100") {
		t.Fatalf("run error %v", err)
	}
	select {
	case <-run.Done():
	default:
		t.Fatal("Done not closed")
	}
	if !errors.Is(context.Cause(ctx), eventfilter.ErrCostExceeded) {
		t.Fatalf("bound context: %v", context.Cause(ctx))
	}
	if run.Matches(ev) {
		t.Fatal("a failed run matched")
	}

	// Unbudgeted (a watch): only the per-event limit holds.
	run = f.NewRun()
	run.Unbudgeted()
	for range 1000 {
		if !run.Matches(ev) {
			t.Fatalf("unbudgeted run failed: %v", run.Err())
		}
	}
}

// TestRunCancelled: a run bound to a cancelled context fails, and says
// why, without counting as a cost failure.
func TestRunCancelled(t *testing.T) {
	f, err := eventfilter.Compile(eventapi.CoreV1, `object.message.contains("java")`, eventfilter.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	parent, cancelParent := context.WithCancel(context.Background())
	run := f.NewRun()
	_, cancel := run.Bind(parent)
	defer cancel()
	cancelParent()
	if run.Matches(event()) {
		t.Fatal("matched under a cancelled context")
	}
	if err := run.Err(); err == nil || errors.Is(err, eventfilter.ErrCostExceeded) {
		t.Fatalf("run error %v, want the context's", err)
	}
}
