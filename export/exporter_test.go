package export_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/webhook"
	"github.com/kubevents/kubevents/export/webhook/webhooktest"
	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cursorStore wraps a real store, keeping cursors in memory so that tests
// can make saving them fail.
type cursorStore struct {
	*pebblestore.Store
	mu      sync.Mutex
	cursors map[string]int64
	saveErr error
	saves   int
}

func (c *cursorStore) Cursor(ctx context.Context, name string) (int64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rev, ok := c.cursors[name]
	return rev, ok, nil
}

func (c *cursorStore) SaveCursor(ctx context.Context, name string, rev int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.saves++
	if c.saveErr != nil {
		return c.saveErr
	}
	c.cursors[name] = rev
	return nil
}

// cursor returns the saved cursor, -1 when none is.
func (c *cursorStore) cursor(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev, ok := c.cursors[name]; ok {
		return rev
	}
	return -1
}

type env struct {
	t     *testing.T
	ctx   context.Context
	clock *testingclock.FakeClock
	fs    vfs.FS
	store *cursorStore
	reg   *prometheus.Registry
	seq   int
}

func newEnv(t *testing.T, o pebblestore.Options) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), clock: testingclock.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)), fs: vfs.NewMem()}
	e.open(o)
	return e
}

func (e *env) open(o pebblestore.Options) {
	e.t.Helper()
	o.Dir, o.FS, o.Clock, o.NoSync = "data", e.fs, e.clock, true
	o.Logger = slog.New(slog.DiscardHandler)
	s, err := pebblestore.Open(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	cursors := map[string]int64{}
	if e.store != nil {
		cursors = e.store.cursors
	}
	e.store = &cursorStore{Store: s, cursors: cursors}
	e.reg = prometheus.NewRegistry()
}

// start runs an exporter over specs until the test ends or stop is called.
func (e *env) start(specs ...export.SinkSpec) (stop func()) {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	x, err := export.New(export.Options{Store: e.store, Sinks: specs, Clock: e.clock, Registerer: e.reg,
		Logger: slog.New(slog.DiscardHandler), CursorInterval: time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := x.Run(ctx); err != nil {
			e.t.Error(err)
		}
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) create(ns, typ, reason string) *corev1.Event {
	e.t.Helper()
	e.seq++
	name := fmt.Sprintf("ev-%04d", e.seq)
	ev, err := e.store.Create(e.ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-" + name},
		Type:           typ, Reason: reason, Message: "m", Count: 1,
	}, storage.WriteOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func (e *env) bump(ev *corev1.Event) *corev1.Event {
	e.t.Helper()
	c := ev.DeepCopy()
	c.Count++
	c.ResourceVersion = ""
	out, err := e.store.Update(e.ctx, c, storage.WriteOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// until steps the fake clock 100 ms at a time until cond holds, failing
// after 2,000 steps (200 s of fake time).
func (e *env) until(what string, cond func() bool) {
	e.t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		e.clock.Step(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for %s", what)
}

func keys(rs []export.Record) []string {
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.Key)
	}
	return ks
}

// TestExportsEveryChangeInOrder: creates, count changes and deletions
// reach the sink in revision order, each with its idempotency key, and
// the cursor moves to the last one once acknowledged.
func TestExportsEveryChangeInOrder(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	sink := &export.FakeSink{}
	e.start(export.SinkSpec{Name: "all", Sink: sink, Filter: export.Filter{Deletions: true}})
	e.until("the sink's cursor", func() bool { return e.store.cursor("all") >= 0 })

	var want []export.Record
	add := func(t watch.EventType, ev *corev1.Event) {
		rev := mustRev(e.t, ev)
		want = append(want, export.Record{Key: string(ev.UID) + "/" + ev.ResourceVersion, Type: t, Revision: rev})
	}
	a := e.create("default", corev1.EventTypeNormal, "Scheduled")
	add(watch.Added, a)
	b := e.create("default", corev1.EventTypeWarning, "BackOff")
	add(watch.Added, b)
	for range 3 {
		b = e.bump(b)
		add(watch.Modified, b)
	}
	del, err := e.store.Delete(e.ctx, a.Namespace, a.Name, storage.Preconditions{})
	if err != nil {
		t.Fatal(err)
	}
	add(watch.Deleted, del)

	e.until("every change", func() bool { return len(sink.Records()) >= len(want) })
	got := sink.Records()
	if len(got) != len(want) {
		t.Fatalf("got %d records %v, want %d", len(got), keys(got), len(want))
	}
	for i := range want {
		g := got[i]
		if g.Key != want[i].Key || g.Type != want[i].Type || g.Revision != want[i].Revision {
			t.Errorf("record %d = {%s %s %d}, want {%s %s %d}", i, g.Key, g.Type, g.Revision, want[i].Key, want[i].Type, want[i].Revision)
		}
		if g.Event.APIVersion != "v1" || g.Event.Kind != "Event" {
			t.Errorf("record %d: event apiVersion/kind = %q/%q, want v1/Event", i, g.Event.APIVersion, g.Event.Kind)
		}
	}
	if got[4].Event.Count != 4 {
		t.Errorf("last count change carries count %d, want 4", got[4].Event.Count)
	}
	e.until("the cursor at the last change", func() bool { return e.store.cursor("all") == want[len(want)-1].Revision })
	if n := metricstest.Sum(t, e.reg, "eventsd_export_records_total", "sink", "all"); n != float64(len(want)) {
		t.Errorf("eventsd_export_records_total = %v, want %d", n, len(want))
	}
	if n := metricstest.Sum(t, e.reg, "eventsd_export_lag_revisions", "sink", "all"); n != 0 {
		t.Errorf("eventsd_export_lag_revisions = %v, want 0", n)
	}
}

func mustRev(t *testing.T, ev *corev1.Event) int64 {
	t.Helper()
	var rev int64
	if _, err := fmt.Sscan(ev.ResourceVersion, &rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

// TestFilters: each sink gets only what its filter selects, and the
// cursor of a sink whose filter matched nothing still moves.
func TestFilters(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	no := false
	warnings := &export.FakeSink{}
	createsOnly := &export.FakeSink{}
	none := &export.FakeSink{}
	specs := []export.SinkSpec{
		{Name: "warnings", Sink: warnings, Filter: export.Filter{}},
		{Name: "creates", Sink: createsOnly, Filter: export.Filter{Updates: &no}},
		{Name: "none", Sink: none},
	}
	specs[0].Filter.Types = []string{corev1.EventTypeWarning}
	specs[2].Filter.Namespaces = []string{"nowhere"}
	e.start(specs...)
	e.until("cursors", func() bool { return e.store.cursor("warnings") >= 0 && e.store.cursor("none") >= 0 })

	n := e.create("default", corev1.EventTypeNormal, "Pulled")
	w := e.create("default", corev1.EventTypeWarning, "BackOff")
	w = e.bump(w)
	e.bump(n)
	last := e.store.Revision()

	e.until("the warnings", func() bool { return len(warnings.Records()) == 2 })
	e.until("the creates", func() bool { return len(createsOnly.Records()) == 2 })
	if got := warnings.Records(); got[0].Type != watch.Added || got[1].Type != watch.Modified || got[1].Event.Count != 2 || got[0].Event.Type != corev1.EventTypeWarning {
		t.Errorf("warnings sink got %v", keys(got))
	}
	for _, r := range createsOnly.Records() {
		if r.Type != watch.Added {
			t.Errorf("creates-only sink got a %s", r.Type)
		}
	}
	e.until("the idle sink's cursor past the changes", func() bool { return e.store.cursor("none") == last })
	if none.Sends() != 0 {
		t.Errorf("the sink that matches nothing was sent %d batches", none.Sends())
	}
	_ = w
}

// TestRetriesUntilAcknowledged: a failing sink gets the same batch, with
// the same keys, until it acknowledges; the cursor does not move before.
func TestRetriesUntilAcknowledged(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	var mu sync.Mutex
	failures := 3
	sink := &export.FakeSink{Fail: func([]export.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return errors.New("connection refused")
		}
		return nil
	}}
	e.start(export.SinkSpec{Name: "flaky", Sink: sink})
	e.until("the cursor", func() bool { return e.store.cursor("flaky") >= 0 })
	start := e.store.cursor("flaky")
	for range 5 {
		e.create("default", corev1.EventTypeNormal, "R")
	}
	e.until("the batch", func() bool { return len(sink.Records()) == 5 })
	if got := sink.Sends(); got != 4 {
		t.Errorf("Send called %d times, want 4 (3 failures, then the acknowledged one)", got)
	}
	if got := len(sink.Batches()); got != 1 {
		t.Errorf("%d batches acknowledged, want 1", got)
	}
	e.until("the cursor", func() bool { return e.store.cursor("flaky") == start+5 })
	if n := metricstest.Sum(t, e.reg, "eventsd_export_retries_total", "sink", "flaky"); n != 3 {
		t.Errorf("eventsd_export_retries_total = %v, want 3", n)
	}
}

// TestRejectedBatchIsDroppedAndCounted: a batch the destination refuses
// is sent three times, then dropped and counted; the next goes on.
func TestRejectedBatchIsDroppedAndCounted(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	sink := &export.FakeSink{Fail: func(b []export.Record) error {
		if b[0].Event.Reason == "Bad" {
			return fmt.Errorf("HTTP 400: %w", export.ErrRejected)
		}
		return nil
	}}
	e.start(export.SinkSpec{Name: "picky", Sink: sink, MaxBatch: 2})
	e.until("the cursor", func() bool { return e.store.cursor("picky") >= 0 })
	e.create("default", corev1.EventTypeNormal, "Bad")
	e.create("default", corev1.EventTypeNormal, "Bad")
	good := e.create("default", corev1.EventTypeNormal, "Good")
	e.until("the good event", func() bool { return len(sink.Records()) == 1 })
	if got := sink.Records()[0].Key; got != string(good.UID)+"/"+good.ResourceVersion {
		t.Errorf("got %s, want the good event", got)
	}
	if n := metricstest.Sum(t, e.reg, "eventsd_export_lost_total", "sink", "picky", "reason", "rejected"); n != 2 {
		t.Errorf("lost{rejected} = %v, want 2", n)
	}
	if got := sink.Sends(); got != 4 {
		t.Errorf("Send called %d times, want 3 for the refused batch and 1 for the good one", got)
	}
}

// TestMaxBatch splits a burst into batches of at most MaxBatch, in order.
func TestMaxBatch(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	sink := &export.FakeSink{}
	e.start(export.SinkSpec{Name: "small", Sink: sink, MaxBatch: 3})
	e.until("the cursor", func() bool { return e.store.cursor("small") >= 0 })
	for range 10 {
		e.create("default", corev1.EventTypeNormal, "R")
	}
	e.until("all ten", func() bool { return len(sink.Records()) == 10 })
	var prev int64
	for i, b := range sink.Batches() {
		if len(b) > 3 {
			t.Errorf("batch %d has %d records", i, len(b))
		}
		for _, r := range b {
			if r.Revision <= prev {
				t.Errorf("revision %d after %d", r.Revision, prev)
			}
			prev = r.Revision
		}
	}
}

// TestResumesFromCursor: a new exporter (after a restart) sends what the
// last one did not acknowledge, and nothing it did.
func TestResumesFromCursor(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	first := &export.FakeSink{}
	stop := e.start(export.SinkSpec{Name: "s", Sink: first})
	e.until("the cursor", func() bool { return e.store.cursor("s") >= 0 })
	for range 4 {
		e.create("default", corev1.EventTypeNormal, "Before")
	}
	e.until("the first four", func() bool { return len(first.Records()) == 4 })
	e.until("their cursor", func() bool { return e.store.cursor("s") == e.store.Revision() })
	stop()
	if !first.Closed() {
		t.Error("the sink was not closed when the exporter stopped")
	}
	for range 3 {
		e.create("default", corev1.EventTypeNormal, "While down")
	}
	second := &export.FakeSink{}
	e.start(export.SinkSpec{Name: "s", Sink: second})
	e.create("default", corev1.EventTypeNormal, "After")
	e.until("the next four", func() bool { return len(second.Records()) == 4 })
	for i, r := range second.Records() {
		want := "While down"
		if i == 3 {
			want = "After"
		}
		if r.Event.Reason != want {
			t.Errorf("record %d is %q, want %q", i, r.Event.Reason, want)
		}
	}
}

// TestLostHistoryIsCounted: a sink whose cursor the store's history no
// longer covers resumes at the oldest kept revision, and the gap is
// counted.
func TestLostHistoryIsCounted(t *testing.T) {
	e := newEnv(t, pebblestore.Options{HistoryMaxEvents: 10, HistoryWindow: time.Second})
	for range 30 {
		e.create("default", corev1.EventTypeNormal, "Old")
	}
	e.until("the history trimmed", func() bool { return e.store.Stats().OldestRevision > 10 })
	oldest := e.store.Stats().OldestRevision
	e.store.cursors["late"] = 2
	sink := &export.FakeSink{}
	e.start(export.SinkSpec{Name: "late", Sink: sink})
	e.until("the loss counted", func() bool {
		return metricstest.Sum(t, e.reg, "eventsd_export_lost_total", "sink", "late", "reason", "history") > 0
	})
	if lost := metricstest.Sum(t, e.reg, "eventsd_export_lost_total", "sink", "late", "reason", "history"); lost < float64(min(oldest, 30)-2) {
		t.Errorf("lost{history} = %v, want at least %d", lost, min(oldest, 30)-2)
	}
	next := e.create("default", corev1.EventTypeNormal, "New")
	e.until("the next change", func() bool { return len(sink.Records()) > 0 })
	for _, r := range sink.Records() {
		if r.Revision <= 2 {
			t.Errorf("record at revision %d, before the loss", r.Revision)
		}
	}
	if last := sink.Records()[len(sink.Records())-1]; last.Event.Name != next.Name {
		t.Errorf("last record is %s, want %s", last.Event.Name, next.Name)
	}
}

// TestCursorSaveFailureIsRetried: a batch acknowledged but whose cursor
// cannot be saved does not move the cursor until the store takes it.
func TestCursorSaveFailureIsRetried(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	sink := &export.FakeSink{}
	e.start(export.SinkSpec{Name: "s", Sink: sink})
	e.until("the cursor", func() bool { return e.store.cursor("s") >= 0 })
	before := e.store.cursor("s")
	e.store.mu.Lock()
	e.store.saveErr = fmt.Errorf("etcd: %w", storage.ErrUnreachable)
	e.store.mu.Unlock()
	e.create("default", corev1.EventTypeNormal, "R")
	e.until("the record", func() bool { return len(sink.Records()) == 1 })
	e.until("a failed save", func() bool { e.store.mu.Lock(); defer e.store.mu.Unlock(); return e.store.saves >= 3 })
	if got := e.store.cursor("s"); got != before {
		t.Errorf("cursor moved to %d without a save", got)
	}
	e.store.mu.Lock()
	e.store.saveErr = nil
	e.store.mu.Unlock()
	e.until("the cursor saved", func() bool { return e.store.cursor("s") == e.store.Revision() })
}

// TestLagSeconds: the lag gauge tells how long the oldest unacknowledged
// change has waited, and goes back to 0 once the sink catches up.
func TestLagSeconds(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	var mu sync.Mutex
	down := true
	sink := &export.FakeSink{Fail: func([]export.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return errors.New("down")
		}
		return nil
	}}
	e.start(export.SinkSpec{Name: "s", Sink: sink})
	e.until("the cursor", func() bool { return e.store.cursor("s") >= 0 })
	e.create("default", corev1.EventTypeWarning, "R")
	e.until("30 s of lag", func() bool {
		return metricstest.Sum(t, e.reg, "eventsd_export_lag_seconds", "sink", "s") >= 30
	})
	if lag := metricstest.Sum(t, e.reg, "eventsd_export_lag_revisions", "sink", "s"); lag != 1 {
		t.Errorf("lag_revisions = %v, want 1", lag)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	e.until("no lag", func() bool {
		return metricstest.Sum(t, e.reg, "eventsd_export_lag_seconds", "sink", "s") == 0
	})
}

// TestNewRejectsBadSpecs names the sink and what is wrong.
func TestNewRejectsBadSpecs(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	for _, tc := range []struct {
		specs []export.SinkSpec
		want  string
	}{
		{nil, "no sinks"},
		{[]export.SinkSpec{{Name: "Bad_Name", Sink: &export.FakeSink{}}}, `sinks[0].name "Bad_Name"`},
		{[]export.SinkSpec{{Name: "a", Sink: &export.FakeSink{}}, {Name: "a", Sink: &export.FakeSink{}}}, `sinks[1].name "a": duplicate`},
		{[]export.SinkSpec{{Name: "a"}}, `sink "a": no sink`},
	} {
		_, err := export.New(export.Options{Store: e.store, Sinks: tc.specs})
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error containing %q", tc.specs, err, tc.want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// retryAfterError asks for a wait, as a webhook's 429 does.
type retryAfterError struct{ d time.Duration }

func (e retryAfterError) Error() string             { return "429 Too Many Requests" }
func (e retryAfterError) RetryAfter() time.Duration { return e.d }

// TestRetryAfterIsHonoured: the exporter waits at least what the
// destination asked before sending again.
func TestRetryAfterIsHonoured(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	var mu sync.Mutex
	var sends []time.Time
	sink := &export.FakeSink{Fail: func([]export.Record) error {
		mu.Lock()
		defer mu.Unlock()
		sends = append(sends, e.clock.Now())
		if len(sends) == 1 {
			return retryAfterError{20 * time.Second}
		}
		return nil
	}}
	e.start(export.SinkSpec{Name: "s", Sink: sink})
	e.until("the cursor", func() bool { return e.store.cursor("s") >= 0 })
	e.create("default", corev1.EventTypeNormal, "R")
	e.until("the record", func() bool { return len(sink.Records()) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if gap := sends[1].Sub(sends[0]); gap < 20*time.Second {
		t.Errorf("sent again after %v, the destination asked for 20s", gap)
	}
}

// TestCursorZeroResumesFromOrigin: a sink created on an empty store has
// cursor 0; after a restart it still gets every change made since, not
// only those after the restart.
func TestCursorZeroResumesFromOrigin(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	stop := e.start(export.SinkSpec{Name: "s", Sink: &export.FakeSink{}})
	e.until("the cursor", func() bool { return e.store.cursor("s") == 0 })
	stop()
	for range 3 {
		e.create("default", corev1.EventTypeNormal, "While down")
	}
	sink := &export.FakeSink{}
	e.start(export.SinkSpec{Name: "s", Sink: sink})
	e.until("the three changes", func() bool { return len(sink.Records()) == 3 })
}

// TestWebhookResentBatchKeepsItsKeys: a batch the webhook did not
// acknowledge (503) is sent again as it was: the same Idempotency-Key
// header (its first and last records' keys) and the same records with
// the same keys, so a receiver that stored it the first time can tell.
func TestWebhookResentBatchKeepsItsKeys(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	r := webhooktest.New(t, webhooktest.Options{})
	sink, err := webhook.New(webhook.Config{URL: r.URL()}, webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.FailNext(2, http.StatusServiceUnavailable, "")
	e.start(export.SinkSpec{Name: "hook", Sink: sink, MaxBatch: 5})
	e.until("the cursor", func() bool { return e.store.cursor("hook") >= 0 })
	for range 5 {
		e.create("default", corev1.EventTypeNormal, "R")
	}
	e.until("the acknowledged batch", func() bool { return len(r.Records()) == 5 })
	reqs := r.Requests()
	if len(reqs) != 3 || reqs[0].Status != http.StatusServiceUnavailable || reqs[1].Status != http.StatusServiceUnavailable || reqs[2].Status != http.StatusOK {
		t.Fatalf("%d requests: want 503, 503, then 200", len(reqs))
	}
	recs := reqs[2].Records
	want := recs[0].Key + ".." + recs[4].Key
	for i, q := range reqs {
		if got := q.Header.Get("Idempotency-Key"); got != want {
			t.Errorf("attempt %d: Idempotency-Key %q, want %q", i+1, got, want)
		}
		if got := keys(q.Records); strings.Join(got, " ") != strings.Join(keys(recs), " ") {
			t.Errorf("attempt %d: records %q, want %q", i+1, got, keys(recs))
		}
	}
}

// TestFleetEventsCarryTheirCluster: events a fleet's clusters wrote into
// the store (as their mirrors do, through clusterview) reach the sinks
// with their cluster and real namespace, never the storage namespace
// ("~east~shop"); filters select by cluster and by real namespace, the
// root cluster named "".
func TestFleetEventsCarryTheirCluster(t *testing.T) {
	e := newEnv(t, pebblestore.Options{})
	all, eastOnly, rootOnly, shop := &export.FakeSink{}, &export.FakeSink{}, &export.FakeSink{}, &export.FakeSink{}
	specs := []export.SinkSpec{
		{Name: "all", Sink: all},
		{Name: "east", Sink: eastOnly, Filter: export.Filter{Clusters: []string{"east"}}},
		{Name: "root", Sink: rootOnly, Filter: export.Filter{Clusters: []string{""}}},
		{Name: "shop", Sink: shop},
	}
	specs[3].Filter.Namespaces = []string{"shop"}
	e.start(specs...)
	e.until("cursors", func() bool { return e.store.cursor("all") >= 0 && e.store.cursor("shop") >= 0 })

	write := func(cluster, ns string) {
		t.Helper()
		_, err := clusterview.New(e.store, cluster).Create(e.ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "web.1", UID: types.UID(cluster + "-" + ns)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"},
			Type:           corev1.EventTypeWarning, Reason: "BackOff", Count: 1,
		}, storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	write("", "shop")
	write("east", "shop")
	write("west", "shop")
	write("east", "batch")

	type got struct{ cluster, ns, uid string }
	of := func(rs []export.Record) []got {
		var g []got
		for _, r := range rs {
			g = append(g, got{r.Cluster, r.Event.Namespace, string(r.Event.UID)})
		}
		return g
	}
	e.until("every change", func() bool { return len(all.Records()) == 4 })
	for _, tc := range []struct {
		sink *export.FakeSink
		name string
		want []got
	}{
		{all, "all", []got{{"", "shop", "-shop"}, {"east", "shop", "east-shop"}, {"west", "shop", "west-shop"}, {"east", "batch", "east-batch"}}},
		{eastOnly, "east", []got{{"east", "shop", "east-shop"}, {"east", "batch", "east-batch"}}},
		{rootOnly, "root", []got{{"", "shop", "-shop"}}},
		{shop, "shop", []got{{"", "shop", "-shop"}, {"east", "shop", "east-shop"}, {"west", "shop", "west-shop"}}},
	} {
		e.until("sink "+tc.name, func() bool { return len(tc.sink.Records()) >= len(tc.want) })
		if diff := cmp.Diff(tc.want, of(tc.sink.Records()), cmp.AllowUnexported(got{})); diff != "" {
			t.Errorf("sink %s (-want +got):\n%s", tc.name, diff)
		}
	}
	// The store's own objects keep their storage namespaces: the records'
	// events are copies.
	res, err := e.store.List(e.ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, ev := range res.Items {
		stored = append(stored, ev.Namespace)
	}
	if diff := cmp.Diff([]string{"shop", "~east~batch", "~east~shop", "~west~shop"}, stored); diff != "" {
		t.Errorf("stored namespaces (-want +got):\n%s", diff)
	}
}
