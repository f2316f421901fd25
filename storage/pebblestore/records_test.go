package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/kubevents/kubevents/storage/storagetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestCrashKeepsSavedRecords: records whose SaveRecords returned survive
// power loss, saved amid concurrent writes (they share their synced
// batches), and none of those writes is lost for them. The restart after
// the crash rebuilds the key presence set (none was saved), which must
// not take the records for events.
func TestCrashKeepsSavedRecords(t *testing.T) {
	fs, s := openCrashable(t)
	ctx := context.Background()
	const n = 200
	wait := createConcurrently(t, s, n)
	saved := map[string]string{}
	for i := 0; i < 50; i++ {
		writes := []storage.RecordWrite{
			{Key: fmt.Sprintf("uid-%d", i), Value: []byte(fmt.Sprint(i))},
			{Key: fmt.Sprintf("uid-%d", i%7), Value: nil},
		}
		if i%7 == i {
			writes = writes[1:]
		}
		if err := s.SaveRecords(ctx, "lineage", writes); err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			if w.Value == nil {
				delete(saved, w.Key)
			} else {
				saved[w.Key] = string(w.Value)
			}
		}
	}
	wait()
	s2 := crashAndReopen(t, fs, s, n)
	if got := storagetest.RecordsOf(t, context.Background(), s2, "lineage"); fmt.Sprint(got) != fmt.Sprint(saved) {
		t.Fatalf("records after the crash: %v, want %v", got, saved)
	}
	// The rebuilt presence set still finds every event (a create of one
	// is refused), and the records' keys do not stand for any.
	if _, err := s2.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e000"}}, storage.WriteOptions{}); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("create of an existing event after the crash: %v, want ErrExists", err)
	}
}

// TestDiskFullRefusesRecords: on a full disk SaveRecords is refused as
// writes are (ErrUnavailable for ENOSPC) and changes nothing, Records
// still reads, and saves resume once space is freed.
func TestDiskFullRefusesRecords(t *testing.T) {
	fs, clk, s := openOnFullFS(t)
	ctx := context.Background()
	if err := s.SaveRecords(ctx, "lineage", []storage.RecordWrite{{Key: "a", Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	fs.leave(1 << 19) // below the reserve
	err := s.SaveRecords(ctx, "lineage", []storage.RecordWrite{{Key: "a", Value: []byte("2")}, {Key: "b", Value: []byte("2")}})
	if !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: got %v, want ErrUnavailable for ENOSPC", err)
	}
	if got := storagetest.RecordsOf(t, context.Background(), s, "lineage"); fmt.Sprint(got) != "map[a:1]" {
		t.Fatalf("records on a full disk: %v, want a:1 only", got)
	}
	fs.limit.Store(1 << 40)
	waitHealthy(t, s, clk)
	if err := s.SaveRecords(ctx, "lineage", []storage.RecordWrite{{Key: "a", Value: []byte("3")}}); err != nil {
		t.Fatalf("save once space is back: %v", err)
	}
	if got := storagetest.RecordsOf(t, context.Background(), s, "lineage"); fmt.Sprint(got) != "map[a:3]" {
		t.Fatalf("records: %v, want a:3", got)
	}
}

// TestRecordsOutliveExpiry: TTL expiry deletes every event and leaves the
// records alone.
func TestRecordsOutliveExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), Clock: clk, DefaultTTL: time.Minute, ExpiryInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		if _, err := s.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("e%d", i)}}, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveRecords(ctx, "lineage", []storage.RecordWrite{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Events > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events left long after their TTL", s.Stats().Events)
		}
		clk.Step(time.Minute)
		time.Sleep(10 * time.Millisecond)
	}
	if got := storagetest.RecordsOf(t, context.Background(), s, "lineage"); fmt.Sprint(got) != "map[a:1 b:2]" {
		t.Fatalf("records after every event expired: %v, want a:1 b:2", got)
	}
}
