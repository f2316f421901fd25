package file_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/file"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func records(from, n int) []export.Record {
	var b []export.Record
	for i := from; i < from+n; i++ {
		rev := int64(1000 + i)
		ev := &corev1.Event{
			TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("web-%03d.1", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%03d", i)), ResourceVersion: fmt.Sprint(rev)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("web-%03d", i)},
			Type:           corev1.EventTypeWarning,
			Reason:         "BackOff",
			Message:        "Back-off restarting failed container",
			Count:          3,
			LastTimestamp:  metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)),
		}
		b = append(b, export.Record{Key: export.KeyOf(ev, rev), Type: watch.Modified, Revision: rev, Event: ev})
	}
	return b
}

func lineLen(t *testing.T, r export.Record) int64 {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) + 1)
}

// readLines decodes path's lines; a missing file has none.
func readLines(t *testing.T, path string) []export.Record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []export.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r export.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: line %d %q: %v", path, len(recs)+1, sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func newSink(t *testing.T, cfg file.Config, opts file.Options) *file.Sink {
	t.Helper()
	s, err := file.New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func send(t *testing.T, s *file.Sink, batch []export.Record) {
	t.Helper()
	if err := s.Send(context.Background(), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func TestLinesDecodeAndReopeningAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "events.jsonl")
	s, err := file.New(file.Config{Path: path}, file.Options{})
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, records(0, 3))
	send(t, s, nil)
	send(t, s, records(3, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != file.FileMode {
		t.Errorf("mode %v, want %v", st.Mode().Perm(), file.FileMode)
	}

	s = newSink(t, file.Config{Path: path}, file.Options{})
	send(t, s, records(4, 2))
	if diff := cmp.Diff(records(0, 6), readLines(t, path)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	l := lineLen(t, records(0, 1)[0])
	max := 3*l + l/2 // three lines a file
	s := newSink(t, file.Config{Path: path, MaxSizeBytes: max, MaxBackups: ptr.To(2)}, file.Options{})
	all := records(0, 11)
	send(t, s, all[:4]) // rotates mid-batch
	for _, r := range all[4:] {
		send(t, s, []export.Record{r})
	}
	// 11 lines, 3 a file: 0-2 were rotated out, 3-5 .2, 6-8 .1, 9-10 the file.
	for _, c := range []struct {
		path string
		want []export.Record
	}{
		{path + ".3", nil},
		{path + ".2", all[3:6]},
		{path + ".1", all[6:9]},
		{path, all[9:]},
	} {
		if diff := cmp.Diff(c.want, readLines(t, c.path)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", filepath.Base(c.path), diff)
		}
		if st, err := os.Stat(c.path); err == nil && st.Size() > max {
			t.Errorf("%s has %d bytes, more than %d", filepath.Base(c.path), st.Size(), max)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the directory, want 3", len(entries))
	}
}

func TestRotationWithoutBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	s := newSink(t, file.Config{Path: path, MaxSizeBytes: 10, MaxBackups: ptr.To(0)}, file.Options{})
	send(t, s, records(0, 3)) // each line longer than the limit: a file each
	if diff := cmp.Diff(records(2, 1), readLines(t, path)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files, want 1", len(entries))
	}
}

func TestTornLastLineIsCutOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	good, _ := json.Marshal(records(0, 1)[0])
	if err := os.WriteFile(path, append(append(good, '\n'), `{"idempotencyKey":"uid-9/`...), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, file.Config{Path: path}, file.Options{})
	send(t, s, records(1, 1))
	if diff := cmp.Diff(records(0, 2), readLines(t, path)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	// The file existed: its mode is kept.
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the file's 0600 kept", st.Mode().Perm())
	}
}

func TestForeignFileIsNotCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	const content = "line one\nnot a record, no line break"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := file.New(file.Config{Path: path}, file.Options{})
	if err == nil || !strings.Contains(err.Error(), "not a file of this sink") || !strings.Contains(err.Error(), path) {
		t.Errorf("New on a file of something else: %v, want an error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != content {
		t.Errorf("the file was changed to %q", b)
	}
}

func TestUnwritablePath(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(notDir, "events.jsonl"), "not a directory"},
		{dir, "is a directory"},
	} {
		_, err := file.New(file.Config{Path: c.path}, file.Options{})
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s): %v, want an error naming the path and saying %q", c.path, err, c.want)
		}
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	s := newSink(t, file.Config{Path: path}, file.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Send(ctx, records(0, 2)); !errors.Is(err, context.Canceled) {
		t.Errorf("Send: %v, want context.Canceled", err)
	}
	if recs := readLines(t, path); len(recs) != 0 {
		t.Errorf("%d lines written", len(recs))
	}
}

// faultFS fails the next operation of a kind once.
type faultFS struct {
	file.FS
	write, sync, rename error
	opens               int
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (file.File, error) {
	inner, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.opens++
	return &faultFile{File: inner, fs: f}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.rename; err != nil {
		f.rename = nil
		return err
	}
	return f.FS.Rename(oldpath, newpath)
}

type faultFile struct {
	file.File
	fs *faultFS
}

// Write writes half of b before it fails, as a full disk would.
func (f *faultFile) Write(b []byte) (int, error) {
	if err := f.fs.write; err != nil {
		f.fs.write = nil
		n, _ := f.File.Write(b[:len(b)/2])
		return n, err
	}
	return f.File.Write(b)
}

func (f *faultFile) Sync() error {
	if err := f.fs.sync; err != nil {
		f.fs.sync = nil
		return err
	}
	return f.File.Sync()
}

func TestFailedWriteLeavesNoTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	ffs := &faultFS{FS: file.OS()}
	s := newSink(t, file.Config{Path: path}, file.Options{FS: ffs})
	send(t, s, records(0, 1))
	ffs.write = syscall.ENOSPC
	err := s.Send(context.Background(), records(1, 3))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Send on a full disk: %v, want ENOSPC naming the file", err)
	}
	if diff := cmp.Diff(records(0, 1), readLines(t, path)); diff != "" {
		t.Errorf("after the failed write (-want +got):\n%s", diff)
	}
	send(t, s, records(1, 3))
	if diff := cmp.Diff(records(0, 4), readLines(t, path)); diff != "" {
		t.Errorf("after sending again (-want +got):\n%s", diff)
	}
}

func TestFailedFsyncReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	ffs := &faultFS{FS: file.OS()}
	s := newSink(t, file.Config{Path: path}, file.Options{FS: ffs})
	ffs.sync = syscall.EIO
	if err := s.Send(context.Background(), records(0, 2)); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("Send with a failing fsync: %v, want EIO", err)
	}
	opens := ffs.opens
	send(t, s, records(0, 2))
	if ffs.opens != opens+1 {
		t.Errorf("the file was opened %d times after the failed fsync, want once", ffs.opens-opens)
	}
	// The batch was written before the fsync failed, then again: a
	// duplicate of the unacknowledged batch, as the contract allows.
	if diff := cmp.Diff(append(records(0, 2), records(0, 2)...), readLines(t, path)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestFailedRotationIsRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	ffs := &faultFS{FS: file.OS()}
	l := lineLen(t, records(0, 1)[0])
	s := newSink(t, file.Config{Path: path, MaxSizeBytes: 2*l + l/2}, file.Options{FS: ffs})
	ffs.rename = syscall.EACCES
	if err := s.Send(context.Background(), records(0, 3)); !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), "rotating") {
		t.Fatalf("Send with a failing rename: %v", err)
	}
	send(t, s, records(0, 3))
	got := append(readLines(t, path+".2"), readLines(t, path+".1")...)
	got = append(got, readLines(t, path)...)
	// 0 and 1 were written before the rotation failed; the batch was
	// sent again whole.
	want := append(records(0, 2), records(0, 3)...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines across the files (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   file.Config
		field string
	}{
		{"no path", file.Config{}, "file.path"},
		{"directory", file.Config{Path: "/var/log/"}, "file.path"},
		{"negative size", file.Config{Path: "/x", MaxSizeBytes: -1}, "file.maxSizeBytes"},
		{"negative backups", file.Config{Path: "/x", MaxBackups: ptr.To(-1)}, "file.maxBackups"},
		{"too many backups", file.Config{Path: "/x", MaxBackups: ptr.To(file.MaxMaxBackups + 1)}, "file.maxBackups"},
	}
	for _, c := range cases {
		errs := c.cfg.Validate(field.NewPath("file"))
		if len(errs) != 1 || errs[0].Field != c.field {
			t.Errorf("%s: %v, want one error at %s", c.name, errs, c.field)
		}
		if _, err := file.New(c.cfg, file.Options{}); err == nil {
			t.Errorf("%s: New accepted the config", c.name)
		}
	}
	var cfg file.Config
	if err := yaml.UnmarshalStrict([]byte("path: /var/log/kubevents/events.jsonl\nmaxSizeBytes: 1048576\nmaxBackups: 0\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	want := file.Config{Path: "/var/log/kubevents/events.jsonl", MaxSizeBytes: 1 << 20, MaxBackups: ptr.To(0)}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config from YAML (-want +got):\n%s", diff)
	}
	if errs := cfg.Validate(nil); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
}

// TestLinesCarryTheCluster: a fleet cluster's line carries
// "cluster":"east" before its event; a root cluster's line is as it was
// before fleets, without the field; both read back, and a file with both
// reopens and appends (the torn-line check reads either).
func TestLinesCarryTheCluster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	s := newSink(t, file.Config{Path: path}, file.Options{})
	batch := records(0, 2)
	batch[1].Cluster = "east"
	send(t, s, batch)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), data)
	}
	if strings.Contains(lines[0], `"cluster"`) {
		t.Errorf("the root cluster's line has a cluster field: %s", lines[0])
	}
	if want := `"resourceVersion":"1001","cluster":"east","event":{`; !strings.Contains(lines[1], want) {
		t.Errorf("east's line lacks %s: %s", want, lines[1])
	}
	s = newSink(t, file.Config{Path: path}, file.Options{})
	send(t, s, records(2, 1))
	if diff := cmp.Diff(append(batch, records(2, 1)...), readLines(t, path)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
