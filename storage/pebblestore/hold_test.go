package pebblestore_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestHoldFromCursorsAtOpen: a reopened store holds history after its
// oldest saved cursor until HoldHistory is first called, so that the
// change-log cap does not trim what an exporter is about to resume from
// in the moments before it says so; the call then decides.
func TestHoldFromCursorsAtOpen(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fs := vfs.NewMem()
	opts := pebblestore.Options{Dir: "data", FS: fs, Clock: clk, HistoryMaxEvents: 10, Logger: slog.New(slog.DiscardHandler)}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create := func(s *pebblestore.Store, name string) int64 {
		t.Helper()
		if _, err := s.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Reason: "R"}, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		return s.Revision()
	}
	for i := 0; i < 5; i++ {
		create(s, fmt.Sprintf("before%d", i))
	}
	cursor := create(s, "acked")
	if err := s.SaveCursor(ctx, "slow", cursor); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCursor(ctx, "fast", cursor+30); err != nil {
		t.Fatal(err)
	}
	s.HoldHistory(cursor)
	for i := 0; i < 50; i++ {
		create(s, fmt.Sprintf("e%02d", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	oldest := func() int64 { return s.Stats().OldestRevision }
	step := func() {
		clk.Step(time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		step()
	}
	if o := oldest(); o > cursor+1 {
		t.Fatalf("after a reopen the log was trimmed to %d, past the oldest cursor %d", o, cursor)
	}
	s.HoldHistory(0)
	deadline := time.Now().Add(10 * time.Second)
	for oldest() <= cursor+1 {
		if time.Now().After(deadline) {
			t.Fatalf("released history not trimmed: oldest revision %d", oldest())
		}
		step()
	}
}

// TestBudgetCapsHeldHistory: with a storage budget, a hold no longer
// overrides HistoryMaxEvents, so that a stalled export sink cannot make
// the change log fill the disk; without one it does.
func TestBudgetCapsHeldHistory(t *testing.T) {
	for _, budget := range []int64{0, 1 << 30} {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, HistoryMaxEvents: 10,
			MaxBytes: budget, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s.HoldHistory(1)
		for i := 0; i < 5000; i++ {
			if _, err := s.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("e%04d", i)}, Reason: "R"}, storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 40; i++ {
			clk.Step(time.Minute)
			time.Sleep(5 * time.Millisecond)
		}
		oldest := s.Stats().OldestRevision
		if budget == 0 && oldest > 2 {
			t.Errorf("no budget: the log was trimmed to %d past the hold at 1", oldest)
		}
		if budget > 0 && oldest <= 2 {
			t.Errorf("budget: the held log was kept from %d, beyond HistoryMaxEvents (10) of 5000 changes", oldest)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
