package pebblestore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCrashKeepsAcknowledgedWrites simulates power loss: the filesystem
// keeps only what was synced. Every write the store acknowledged must be
// there after recovery, and the revision must not go backwards.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("e%03d", i)
			_, err := s.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Reason: "R"}, storage.WriteOptions{})
			if err == nil {
				mu.Lock()
				acked[name] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rev := s.Revision()
	// Crash: clone only synced data, before Close could flush anything.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(acked) != n {
		t.Fatalf("%d of %d creates acknowledged", len(acked), n)
	}
	s2, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: crashed, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	res, err := s2.List(ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Items {
		delete(acked, e.Name)
	}
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged writes lost in the crash: %v", len(acked), acked)
	}
	if s2.Revision() != rev {
		t.Fatalf("revision after crash %d, before %d", s2.Revision(), rev)
	}
}

// openCrashable opens a store in "data" on an in-memory filesystem that
// crash clones as after power loss.
func openCrashable(t *testing.T) (*vfs.MemFS, *pebblestore.Store) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return fs, s
}

// createConcurrently starts n creates of events default/e000... at once;
// wait waits for them to return.
func createConcurrently(t *testing.T, s storage.Interface, n int) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("e%03d", i)}, Reason: "R"}, storage.WriteOptions{}); err != nil {
				t.Error(err)
			}
		}()
	}
	return wg.Wait
}

// crashAndReopen keeps only what s synced to fs, as power loss would,
// closes s and opens a store on what was kept; it checks that the store
// holds n events at the revision s had.
func crashAndReopen(t *testing.T, fs *vfs.MemFS, s *pebblestore.Store, n int64) *pebblestore.Store {
	t.Helper()
	rev := s.Revision()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: crashed, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	if s2.Revision() != rev || s2.Stats().Events != n {
		t.Fatalf("after the crash: revision %d (was %d), %d events (want %d)", s2.Revision(), rev, s2.Stats().Events, n)
	}
	return s2
}

// TestCrashKeepsSavedCursors: a cursor whose SaveCursor returned survives
// power loss, saved amid concurrent writes (it shares their synced
// batches), and none of those writes is lost or reordered for it.
func TestCrashKeepsSavedCursors(t *testing.T) {
	fs, s := openCrashable(t)
	ctx := context.Background()
	const n = 200
	wait := createConcurrently(t, s, n)
	saved := map[string]int64{}
	for i := int64(1); i <= 50; i++ {
		name := fmt.Sprintf("sink-%d", i%3)
		if err := s.SaveCursor(ctx, name, i); err != nil {
			t.Fatal(err)
		}
		saved[name] = i
	}
	wait()
	s2 := crashAndReopen(t, fs, s, n)
	for name, want := range saved {
		if got, _, err := s2.Cursor(ctx, name); err != nil || got != want {
			t.Fatalf("cursor %s after the crash: %d, %v; want %d", name, got, err, want)
		}
	}
}
