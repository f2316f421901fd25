package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fullFS is an in-memory filesystem of limited size: a write that would
// take the bytes of the files under dir beyond limit fails with ENOSPC,
// and GetDiskUsage reports what is left.
type fullFS struct {
	vfs.FS
	dir   string
	limit atomic.Int64
	full  atomic.Int64 // writes refused
}

func newFullFS(dir string) *fullFS {
	fs := &fullFS{FS: vfs.NewMem(), dir: dir}
	fs.limit.Store(1 << 40)
	return fs
}

func (fs *fullFS) used() int64 {
	names, _ := fs.FS.List(fs.dir)
	var n int64
	for _, name := range names {
		if st, err := fs.FS.Stat(fs.FS.PathJoin(fs.dir, name)); err == nil && !st.IsDir() {
			n += st.Size()
		}
	}
	return n
}

// leave sets the limit so that n more bytes fit.
func (fs *fullFS) leave(n int64) { fs.limit.Store(fs.used() + n) }

func (fs *fullFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	avail := max(fs.limit.Load()-fs.used(), 0)
	return vfs.DiskUsage{AvailBytes: uint64(avail), TotalBytes: uint64(fs.limit.Load()), UsedBytes: uint64(fs.used())}, nil
}

func (fs *fullFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &fullFile{File: f, fs: fs, name: name}, nil
}

func (fs *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, name, err)
}

func (fs *fullFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(f, newname, err)
}

func (fs *fullFS) Unwrap() vfs.FS { return fs.FS }

type fullFile struct {
	vfs.File
	fs   *fullFS
	name string
}

func (f *fullFile) check(n int) error {
	if f.fs.used()+int64(n) > f.fs.limit.Load() {
		f.fs.full.Add(1)
		return &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return nil
}

func (f *fullFile) Write(p []byte) (int, error) {
	if err := f.check(len(p)); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check(len(p)); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// fillUntilRefused creates events from several writers until each has
// had a write refused, and returns the acknowledged names and the errors.
func fillUntilRefused(t *testing.T, s storage.Interface, prefix string) (acked []string, refusals []error) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	msg := strings.Repeat("m", 2000)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100_000; i++ {
				name := fmt.Sprintf("%s-%d-%06d", prefix, w, i)
				_, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Message: msg}, storage.WriteOptions{})
				mu.Lock()
				if err != nil {
					refusals = append(refusals, err)
				} else {
					acked = append(acked, name)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return acked, refusals
}

// waitHealthy steps the clock until the store's maintenance notices it can
// write again.
// openOnFullFS opens a store in "data" on a fullFS (of unlimited size
// until its limit is set) with a reserve of 1 MiB, on a fake clock.
func openOnFullFS(t *testing.T) (*fullFS, *clocktesting.FakeClock, *pebblestore.Store) {
	t.Helper()
	fs := newFullFS("data")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: fs, Clock: clk, MinFreeBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return fs, clk, s
}

func waitHealthy(t *testing.T, s *pebblestore.Store, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("health after freeing space: %v", s.Health())
		}
		clk.Step(time.Second)
		time.Sleep(10 * time.Millisecond)
	}
}

func checkAcked(t *testing.T, s storage.Interface, acked []string) {
	t.Helper()
	res, err := s.List(context.Background(), storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range res.Items {
		have[e.Name] = true
	}
	for _, n := range acked {
		if !have[n] {
			t.Fatalf("acknowledged event %s lost (%d stored, %d acknowledged)", n, len(res.Items), len(acked))
		}
	}
}

// TestDiskFullRefusesWritesAndRecovers fills the filesystem: writes are
// refused with ErrUnavailable naming the store and the full disk before
// pebble sees them, the store reports itself unhealthy, reads and watches
// go on, and once space is freed, health and writes come back by
// themselves; nothing acknowledged is lost, across a reopen too.
func TestDiskFullRefusesWritesAndRecovers(t *testing.T) {
	fs := newFullFS("data")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := pebblestore.Options{Dir: "data", FS: fs, Clock: clk, MinFreeBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	w, err := s.Watch(context.Background(), storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fs.leave(3 << 20)
	acked, refusals := fillUntilRefused(t, s, "a")
	if len(acked) == 0 || len(refusals) == 0 {
		t.Fatalf("%d acknowledged, %d refused", len(acked), len(refusals))
	}
	for _, err := range refusals {
		if !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) ||
			!strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "data directory data") {
			t.Fatalf("refusal %q: want ErrUnavailable for a full disk naming the data directory", err)
		}
	}
	if fs.full.Load() != 0 {
		t.Fatalf("pebble met %d failed writes; the store should have refused first", fs.full.Load())
	}
	if err := s.Health(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("health on a full disk: %v", err)
	}
	// Reads and watches go on.
	checkAcked(t, s, acked)
	for range acked {
		if e := <-w.ResultChan(); e.Err != nil {
			t.Fatalf("watch on a full disk: %v", e.Err)
		}
	}
	// Space comes back: health recovers without a write (on the next
	// maintenance tick), then writes succeed.
	fs.limit.Store(1 << 40)
	waitHealthy(t, s, clk)
	if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after"}}, storage.WriteOptions{}); err != nil {
		t.Fatalf("create after freeing space: %v", err)
	}
	acked = append(acked, "after")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	checkAcked(t, s, acked)
}

// TestLogWriteFailureNeitherPanicsNorLoses: with no free-space check, the
// disk fills under pebble's log. The process must not panic: the failed
// group is refused with ErrUnavailable, later writes too (pebble cannot
// go on), reads go on; once space is freed the store reopens its database
// by itself and takes writes, and every acknowledged write is there, also
// after a reopen.
func TestLogWriteFailureNeitherPanicsNorLoses(t *testing.T) {
	fs := newFullFS("data")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := pebblestore.Options{Dir: "data", FS: fs, Clock: clk, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	fs.leave(1 << 20)
	acked, refusals := fillUntilRefused(t, s, "b")
	if fs.full.Load() == 0 || len(refusals) == 0 {
		t.Fatalf("no write failed: %d acknowledged", len(acked))
	}
	for _, err := range refusals {
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("refusal %v: want ErrUnavailable", err)
		}
	}
	t.Logf("%d acknowledged; first refusal: %v", len(acked), refusals[0])
	checkAcked(t, s, acked)
	if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "later"}}, storage.WriteOptions{}); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("create after the failure: %v", err)
	}
	// Space comes back: the store reopens its database by itself.
	fs.limit.Store(1 << 40)
	waitHealthy(t, s, clk)
	if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "later"}}, storage.WriteOptions{}); err != nil {
		t.Fatalf("create after freeing space: %v", err)
	}
	acked = append(acked, "later")
	checkAcked(t, s, acked)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAcked(t, s, acked)
}

// TestStartOnFullDisk: a store opened on a full disk serves reads, refuses
// writes with ErrUnavailable and reports itself unhealthy, until space is
// freed: then it reopens read-write by itself.
func TestStartOnFullDisk(t *testing.T) {
	fs := newFullFS("data")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := pebblestore.Options{Dir: "data", FS: fs, Clock: clk, MinFreeBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "before"}}, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fs.leave(100 << 10)
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer s.Close()
	checkAcked(t, s, []string{"before"})
	if err := s.Health(); !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("health: %v", err)
	}
	_, err = s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after"}}, storage.WriteOptions{})
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("create on a full disk: %v", err)
	}
	if fs.full.Load() != 0 {
		t.Fatalf("%d writes failed under pebble", fs.full.Load())
	}
	w, err := s.Watch(context.Background(), storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Space comes back: the store reopens read-write by itself, and the
	// watch started before goes on.
	fs.limit.Store(1 << 40)
	waitHealthy(t, s, clk)
	if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after"}}, storage.WriteOptions{}); err != nil {
		t.Fatalf("create after freeing space: %v", err)
	}
	checkAcked(t, s, []string{"before", "after"})
	select {
	case e := <-w.ResultChan():
		if e.Err != nil || e.Object == nil || e.Object.Name != "after" {
			t.Fatalf("watch across the reopen: %s %v %v", e.Type, e.Object, e.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch across the reopen: no event")
	}
}

// sstFullFS fails writes to sstables with ENOSPC while failing is set, so
// that pebble's flushes fail while its log writes succeed.
type sstFullFS struct {
	vfs.FS
	failing atomic.Bool
}

func (fs *sstFullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &sstFile{File: f, fs: fs, name: name}, nil
}

func (fs *sstFullFS) Unwrap() vfs.FS { return fs.FS }

type sstFile struct {
	vfs.File
	fs   *sstFullFS
	name string
}

func (f *sstFile) Write(p []byte) (int, error) {
	if f.fs.failing.Load() {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// TestFailingFlushRefusesWritesInsteadOfStalling: when pebble's flush
// fails for want of space, writes are refused (rather than filling the
// memtables and hanging) and the store reports itself unhealthy; when
// flushes succeed again, so do writes, and nothing acknowledged is lost.
func TestFailingFlushRefusesWritesInsteadOfStalling(t *testing.T) {
	fs := &sstFullFS{FS: vfs.NewMem()}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := pebblestore.Options{Dir: "data", FS: fs, Clock: clk, MemTableBytes: 1 << 20, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	fs.failing.Store(true)
	done := make(chan struct{})
	var acked []string
	var refusals []error
	go func() {
		defer close(done)
		acked, refusals = fillUntilRefused(t, s, "c")
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("writes hang while flushes fail")
	}
	if len(refusals) == 0 || !errors.Is(refusals[0], storage.ErrUnavailable) || !errors.Is(refusals[0], syscall.ENOSPC) {
		t.Fatalf("refusals while flushes fail: %v", refusals)
	}
	t.Logf("%d acknowledged; then %v", len(acked), refusals[0])
	if err := s.Health(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("health while flushes fail: %v", err)
	}
	checkAcked(t, s, acked)
	fs.failing.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for s.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("health after flushes can succeed: %v", s.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after"}}, storage.WriteOptions{}); err != nil {
		t.Fatalf("create after flushes recovered: %v", err)
	}
	acked = append(acked, "after")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	checkAcked(t, s, acked)
}
