package mirror_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/storage"
)

// newMirror is a mirror of e's source into e's store, not running.
func (e *env) newMirror(mod func(*mirror.Options)) *mirror.Mirror {
	e.t.Helper()
	opts := mirror.Options{Source: e.src, Store: e.store, Clock: e.clock, Logger: slog.New(slog.DiscardHandler), Workers: 4, SourceID: "https://a.example:6443"}
	if mod != nil {
		mod(&opts)
	}
	m, err := mirror.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// TestCheckStoreLocalEvents: a store holding events written through
// eventsd's own API (no mirror cursor) is refused, saying how many and
// naming one, unless AllowExistingEvents; an empty store is taken, and
// then recognised as this source's even before a cursor is saved.
func TestCheckStoreLocalEvents(t *testing.T) {
	e := newEnv(t)
	if err := e.newMirror(nil).CheckStore(e.ctx); err != nil {
		t.Fatalf("an empty store: %v", err)
	}
	// The mirror stopped before its first cursor: its events are its own.
	if _, err := e.store.Create(e.ctx, srcEvent("ns", "mirrored", 1), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.newMirror(nil).CheckStore(e.ctx); err != nil {
		t.Fatalf("a store holding this source's events, no cursor yet: %v", err)
	}

	e2 := newEnv(t)
	for _, name := range []string{"web-1.manual", "web-2.manual"} {
		if _, err := e2.store.Create(e2.ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}, Reason: "Manual", Type: corev1.EventTypeNormal},
			storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := e2.newMirror(nil).CheckStore(e2.ctx)
	var ee *mirror.ExistingEventsError
	if !errors.As(err, &ee) || !errors.Is(err, mirror.ErrRefused) || ee.OtherSource || ee.Example != "default/web-1.manual" || ee.Events < 1 {
		t.Fatalf("a store holding local events: %#v (%v); want an ExistingEventsError naming default/web-1.manual", ee, err)
	}
	if !strings.Contains(err.Error(), "such as default/web-1.manual") || !strings.Contains(err.Error(), "no mirror wrote") {
		t.Errorf("the refusal says: %v", err)
	}
	// Refused, it recorded nothing: it is refused again.
	if err := e2.newMirror(nil).CheckStore(e2.ctx); !errors.As(err, &ee) {
		t.Errorf("the second check: %v", err)
	}
	allow := func(o *mirror.Options) { o.AllowExistingEvents = true }
	if err := e2.newMirror(allow).CheckStore(e2.ctx); err != nil {
		t.Fatalf("with AllowExistingEvents: %v", err)
	}
	// Allowed once, the store is this source's mirror from then on.
	if err := e2.newMirror(nil).CheckStore(e2.ctx); err != nil {
		t.Errorf("after a start that was allowed: %v", err)
	}
	if e2.local("default", "web-1.manual") == nil {
		t.Error("the local event was removed")
	}
}

// TestCheckStoreOtherSource: a store that mirrors one source refuses a
// mirror of another (its cursor would be resumed on the wrong source);
// allowed, the other's cursor is dropped, so that the new source is read
// from its start, and its events are kept.
func TestCheckStoreOtherSource(t *testing.T) {
	e := newEnv(t)
	e.src.Create(srcEvent("ns", "a", 1))
	if err := e.newMirror(nil).CheckStore(e.ctx); err != nil {
		t.Fatal(err)
	}
	r := e.start(func(o *mirror.Options) { o.SourceID = "https://a.example:6443" })
	e.eventually("a mirrored", func() bool { return e.mirrored("ns", "a") })
	e.eventually("the cursor saved", func() bool {
		_, found, err := e.store.Cursor(e.ctx, "mirror")
		return err == nil && found
	})
	r.stop()

	other := func(o *mirror.Options) { o.SourceID = "https://b.example:6443" }
	err := e.newMirror(other).CheckStore(e.ctx)
	var ee *mirror.ExistingEventsError
	if !errors.As(err, &ee) || !ee.OtherSource || !strings.Contains(err.Error(), "another source") {
		t.Fatalf("a store mirroring another source: %v", err)
	}
	if err := e.newMirror(nil).CheckStore(e.ctx); err != nil {
		t.Fatalf("the same source again: %v", err)
	}
	err = e.newMirror(func(o *mirror.Options) { other(o); o.AllowExistingEvents = true }).CheckStore(e.ctx)
	if err != nil {
		t.Fatalf("another source, allowed: %v", err)
	}
	if c, found, err := e.store.Cursor(e.ctx, "mirror"); err != nil || !found || c != 0 {
		t.Errorf("the other source's cursor after an allowed start: %d %v %v; want it dropped to 0", c, found, err)
	}
	if e.local("ns", "a") == nil {
		t.Error("the other source's events were removed")
	}
	if err := e.newMirror(other).CheckStore(e.ctx); err != nil {
		t.Errorf("the new source after it was allowed: %v", err)
	}
}

// TestCheckSourceRefused: a source CheckSource refuses is never read:
// Run returns the refusal, nothing is listed or stored; a CheckSource
// that fails otherwise is asked again after a backoff, and the mirror
// then runs.
func TestCheckSourceRefused(t *testing.T) {
	e := newEnv(t)
	e.src.Create(srcEvent("ns", "a", 1))
	m := e.newMirror(func(o *mirror.Options) {
		o.CheckSource = func(context.Context) error {
			return errors.Join(mirror.ErrRefused, errors.New("the source is this eventsd"))
		}
	})
	done := make(chan error, 1)
	go func() { done <- m.Run(e.ctx) }()
	var err error
	e.eventually("Run returned", func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, mirror.ErrRefused) || !strings.Contains(err.Error(), "the source is this eventsd") {
		t.Errorf("Run: %v; want the refusal", err)
	}
	if n := e.src.Calls("watchlist") + e.src.Calls("list") + e.src.Calls("watch"); n != 0 || e.count() != 0 {
		t.Errorf("the refused source was read (%d calls) or stored (%d events)", n, e.count())
	}

	var calls atomic.Int32
	e.start(func(o *mirror.Options) {
		o.CheckSource = func(context.Context) error {
			if calls.Add(1) == 1 {
				return errors.New("connection refused")
			}
			return nil
		}
	})
	e.eventually("mirrored after the check failed once", func() bool { return e.mirrored("ns", "a") })
	if calls.Load() != 2 {
		t.Errorf("CheckSource called %d times; want 2 (a failure, then a success)", calls.Load())
	}
}
