package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// The cases of the seams the exporter needs (storage.CursorStore,
// storage.HistoryHolder); a backend without one skips its cases.

func cursorStore(t *testing.T, s storage.Interface) storage.CursorStore {
	t.Helper()
	cs, ok := s.(storage.CursorStore)
	if !ok {
		t.Skip("the backend keeps no cursors")
	}
	return cs
}

// testCursors: a cursor reads back what was saved (0 when none was),
// cursors are independent of each other, and they are not events: not
// listed, watched or counted, and (on a store whose revisions are its
// events') they take no revision.
func testCursors(t *testing.T, h Harness) {
	f := open(t, h, nil)
	cs := cursorStore(t, f.s)
	p := f.probeEvents()
	if got, found, err := cs.Cursor(f.ctx, "sink-a"); err != nil || got != 0 || found {
		t.Fatalf("cursor never saved: got %d, %v, %v; want 0, not found", got, found, err)
	}
	for _, c := range []struct {
		name string
		rev  int64
	}{{"sink-a", 7}, {"sink-b", 3}, {"sink-a", 12}, {"sink-b", 2}} {
		if err := cs.SaveCursor(f.ctx, c.name, c.rev); err != nil {
			t.Fatalf("save %s at %d: %v", c.name, c.rev, err)
		}
		if got, found, err := cs.Cursor(f.ctx, c.name); err != nil || got != c.rev || !found {
			t.Fatalf("cursor %s after saving %d: got %d, %v", c.name, c.rev, got, err)
		}
	}
	if got, _, _ := cs.Cursor(f.ctx, "sink-a"); got != 12 {
		t.Fatalf("sink-a after sink-b's saves: %d, want 12", got)
	}
	for _, bad := range []string{"", "a/b"} {
		if err := cs.SaveCursor(f.ctx, bad, 1); err == nil {
			t.Fatalf("cursor %q saved", bad)
		}
	}
	f.checkNotEvents(h, p, "cursors")
}

// eventsProbe is what checkNotEvents compares with: the store's
// revision and stats, and a watch, from before a case saved what is not
// an event.
type eventsProbe struct {
	w      storage.Watcher
	before int64
	stats  storage.Stats
}

// probeEvents creates the event default/a and starts a watch, for
// checkNotEvents.
func (f *fixture) probeEvents() *eventsProbe {
	f.t.Helper()
	f.create(ev("default", "a"))
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(w.Stop)
	return &eventsProbe{w: w, before: f.s.Revision(), stats: f.s.Stats()}
}

// checkNotEvents checks that what the case saved since probeEvents
// (named by what) is not events: not listed, watched or counted, and, on
// a store whose revisions are its events', it took no revision.
func (f *fixture) checkNotEvents(h Harness, p *eventsProbe, what string) {
	t := f.t
	t.Helper()
	if !h.SharedRevisions && f.s.Revision() != p.before {
		t.Fatalf("saving %s moved the revision from %d to %d", what, p.before, f.s.Revision())
	}
	if st := f.s.Stats(); st.Events != p.stats.Events || st.Events != 1 {
		t.Fatalf("stats report %d events after saving %s, %d before; want 1", st.Events, what, p.stats.Events)
	}
	res, err := f.s.List(f.ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "list after saving "+what, names(res.Items), []string{"default/a"})
	b := f.create(ev("default", "b"))
	if !h.SharedRevisions && rev(t, b) != p.before+1 {
		t.Fatalf("the event after the %s got revision %d, want %d", what, rev(t, b), p.before+1)
	}
	expect(t, p.w, watch.Added, "b") // and nothing for what was saved before it
	expectNone(t, p.w)
}

// testCursorsReopen: a saved cursor survives closing and reopening the
// store over the same data.
func testCursorsReopen(t *testing.T, h Harness) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	dir := t.TempDir()
	ctx := context.Background()
	s := h.Open(t, dir, opts)
	cs := cursorStore(t, s)
	if _, err := s.Create(ctx, ev("default", "a"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := s.Revision()
	if err := cs.SaveCursor(ctx, "sink", want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cs.SaveCursor(ctx, "sink", want+1); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("save after close: got %v, want ErrClosed", err)
	}
	if _, _, err := cs.Cursor(ctx, "sink"); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("read after close: got %v, want ErrClosed", err)
	}
	s = h.Open(t, dir, opts)
	defer s.Close()
	if got, _, err := s.(storage.CursorStore).Cursor(ctx, "sink"); err != nil || got != want {
		t.Fatalf("cursor after reopen: %d, %v; want %d", got, err, want)
	}
}

// testHoldHistory: a hold keeps the changes after its revision for a
// watch to resume from, past the history window and the cap on kept
// changes, until they are older than MaxHistoryHold; then they go.
func testHoldHistory(t *testing.T, h Harness) {
	const maxHold = time.Hour
	f := open(t, h, func(o *Options) { o.HistoryMaxEvents = 10; o.MaxHistoryHold = maxHold })
	hh, ok := f.s.(storage.HistoryHolder)
	if !ok {
		t.Skip("the backend cannot hold history")
	}
	for i := 0; i < 20; i++ {
		f.create(ev("default", fmt.Sprintf("before%02d", i)))
	}
	held := rev(t, f.create(ev("default", "held")))
	hh.HoldHistory(held)
	const n = 100
	for i := 0; i < n; i++ {
		f.create(ev("default", fmt.Sprintf("e%03d", i)))
	}
	written := f.clock.Now()
	oldest := func() int64 { return f.s.Stats().OldestRevision }
	// History is trimmed up to the hold, and no further, however long
	// the history window and the cap would have it go.
	deadline := time.Now().Add(20 * time.Second)
	for oldest() < held+1 {
		if time.Now().After(deadline) {
			t.Fatalf("history not trimmed up to the hold: oldest revision %d, held %d", oldest(), held)
		}
		f.clock.Step(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		f.clock.Step(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	if o := oldest(); o != held+1 {
		t.Fatalf("oldest revision %d %v after the writes, want %d: the hold at %d was not kept", o, f.clock.Since(written), held+1, held)
	}
	w, err := f.s.Watch(f.ctx, storage.WatchOptions{Revision: held})
	if err != nil {
		t.Fatal(err)
	}
	last := held
	for i := 0; i < n; i++ {
		e := expect(t, w, watch.Added, fmt.Sprintf("e%03d", i))
		if e.Revision <= last || (!h.SharedRevisions && e.Revision != last+1) {
			t.Fatalf("change %d at revision %d after %d", i, e.Revision, last)
		}
		last = e.Revision
	}
	w.Stop()
	// Past MaxHistoryHold the held changes go.
	deadline = time.Now().Add(30 * time.Second)
	for oldest() <= held+1 {
		if time.Now().After(deadline) || f.clock.Since(written) > 2*maxHold {
			t.Fatalf("history still held %v after it was written: oldest revision %d", f.clock.Since(written), oldest())
		}
		f.clock.Step(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	if age := f.clock.Since(written); age < maxHold {
		t.Fatalf("held history trimmed %v after it was written, before MaxHistoryHold (%v)", age, maxHold)
	}
	w, err = f.s.Watch(f.ctx, storage.WatchOptions{Revision: held})
	if err == nil {
		e := recv(t, w)
		w.Stop()
		err = e.Err
	}
	if !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("watch from the hold past MaxHistoryHold: got %v, want ErrCompacted", err)
	}
}
