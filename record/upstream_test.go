package record

// Behaviour from client-go's tools/record tests (recorder.md §4), written
// against this package. Where this package deliberately differs (the
// default spam key includes the reason; 429 and 5xx are retried), the test
// says so.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
)

func testEvent(reason, message string, ref corev1.ObjectReference) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: ref.Name + "." + reason, Namespace: ref.Namespace},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        message,
		Source:         corev1.EventSource{Component: "eventTest"},
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

func podRef(name, ns string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: ns, UID: "C934D34AFB20242", APIVersion: "version"}
}

func TestEventAggregatorByReasonFunc(t *testing.T) {
	e1 := testEvent("end-of-world", "it was fun", podRef("pod1", "other"))
	e2 := testEvent("end-of-world", "it was awful", podRef("pod1", "other"))
	e3 := testEvent("nevermind", "it was a bug", podRef("pod1", "other"))
	a1, l1 := EventAggregatorByReasonFunc(&e1)
	a2, l2 := EventAggregatorByReasonFunc(&e2)
	a3, _ := EventAggregatorByReasonFunc(&e3)
	if a1 != a2 || l1 == l2 || a1 == a3 {
		t.Errorf("keys %q %q %q, locals %q %q", a1, a2, a3, l1, l2)
	}
	// The struct keys the correlator uses by default agree.
	if aggregateKey(&e1) != aggregateKey(&e2) || aggregateKey(&e1) == aggregateKey(&e3) {
		t.Error("internal aggregate keys disagree with EventAggregatorByReasonFunc")
	}
	// Unlike client-go's, the string keys are unambiguous.
	x := testEvent("r", "m", podRef("p", "ns"))
	y := x
	x.Source, y.Source = corev1.EventSource{Component: "ab", Host: "c"}, corev1.EventSource{Component: "a", Host: "bc"}
	if ax, _ := EventAggregatorByReasonFunc(&x); ax == func() string { a, _ := EventAggregatorByReasonFunc(&y); return a }() {
		t.Error("ambiguous aggregate key")
	}
	if SpamKeyByReason(&x) == SpamKeyByReason(&y) || SpamKeyByObject(&x) == SpamKeyByObject(&y) {
		t.Error("ambiguous spam key")
	}
}

func TestEventAggregatorByReasonMessageFunc(t *testing.T) {
	e := testEvent("end-of-world", "it was fun", podRef("pod1", "other"))
	if got := EventAggregatorByReasonMessageFunc(&e); got != "(combined from similar events): it was fun" {
		t.Errorf("got %q", got)
	}
}

// TestEventCorrelator is client-go's table, each event emitted interval
// after the previous one.
func TestEventCorrelator(t *testing.T) {
	first := testEvent("first", "i am first", podRef("my-pod", "my-ns"))
	duplicate := testEvent("duplicate", "me again", podRef("my-pod", "my-ns"))
	unique := testEvent("unique", "snowflake", podRef("my-pod", "my-ns"))
	similar := testEvent("similar", "similar message", podRef("my-pod", "my-ns"))
	similar.InvolvedObject.FieldPath = "spec.containers{container1}"
	otherContainer := similar
	otherContainer.InvolvedObject.FieldPath = "spec.containers{container2}"
	repeat := func(n int, e corev1.Event) []corev1.Event {
		out := make([]corev1.Event, n)
		for i := range out {
			out[i] = e
		}
		return out
	}
	uniques := func(n int) []corev1.Event {
		out := make([]corev1.Event, n)
		for i := range out {
			out[i] = testEvent(fmt.Sprintf("reason-%d", i), "message", podRef(fmt.Sprintf("pod-%d", i), "my-ns"))
		}
		return out
	}
	similars := func(n int) []corev1.Event {
		out := make([]corev1.Event, n)
		for i := range out {
			out[i] = similar
			out[i].Message = fmt.Sprintf("%s%d", similar.Message, i)
		}
		return out
	}
	cases := map[string]struct {
		previous  []corev1.Event
		next      corev1.Event
		interval  time.Duration
		wantSkip  bool
		wantCount int32
		wantMsg   string
		wantAgg   bool // folded into a combined event
	}{
		"create-a-single-event":                                                             {nil, first, 5 * time.Second, false, 1, first.Message, false},
		"the-same-event-should-just-count":                                                  {repeat(1, duplicate), duplicate, 5 * time.Second, false, 2, duplicate.Message, false},
		"the-same-event-should-just-count-even-if-more-than-aggregate":                      {repeat(10, duplicate), duplicate, 30 * time.Second, false, 11, duplicate.Message, false},
		"the-same-event-is-spam-if-happens-too-frequently":                                  {repeat(26, duplicate), duplicate, time.Second, true, 0, "", false},
		"create-many-unique-events":                                                         {uniques(30), unique, 5 * time.Second, false, 1, unique.Message, false},
		"similar-events-should-aggregate-event":                                             {similars(9), similar, 5 * time.Second, false, 1, AggregatePrefix + similar.Message, true},
		"similar-events-many-times-should-count-the-aggregate":                              {similars(10), similar, 5 * time.Second, false, 2, AggregatePrefix + similar.Message, true},
		"events-from-different-containers-do-not-aggregate":                                 {repeat(1, otherContainer), similar, 5 * time.Second, false, 1, similar.Message, false},
		"similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate": {similars(9), similar, 601 * time.Second, false, 1, similar.Message, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCorrelator(CorrelatorOptions{}, nil, nil)
			now := t0
			individual := map[string]bool{} // names of events written as themselves
			play := func(e corev1.Event) correlation {
				now = now.Add(tc.interval)
				e.FirstTimestamp, e.LastTimestamp = metav1.NewTime(now), metav1.NewTime(now)
				e.Name = eventName(e.InvolvedObject.Name, now.UnixNano())
				r := c.correlate(&e)
				if !r.skip {
					c.written(r.entry, r.event.Count, r.event)
					if !r.aggregated {
						individual[r.event.Name] = true
					}
				}
				return r
			}
			for _, e := range tc.previous {
				play(e)
			}
			r := play(tc.next)
			if r.skip != tc.wantSkip {
				t.Fatalf("skip %v, want %v", r.skip, tc.wantSkip)
			}
			if tc.wantSkip {
				return
			}
			if r.event.Count != tc.wantCount || r.event.Message != tc.wantMsg {
				t.Errorf("count %d message %q, want %d %q", r.event.Count, r.event.Message, tc.wantCount, tc.wantMsg)
			}
			if r.aggregated != tc.wantAgg || (r.aggregated && individual[r.event.Name]) {
				t.Errorf("aggregated %v, want %v; name %q", r.aggregated, tc.wantAgg, r.event.Name)
			}
			if (r.event.Count > 1) != (r.patch != nil) {
				t.Errorf("patch %s for count %d", r.patch, r.event.Count)
			}
		})
	}
}

// TestEventSpamFilter: with burst 1, client-go's default key holds back a
// different reason about the same object; this package's default key (and
// client-go's custom key with the reason) does not; the same reason with a
// different message is held back by both.
func TestEventSpamFilter(t *testing.T) {
	original := testEvent("original", "i am first", podRef("my-pod", "my-ns"))
	otherReason := testEvent("duplicate", "me again", podRef("my-pod", "my-ns"))
	otherMessage := testEvent("original", "me again", podRef("my-pod", "my-ns"))
	cases := map[string]struct {
		key      EventSpamKeyFunc
		next     corev1.Event
		wantSkip bool
	}{
		"client-go default key: another reason is spam":      {SpamKeyByObject, otherReason, true},
		"default key (with reason): another reason is not":   {nil, otherReason, false},
		"default key: same reason, another message is spam":  {nil, otherMessage, true},
		"custom key with reason: another message is spam":    {SpamKeyByReason, otherMessage, true},
		"custom key with reason: another reason is not spam": {SpamKeyByReason, otherReason, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCorrelator(CorrelatorOptions{BurstSize: 1, SpamKeyFunc: tc.key}, nil, nil)
			a, b := original, tc.next
			a.LastTimestamp, b.LastTimestamp = metav1.NewTime(t0), metav1.NewTime(t0.Add(time.Second))
			if r := c.correlate(&a); r.skip {
				t.Fatal("first event skipped")
			}
			if r := c.correlate(&b); r.skip != tc.wantSkip {
				t.Errorf("skip %v, want %v", r.skip, tc.wantSkip)
			}
		})
	}
}

func TestBroadcasterShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancelCause(context.Background())
	b := NewBroadcaster(WithContext(ctx))
	b.StartStructuredLogging(0)
	cancel(errors.New("time to stop"))
	select {
	case <-b.Done():
	case <-time.After(waitLimit):
		t.Fatal("not shut down")
	}
}

func TestStartEventWatcherExitsOnDirectShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := NewBroadcaster(WithSleepDuration(0))
	b.StartStructuredLogging(0)
	b.StartLogging(t.Logf)
	b.StartEventWatcher(func(*corev1.Event) {})
	b.StartRecordingToSink(newFakeSink(b.clock))
	b.Shutdown()
}

func TestNonRacyShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.rec.Eventf(&corev1.ObjectReference{}, corev1.EventTypeNormal, "Started", "blah")
		}()
	}
	wg.Wait()
	e.b.Shutdown()
	// Concurrent emission and Shutdown: no panic, every call accounted.
	e2 := newEnv(t)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e2.rec.Eventf(pod("ns", "p"+strconv.Itoa(i), "u"), corev1.EventTypeNormal, "Started", "blah")
		}()
	}
	e2.b.Shutdown()
	wg.Wait()
	if got := counterValue(t, e2.b.metrics.Emitted); got != 100 {
		t.Errorf("emitted %v", got)
	}
	if w, d := e2.writes("create", "success"), e2.dropped("shutdown"); w+d != 100 {
		t.Errorf("%v written + %v dropped at shutdown, want 100", w, d)
	}
}

// TestEventf is client-go's table of creates and patches across fieldPaths
// and UIDs, with what StartLogging and StartStructuredLogging print.
func TestEventf(t *testing.T) {
	testPod := pod("baz", "foo", "bar")
	testPod2 := pod("baz", "foo", "differentUid")
	testRef, err := reference.GetPartialReference(scheme.Scheme, testPod, "spec.containers[2]")
	if err != nil {
		t.Fatal(err)
	}
	testRef2, err := reference.GetPartialReference(scheme.Scheme, testPod2, "spec.containers[3]")
	if err != nil {
		t.Fatal(err)
	}
	table := []struct {
		obj       runtime.Object
		reason    string
		wantCount int32
		wantLog   string
	}{
		{testRef, "Started", 1, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[2]"}): type: 'Normal' reason: 'Started' some verbose message: 1`},
		{testPod, "Killed", 1, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", ResourceVersion:"", FieldPath:""}): type: 'Normal' reason: 'Killed' some verbose message: 1`},
		{testRef, "Started", 2, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[2]"}): type: 'Normal' reason: 'Started' some verbose message: 1`},
		{testRef2, "Started", 1, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"differentUid", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[3]"}): type: 'Normal' reason: 'Started' some verbose message: 1`},
		{testRef, "Started", 3, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[2]"}): type: 'Normal' reason: 'Started' some verbose message: 1`},
		{testRef2, "Stopped", 1, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"differentUid", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[3]"}): type: 'Normal' reason: 'Stopped' some verbose message: 1`},
		{testRef2, "Stopped", 2, `Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"differentUid", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[3]"}): type: 'Normal' reason: 'Stopped' some verbose message: 1`},
	}
	e := newEnv(t)
	var mu sync.Mutex
	var printed []string
	e.b.StartLogging(func(format string, args ...interface{}) {
		mu.Lock()
		defer mu.Unlock()
		printed = append(printed, fmt.Sprintf(format, args...))
	})
	e.b.StartStructuredLogging(0)
	for i, row := range table {
		e.rec.Eventf(row.obj, corev1.EventTypeNormal, row.reason, "some verbose message: %v", 1)
		e.step(time.Millisecond)
		calls := e.sink.getCalls()
		if len(calls) != i+1 {
			t.Fatalf("row %d: %d calls", i, len(calls))
		}
		c := calls[i]
		if want := map[bool]string{true: "patch", false: "create"}[row.wantCount > 1]; c.verb != want || c.err != nil {
			t.Errorf("row %d: %s (%v), want %s", i, c.verb, c.err, want)
		}
		if c.event.Count != row.wantCount || c.event.Reason != row.reason || c.event.Message != "some verbose message: 1" {
			t.Errorf("row %d: count %d reason %s message %q", i, c.event.Count, c.event.Reason, c.event.Message)
		}
		mu.Lock()
		if len(printed) != i+1 || printed[i] != row.wantLog {
			t.Errorf("row %d: printed %q, want %q", i, printed[len(printed)-1], row.wantLog)
		}
		mu.Unlock()
	}
	structured := e.logs.find("Event occurred")
	if len(structured) != len(table) {
		t.Fatalf("%d structured lines", len(structured))
	}
	want := []any{"object", "baz/foo", "fieldPath", "spec.containers[2]", "kind", "Pod", "apiVersion", "v1",
		"type", "Normal", "reason", "Started", "message", "some verbose message: 1"}
	got := structured[0].kv
	if len(got) != len(want) {
		t.Fatalf("structured kv %v", got)
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("structured kv %v, want %v", got, want)
			break
		}
	}
}

// TestWriteEventError: which sink errors end the write after one attempt
// and which are retried to the attempt limit.
func TestWriteEventError(t *testing.T) {
	policy := WithRetryPolicy(RetryPolicy{MaxAttempts: 12, Initial: time.Second, Max: time.Second, Jitter: -1})
	cases := map[string]struct {
		failures int
		err      error
		want     int
	}{
		"RequestConstructionError gives up":   {1000, &restclient.RequestConstructionError{Err: errors.New("bad")}, 1},
		"StatusError gives up":                {1000, &apierrors.StatusError{}, 1},
		"422 gives up":                        {1000, errInvalid(), 1},
		"UnexpectedObjectError is retried":    {1000, &apierrors.UnexpectedObjectError{}, 12},
		"other errors are retried":            {1000, errors.New("a weird error"), 12},
		"429 is retried (client-go gives up)": {1000, errTooMany(0), 12},
		"500 is retried (client-go gives up)": {1000, errInternal(), 12},
		"succeeds eventually":                 {1, errors.New("a weird error"), 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, policy)
			n := 0
			e.sink.setFail(func(string, *corev1.Event) error {
				if n++; n <= tc.failures {
					return tc.err
				}
				return nil
			})
			e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
			for i := 1; i < tc.want; i++ {
				e.waitCalls(i)
				e.stepToNextTimer()
			}
			e.waitCalls(tc.want)
			waitFor(t, "the outcome", func() bool {
				return e.writes("create", "success")+e.dropped("rejected")+e.dropped("retries_exhausted") == 1
			})
			if got := e.sink.numCalls(); got != tc.want {
				t.Errorf("%d attempts, want %d", got, tc.want)
			}
		})
	}
}

// TestCancelEvent: a write that fails after its context (here the
// broadcaster) is cancelled gets one attempt.
func TestCancelEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e := newEnv(t, WithContext(ctx))
	gate := make(chan struct{})
	e.sink.gate = gate
	e.sink.setFail(func(string, *corev1.Event) error { return &apierrors.UnexpectedObjectError{} })
	e.rec.Event(pod("ns", "p1", "u"), corev1.EventTypeNormal, "Started", "m")
	cancel()
	waitFor(t, "shutdown to start", func() bool {
		select {
		case <-e.b.stopping:
			return true
		default:
			return false
		}
	})
	close(gate)
	<-e.b.Done()
	if n := e.sink.numCalls(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestLotsOfEvents: 1000 concurrent events, each failing 4 times, are all
// written, and a logging watcher sees every one.
func TestLotsOfEvents(t *testing.T) {
	e := newEnv(t, WithRetryPolicy(RetryPolicy{MaxAttempts: 12, Initial: time.Second, Max: time.Second, Jitter: -1}))
	var mu sync.Mutex
	attempts := map[string]int{}
	e.sink.setFail(func(_ string, ev *corev1.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if attempts[ev.Message]++; attempts[ev.Message] < 5 {
			return errors.New("fake error")
		}
		return nil
	})
	var logged sync.WaitGroup
	logged.Add(1000)
	e.b.StartLogging(func(string, ...interface{}) { logged.Done() })
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("foo-%d", i), Namespace: "baz", UID: "bar", APIVersion: "version"}
			e.rec.Eventf(ref, corev1.EventTypeNormal, "Reason-"+strconv.Itoa(i), "%d", i)
		}()
	}
	wg.Wait()
	// Drive the retry waits until everything is written.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if e.clk.HasWaiters() {
				e.clk.Step(time.Second)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	waitFor(t, "1000 events written", func() bool { return len(e.sink.stored()) == 1000 })
	close(stop)
	<-done
	logged.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < 1000; i++ {
		if attempts[strconv.Itoa(i)] != 5 {
			t.Errorf("event %d: %d attempts", i, attempts[strconv.Itoa(i)])
		}
	}
	if d := counterValue(t, e.b.metrics.Dropped); d != 0 {
		t.Errorf("%v dropped", d)
	}
}

// TestGenerateEventName: client-go's naming, with a UUID for names that
// are not DNS-1123 subdomains.
func TestGenerateEventName(t *testing.T) {
	const ts = int64(105999103295324396)
	cases := []struct{ ref, want string }{
		{"test-pod", "test-pod.178959f726d80ec"},
		{strings.Repeat("x", 300), ""},
		{"test.POD", ""},
		{"test.pod/invalid!chars?", ""},
		{"--test.pod/invalid!chars?", ""},
		{"Bad_Name", ""},
	}
	for _, tc := range cases {
		got := eventName(tc.ref, ts)
		if errs := apimachineryvalidation.NameIsDNSSubdomain(got, false); len(errs) > 0 {
			t.Errorf("%q: %q is not a valid name: %v", tc.ref, got, errs)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%q: %q, want %q", tc.ref, got, tc.want)
		}
		if tc.want == "" {
			if !isUUID(got) {
				t.Errorf("%q: %q is not a UUID", tc.ref, got)
			}
		}
	}
}

// TestIsDNS1123Subdomain checks the hand-written validator against
// apimachinery's.
func TestIsDNS1123Subdomain(t *testing.T) {
	inputs := []string{"", "a", "a.b", "a-b.c", "-a", "a-", "a.", ".a", "a..b", "a.-b", "a-.b", "A", "a_b", "0", "0.0",
		"a/b", "a%b", "ä", strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("a.", 126) + "a",
		"p1.18e9b8832bdd4000", "x.-1", "foo..18e9", "foo-.18e9"}
	for _, in := range inputs {
		want := len(validation.IsDNS1123Subdomain(in)) == 0
		if got := isDNS1123Subdomain([]byte(in)); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}
