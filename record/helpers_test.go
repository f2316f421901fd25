package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// t0 is where every fake clock starts.
var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// waitLimit bounds every real-time wait for an asynchronous result. It
// only ends a test that would otherwise hang, so it is generous: under
// -race on a saturated 2-core machine, TestLotsOfEvents' 5,000 attempts
// once took more than 10 s.
const waitLimit = 60 * time.Second

// ---- fake sink ----

// sinkCall is one call the fake sink received.
type sinkCall struct {
	verb  string // "create" or "patch"
	at    time.Time
	event corev1.Event // a copy of the event passed
	body  []byte       // create: the event as JSON; patch: the patch
	err   error        // what the sink answered
}

// fakeSink is an EventSink (and Lister) over an in-memory store that
// records its calls and fails as told.
type fakeSink struct {
	clk clock.PassiveClock

	mu    sync.Mutex
	calls []sinkCall
	store map[string]*corev1.Event
	rv    int
	lists []metav1.ListOptions
	// fail, when set, is asked before each call; a non-nil error is
	// returned instead of storing.
	fail func(verb string, ev *corev1.Event) error
	// gate, when set, blocks every call until it is closed.
	gate chan struct{}
}

func newFakeSink(clk clock.PassiveClock) *fakeSink {
	return &fakeSink{clk: clk, store: map[string]*corev1.Event{}}
}

func (s *fakeSink) setFail(f func(verb string, ev *corev1.Event) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = f
}

// record appends a call; the returned function sets its answer.
func (s *fakeSink) record(verb string, ev *corev1.Event, body []byte) func(error) error {
	s.calls = append(s.calls, sinkCall{verb: verb, at: s.clk.Now(), event: *ev.DeepCopy(), body: body})
	i := len(s.calls) - 1
	return func(err error) error { s.calls[i].err = err; return err }
}

func (s *fakeSink) waitGate() {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
	}
}

func (s *fakeSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	s.waitGate()
	body, _ := json.Marshal(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	ret := s.record("create", ev, body)
	if s.fail != nil {
		if err := s.fail("create", ev); err != nil {
			return nil, ret(err)
		}
	}
	k := ev.Namespace + "/" + ev.Name
	if _, ok := s.store[k]; ok {
		return nil, ret(apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, ev.Name))
	}
	s.rv++
	out := ev.DeepCopy()
	out.ResourceVersion = fmt.Sprint(s.rv)
	out.UID = types.UID(fmt.Sprintf("uid-%d", s.rv))
	s.store[k] = out
	return out.DeepCopy(), ret(nil)
}

func (s *fakeSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return nil, errors.New("the recorder must not call Update")
}

func (s *fakeSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	s.waitGate()
	s.mu.Lock()
	defer s.mu.Unlock()
	ret := s.record("patch", ev, slices.Clone(data))
	if s.fail != nil {
		if err := s.fail("patch", ev); err != nil {
			return nil, ret(err)
		}
	}
	k := ev.Namespace + "/" + ev.Name
	cur, ok := s.store[k]
	if !ok {
		return nil, ret(apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, ev.Name))
	}
	orig, _ := json.Marshal(cur)
	patched, err := strategicpatch.StrategicMergePatch(orig, data, &corev1.Event{})
	if err != nil {
		return nil, ret(apierrors.NewBadRequest(err.Error()))
	}
	out := &corev1.Event{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, ret(apierrors.NewBadRequest(err.Error()))
	}
	s.rv++
	out.ResourceVersion = fmt.Sprint(s.rv)
	s.store[k] = out
	return out.DeepCopy(), ret(nil)
}

// List implements Lister over the store (ignoring the field selector, as
// the recorder filters again).
func (s *fakeSink) List(_ context.Context, opts metav1.ListOptions) (*corev1.EventList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, opts)
	l := &corev1.EventList{}
	for _, ev := range s.store {
		l.Items = append(l.Items, *ev.DeepCopy())
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l, nil
}

// remove deletes a stored event, as the server's TTL would.
func (s *fakeSink) remove(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.store, ns+"/"+name)
}

func (s *fakeSink) getCalls() []sinkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *fakeSink) numCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// stored returns the stored events, sorted by name.
func (s *fakeSink) stored() []corev1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []corev1.Event
	for _, ev := range s.store {
		out = append(out, *ev.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// storedBy returns the stored events by reason.
func (s *fakeSink) storedBy(reason string) []corev1.Event {
	var out []corev1.Event
	for _, ev := range s.stored() {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// Errors the fake sink can be told to return.
func errTransport() error {
	return &url.Error{Op: "Post", URL: "http://eventsd/api/v1/namespaces/ns/events", Err: errors.New("connection refused")}
}
func errNotFound() error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, "x")
}
func errConflict() error {
	return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, "x")
}
func errInvalid() error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x",
		field.ErrorList{field.TooLong(field.NewPath("reportingInstance"), "", 128)})
}
func errTooMany(retryAfter int) error {
	return apierrors.NewTooManyRequests("too many requests", retryAfter)
}
func errInternal() error { return apierrors.NewInternalError(errors.New("boom")) }

// ---- log capture ----

type logEntry struct {
	level int // -1 for errors
	msg   string
	err   error
	kv    []any
}

func (e logEntry) String() string {
	return fmt.Sprintf("level=%d msg=%q err=%v %v", e.level, e.msg, e.err, e.kv)
}

type logCapture struct {
	mu      sync.Mutex
	entries []logEntry
}

func (c *logCapture) logger() logr.Logger { return logr.New(&captureSink{c: c}) }

func (c *logCapture) all() []logEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.entries)
}

// find returns the entries whose message contains s.
func (c *logCapture) find(s string) []logEntry {
	var out []logEntry
	for _, e := range c.all() {
		if strings.Contains(e.msg, s) {
			out = append(out, e)
		}
	}
	return out
}

type captureSink struct {
	c  *logCapture
	kv []any
}

func (s *captureSink) Init(logr.RuntimeInfo) {}
func (s *captureSink) Enabled(int) bool      { return true }
func (s *captureSink) Info(level int, msg string, kv ...any) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.entries = append(s.c.entries, logEntry{level: level, msg: msg, kv: append(slices.Clone(s.kv), kv...)})
}
func (s *captureSink) Error(err error, msg string, kv ...any) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.entries = append(s.c.entries, logEntry{level: -1, msg: msg, err: err, kv: append(slices.Clone(s.kv), kv...)})
}
func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	return &captureSink{c: s.c, kv: append(slices.Clone(s.kv), kv...)}
}
func (s *captureSink) WithName(string) logr.LogSink { return s }

// ---- environment ----

// env is a broadcaster on a fake clock with one fake sink and a recorder
// for source {kubelet, node1}.
type env struct {
	t    *testing.T
	clk  *timerClock
	sink *fakeSink
	b    *Broadcaster
	rec  EventRecorderLogger
	logs *logCapture
	// stepped counts the timers stepToNextTimer has stepped past.
	stepped int
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	clk := &timerClock{FakeClock: clocktesting.NewFakeClock(t0)}
	logs := &logCapture{}
	e := &env{t: t, clk: clk, sink: newFakeSink(clk), logs: logs}
	e.b = NewBroadcaster(append([]Option{WithClock(clk), WithLogger(logs.logger())}, opts...)...)
	t.Cleanup(e.b.Shutdown)
	e.b.StartRecordingToSink(e.sink)
	e.rec = e.b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node1"})
	return e
}

// sync waits until every watcher of b has processed what was queued before
// the call (and run the deferred flushes due at the clock's time).
func syncBroadcaster(t *testing.T, b *Broadcaster) {
	t.Helper()
	b.mu.RLock()
	ws := slices.Clone(b.watchers)
	b.mu.RUnlock()
	for _, w := range ws {
		ack := make(chan struct{})
		select {
		case w.queue <- item{barrier: ack}:
		case <-time.After(waitLimit):
			t.Fatal("queue full for too long")
		}
		select {
		case <-ack:
		case <-time.After(waitLimit):
			t.Fatal("worker did not reach the barrier")
		}
	}
}

func (e *env) sync() { e.t.Helper(); syncBroadcaster(e.t, e.b) }

// step advances the clock and waits for the workers.
func (e *env) step(d time.Duration) {
	e.t.Helper()
	e.clk.Step(d)
	e.sync()
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitCalls waits until the sink has received n calls.
func (e *env) waitCalls(n int) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%d sink calls", n), func() bool { return e.sink.numCalls() >= n })
}

// waitTimers waits until n timers are waiting on the clock.
func (e *env) waitTimers(n int) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%d timers", n), func() bool { return e.clk.Waiters() >= n })
}

// stepToNextTimer waits for the next timer created on the clock (the
// (n+1)th, n being how many this function has stepped past before) and
// advances the clock by exactly its duration, which it returns.
func (e *env) stepToNextTimer() time.Duration {
	e.t.Helper()
	e.stepped++
	var d time.Duration
	waitFor(e.t, "a timer", func() bool {
		ds := e.clk.durations()
		if len(ds) < e.stepped {
			return false
		}
		d = ds[e.stepped-1]
		return true
	})
	e.clk.Step(d)
	return d
}

// timerClock is a fake clock that remembers the duration of every timer
// created on it, so tests can step exactly to a retry.
type timerClock struct {
	*clocktesting.FakeClock
	mu     sync.Mutex
	timers []time.Duration
}

// NewTimer creates the fake timer, then records its duration.
func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, d)
	return t
}

func (c *timerClock) durations() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.timers)
}

// ---- objects and metrics ----

func pod(ns, name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

// counterValue sums the counters or gauges c collects (0 for an empty vec).
func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		sum += pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
	}
	return sum
}

func (e *env) dropped(cause string) float64 {
	return counterValue(e.t, e.b.metrics.Dropped.WithLabelValues(cause))
}

func (e *env) writes(verb, result string) float64 {
	return counterValue(e.t, e.b.metrics.Writes.WithLabelValues(verb, result))
}

// verbs lists the calls' verbs, with "!" after failed ones.
func verbs(calls []sinkCall) []string {
	var out []string
	for _, c := range calls {
		v := c.verb
		if c.err != nil {
			v += "!"
		}
		out = append(out, v)
	}
	return out
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// isUUID reports whether s is a UUID in its canonical text form.
func isUUID(s string) bool { return uuidRE.MatchString(s) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// countBody is the patch client-go sends for a repeat.
func countBody(n int, last time.Time, msg string) string {
	m, _ := json.Marshal(msg)
	return fmt.Sprintf(`{"count":%d,"lastTimestamp":%q,"message":%s}`, n, stamp(last), m)
}
