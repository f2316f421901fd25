package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// env is a pebble store on an in-memory filesystem (kept across mirror
// restarts), a fake source and a fake clock.
type env struct {
	t     *testing.T
	fs    vfs.FS
	store *pebblestore.Store
	src   *mirror.FakeSource
	clock *clocktesting.FakeClock
	ctx   context.Context
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, fs: vfs.NewMem(), src: mirror.NewFakeSource(), clock: clocktesting.NewFakeClock(t0), ctx: context.Background()}
	e.open()
	t.Cleanup(func() {
		if e.store != nil {
			e.store.Close()
		}
	})
	return e
}

func (e *env) open() {
	st, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: e.fs, Clock: e.clock, DefaultTTL: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
}

// reopen closes and opens the store, as a restart of eventsd does.
func (e *env) reopen() {
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// running is a Mirror running in the background.
type running struct {
	m    *mirror.Mirror
	reg  *prometheus.Registry
	stop func()
}

func (e *env) start(mod func(*mirror.Options)) *running {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	opts := mirror.Options{Source: e.src, Store: e.store, Clock: e.clock, Registerer: reg, Logger: slog.New(slog.DiscardHandler), Workers: 4}
	if mod != nil {
		mod(&opts)
	}
	m, err := mirror.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	r := &running{m: m, reg: reg}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	}
	e.t.Cleanup(r.stop)
	return r
}

// eventually waits for cond, stepping the fake clock so that the
// mirror's timers (backoff, cursor saves) fire.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			e.t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
		e.clock.Step(100 * time.Millisecond)
	}
}

func (e *env) local(ns, name string) *corev1.Event {
	ev, err := e.store.Get(e.ctx, ns, name)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func (e *env) count() int {
	res, err := e.store.List(e.ctx, storage.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(res.Items)
}

// mirrored reports whether the store holds the source's state of ns/name.
func (e *env) mirrored(ns, name string) bool {
	want := e.src.Get(ns, name)
	got := e.local(ns, name)
	return want != nil && got != nil && got.UID == want.UID && got.Count == want.Count && got.Message == want.Message &&
		got.Annotations[mirror.SourceResourceVersionAnnotation] == want.ResourceVersion
}

func srcEvent(ns, name string, count int32) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"},
		Reason:         "BackOff", Message: fmt.Sprintf("back-off %d", count), Type: corev1.EventTypeWarning, Count: count,
		Source: corev1.EventSource{Component: "kubelet"}}
}

func (r *running) metric(t *testing.T, name string, labels ...string) float64 {
	return metricstest.Sum(t, r.reg, name, labels...)
}

// TestSyncAndFollow: the source's events are read with WatchList and
// stored as the source has them (uid, fields, creation time) with the
// source's resourceVersion as annotation and eventsd's own; each count
// update reaches a watcher of the store as a MODIFIED; a deletion in the
// source keeps the event (the default).
func TestSyncAndFollow(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.src.Create(srcEvent("ns", fmt.Sprintf("e%d", i), 1))
	}
	r := e.start(nil)
	e.eventually("the source's 5 events mirrored", func() bool { return e.count() == 5 && e.mirrored("ns", "e4") })
	if e.src.Calls("watchlist") != 1 || e.src.Calls("list") != 0 {
		t.Fatalf("watchlist %d, list %d: want one WatchList", e.src.Calls("watchlist"), e.src.Calls("list"))
	}
	e.eventually("synced", func() bool { return r.m.Check(nil) == nil })
	got, want := e.local("ns", "e0"), e.src.Get("ns", "e0")
	if !got.CreationTimestamp.Equal(&metav1.Time{Time: t0}) || got.Reason != "BackOff" || got.UID != want.UID || got.Source != want.Source {
		t.Fatalf("mirrored event: %+v, source's %+v", got, want)
	}

	w, err := e.store.Watch(e.ctx, storage.WatchOptions{Revision: e.store.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for c := int32(2); c <= 4; c++ {
		ev := e.src.Get("ns", "e0")
		ev.Count, ev.Message = c, fmt.Sprintf("back-off %d", c)
		e.src.Update(ev)
	}
	for c := int32(2); c <= 4; c++ {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Modified || ev.Object.Count != c {
				t.Fatalf("watch: %s count %d, want MODIFIED count %d", ev.Type, ev.Object.Count, c)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no MODIFIED for count %d", c)
		}
	}
	e.src.Delete("ns", "e1")
	e.src.Create(srcEvent("ns", "new", 1))
	e.eventually("the new event mirrored", func() bool { return e.mirrored("ns", "new") })
	if e.local("ns", "e1") == nil {
		t.Fatal("an event the source deleted was deleted here with --source-deletions=keep")
	}
	if n := r.metric(t, "eventsd_mirror_changes_skipped_total", "reason", "deletion-kept"); n != 1 {
		t.Fatalf("deletions kept: %v, want 1", n)
	}
	if n := r.metric(t, "eventsd_mirror_changes_applied_total"); n != 5+3+1 {
		t.Fatalf("changes applied: %v, want 9", n)
	}
}

// TestRestartResumesFromTheCursor: a mirror stopped and started again
// (the store reopened, as after a restart) watches from its saved cursor
// without reading the source's state again; the changes made meanwhile
// are applied, each once; after a crash (no final save) the changes
// after the last save come again and make no new revision.
func TestRestartResumesFromTheCursor(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.src.Create(srcEvent("ns", fmt.Sprintf("e%d", i), 1))
	}
	r := e.start(nil)
	e.eventually("mirrored", func() bool { return e.count() == 3 })
	r.stop()
	e.reopen()

	ev := e.src.Get("ns", "e0")
	ev.Count = 2
	e.src.Update(ev)
	e.src.Create(srcEvent("ns", "e3", 1))
	before := e.store.Revision()
	r = e.start(nil)
	e.eventually("the changes made while away", func() bool { return e.mirrored("ns", "e0") && e.mirrored("ns", "e3") })
	if got := e.src.Calls("watchlist"); got != 1 {
		t.Fatalf("%d WatchLists: the restarted mirror read the source's state again", got)
	}
	if rvs := e.src.WatchResourceVersions(); rvs[len(rvs)-1] != "3" {
		t.Fatalf("the restarted mirror watched from %q, want its cursor 3", rvs[len(rvs)-1])
	}
	if d := e.store.Revision() - before; d != 2 {
		t.Fatalf("%d revisions for 2 changes", d)
	}

	// A crash: the cursor saved a while ago, the changes after it applied.
	// Stopping without the final save is what a kill -9 does; here the
	// store's cursor is put back to an older one by hand.
	r.stop()
	if err := e.store.SaveCursor(e.ctx, "mirror", 3); err != nil {
		t.Fatal(err)
	}
	before = e.store.Revision()
	r = e.start(nil)
	e.src.Create(srcEvent("ns", "e4", 1))
	e.eventually("the change after the crash", func() bool { return e.mirrored("ns", "e4") })
	if d := e.store.Revision() - before; d != 1 {
		t.Fatalf("%d revisions after the crash for 1 new change: changes were applied twice", d)
	}
	// The two changes after the older cursor come again, on other
	// workers than the new one's: each is skipped, in time.
	e.eventually("the 2 changes after the older cursor skipped as applied", func() bool {
		return r.metric(t, "eventsd_mirror_changes_skipped_total", "reason", "applied") == 2
	})
	if d := e.store.Revision() - before; d != 1 {
		t.Fatalf("%d revisions after the crash for 1 new change: changes were applied twice", d)
	}
}

// TestRelistAfterCompaction: the source compacts past the cursor while
// the mirror is stopped; the watch gets 410, the mirror reads the state
// again and reconciles: every event brought up to date, none applied
// twice. Away for 3 h beside a 1 h source TTL, it reports a 2 h gap.
func TestRelistAfterCompaction(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		e.src.Create(srcEvent("ns", fmt.Sprintf("e%d", i), 1))
	}
	r := e.start(nil)
	e.eventually("mirrored", func() bool { return e.count() == 4 })
	e.eventually("the cursor saved", func() bool { c, ok, _ := e.store.Cursor(e.ctx, "mirror"); return ok && c == 4 })
	r.stop()

	ev := e.src.Get("ns", "e0")
	ev.Count = 7
	e.src.Update(ev)
	e.src.Create(srcEvent("ns", "e4", 1))
	e.src.Compact()
	e.clock.Step(3 * time.Hour)
	before := e.store.Revision()
	r = e.start(nil)
	e.eventually("reconciled after 410", func() bool { return e.mirrored("ns", "e0") && e.mirrored("ns", "e4") })
	if n := r.metric(t, "eventsd_mirror_relists_total", "reason", "expired"); n != 1 {
		t.Fatalf("relists after expiry: %v", n)
	}
	if d := e.store.Revision() - before; d != 2 {
		t.Fatalf("%d revisions for the 2 changes the relist found", d)
	}
	gap := r.metric(t, "eventsd_mirror_gap_seconds_total")
	if gap < (2*time.Hour).Seconds() || gap > (2*time.Hour+time.Minute).Seconds() {
		t.Fatalf("gap %vs, want about 2h (3h away, 1h source TTL)", gap)
	}
	e.eventually("synced", func() bool { return r.m.Check(nil) == nil })
}

// TestPropagatedDeletions: with DeletionsPropagate, a deletion in the
// source deletes the event, and one missed while away (the history
// compacted) is found by the relist.
func TestPropagatedDeletions(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.src.Create(srcEvent("ns", fmt.Sprintf("e%d", i), 1))
	}
	prop := func(o *mirror.Options) { o.Deletions = mirror.DeletionsPropagate }
	r := e.start(prop)
	e.eventually("mirrored", func() bool { return e.count() == 3 })
	e.src.Delete("ns", "e0")
	e.eventually("the deletion propagated", func() bool { return e.local("ns", "e0") == nil })
	r.stop()
	e.src.Delete("ns", "e1")
	e.src.Compact()
	r = e.start(prop)
	e.eventually("the deletion missed while away propagated", func() bool { return e.local("ns", "e1") == nil })
	if e.local("ns", "e2") == nil {
		t.Fatal("an event the source still has was deleted")
	}
}

// TestListFallback: a source that refuses WatchList (422) is listed page
// by page, at one resourceVersion, then watched from it.
func TestListFallback(t *testing.T) {
	e := newEnv(t)
	e.src.SetWatchList(false)
	for i := range 7 {
		e.src.Create(srcEvent("ns", fmt.Sprintf("e%d", i), 1))
	}
	r := e.start(func(o *mirror.Options) { o.PageSize = 2 })
	e.eventually("mirrored", func() bool { return e.count() == 7 })
	if n := e.src.Calls("list"); n != 4 {
		t.Fatalf("%d list requests for 7 events in pages of 2", n)
	}
	e.src.Create(srcEvent("ns", "e7", 1))
	e.eventually("the change after the list", func() bool { return e.mirrored("ns", "e7") })
	if rvs := e.src.WatchResourceVersions(); rvs[len(rvs)-1] != "7" {
		t.Fatalf("watched from %q, want the list's 7", rvs[len(rvs)-1])
	}
	e.eventually("synced", func() bool { return r.m.Check(nil) == nil })
}

// TestFailingSource: a source that answers 500 and 429 is tried again
// with backoff; the mirror is not ready until it has read the source,
// and becomes ready once it has; the failures are counted by code. A
// watch the source ends is resumed from where it was.
func TestFailingSource(t *testing.T) {
	e := newEnv(t)
	e.src.Create(srcEvent("ns", "e0", 1))
	e.src.FailNext(apierrors.NewInternalError(errors.New("etcd is down")), apierrors.NewTooManyRequests("slow down", 1), apierrors.NewInternalError(errors.New("still")))
	r := e.start(nil)
	if err := r.m.Check(nil); err == nil {
		t.Fatal("ready before reading the source")
	}
	e.eventually("mirrored despite failures", func() bool { return e.mirrored("ns", "e0") })
	e.eventually("ready", func() bool { return r.m.Check(nil) == nil })
	if n500, n429 := r.metric(t, "eventsd_mirror_source_errors_total", "code", "500"), r.metric(t, "eventsd_mirror_source_errors_total", "code", "429"); n500 != 2 || n429 != 1 {
		t.Fatalf("source errors: %v 500s and %v 429s, want 2 and 1", n500, n429)
	}
	rv := strconv.FormatInt(e.src.Revision(), 10)
	e.src.CloseWatches()
	e.src.Create(srcEvent("ns", "e1", 1))
	e.eventually("mirrored after the watch ended", func() bool { return e.mirrored("ns", "e1") })
	if rvs := e.src.WatchResourceVersions(); rvs[len(rvs)-1] != rv {
		t.Fatalf("resumed from %q, want %s", rvs[len(rvs)-1], rv)
	}
}

// TestStoredHook: Options.Stored is told of each create and update the
// mirror stored (eventsd counts them by retention rule), with the event
// as stored, and of nothing else: a deletion kept is no write.
func TestStoredHook(t *testing.T) {
	e := newEnv(t)
	e.src.Create(srcEvent("ns", "e0", 1))
	e.src.Create(srcEvent("ns", "e1", 1))
	var mu sync.Mutex
	var stored []string
	r := e.start(func(o *mirror.Options) {
		o.Stored = func(ev *corev1.Event) {
			mu.Lock()
			defer mu.Unlock()
			stored = append(stored, fmt.Sprintf("%s/%s count=%d source-rv=%s", ev.Namespace, ev.Name, ev.Count, ev.Annotations[mirror.SourceResourceVersionAnnotation]))
		}
	})
	e.eventually("mirrored", func() bool { return e.mirrored("ns", "e0") && e.mirrored("ns", "e1") })
	ev := e.src.Get("ns", "e0")
	ev.Count = 2
	e.src.Update(ev)
	e.eventually("the update mirrored", func() bool { return e.mirrored("ns", "e0") })
	e.src.Delete("ns", "e1")
	e.eventually("the deletion kept", func() bool {
		return r.metric(t, "eventsd_mirror_changes_skipped_total", "reason", "deletion-kept") == 1
	})
	mu.Lock()
	got := append([]string(nil), stored...)
	mu.Unlock()
	slices.Sort(got)
	e0rv, e1rv := e.src.Get("ns", "e0").ResourceVersion, e.local("ns", "e1").Annotations[mirror.SourceResourceVersionAnnotation]
	if len(got) != 3 || !strings.HasPrefix(got[0], "ns/e0 count=1 ") || got[1] != "ns/e0 count=2 source-rv="+e0rv || got[2] != "ns/e1 count=1 source-rv="+e1rv {
		t.Fatalf("Stored was told of %q; want e0's create and update and e1's create", got)
	}
	if n := r.metric(t, "eventsd_mirror_changes_applied_total"); n != float64(len(got)) {
		t.Fatalf("changes applied %v, Stored told of %d", n, len(got))
	}
}
