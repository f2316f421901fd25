package lineage

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestEventLearner: the learner feeds the store's events, those stored
// before it started and later ones, to the graph; restarted over the same
// store, it resumes from its cursor.
func TestEventLearner(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := clocktesting.NewFakeClock(t0)
	fs := vfs.NewMem()
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: fs, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	n := 0
	create := func(name, kind, uid, reason, msg string) {
		t.Helper()
		ev := event(kind, "shop", name, uid, reason, msg, t0)
		n++
		ev.Name = fmt.Sprintf("%s.%d", name, n)
		if _, err := store.Create(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("web", "Deployment", "d", "ScalingReplicaSet", "Scaled up replica set web-1 from 0 to 1")
	g := New(Options{Clock: clk})
	var kinds []string
	run := func() (stop func()) {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			RunEventLearner(lctx, EventLearnerOptions{Store: store, Cursors: store, Graph: g, Clock: clk,
				NoteKind: func(_, kind string) { kinds = append(kinds, kind) }})
		}()
		return func() { cancel(); <-done }
	}
	stop := run()
	waitFor(t, func() bool { return len(g.Lookup("ReplicaSet", "shop", "web-1")) == 1 })
	create("web-1", "ReplicaSet", "rs1", "SuccessfulCreate", "Created pod: web-1-a")
	waitFor(t, func() bool { return len(g.Lookup("Pod", "shop", "web-1-a")) == 1 })
	// The cursor is saved on the learner's clock.
	waitFor(t, func() bool {
		clk.Step(time.Second)
		rev, found, _ := store.Cursor(ctx, EventCursor)
		return found && rev == store.Revision()
	})
	stop()
	// Stopped: an event stored meanwhile is learned at the next start.
	create("web-1", "ReplicaSet", "rs1", "SuccessfulCreate", "Created pod: web-1-b")
	stop = run()
	waitFor(t, func() bool { return len(g.Lookup("Pod", "shop", "web-1-b")) == 1 })
	stop()
	if f := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"}); len(f.Members()) != 4 {
		t.Errorf("family %v", f.Names())
	}
	if len(kinds) == 0 {
		t.Error("NoteKind never called")
	}
	has, err := StoreChecker{Store: store}.HasEvents(ctx, &Object{ID: "rs1"})
	if err != nil || !has {
		t.Errorf("HasEvents(rs1) = %v, %v", has, err)
	}
	has, err = StoreChecker{Store: store}.HasEvents(ctx, &Object{ID: NameID("Pod", "shop", "web-1-a"), Kind: "Pod", Namespace: "shop", Name: "web-1-a"})
	if err != nil || has {
		t.Errorf("HasEvents(a Pod without events) = %v, %v", has, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
