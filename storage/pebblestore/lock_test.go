package pebblestore_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/storage/pebblestore"
)

// TestSecondOpenNamesTheHolder: opening a data directory that is open
// already fails with an error naming the directory, the lock file and the
// pid holding it; once the first store closes, the directory opens.
func TestSecondOpenNamesTheHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "eventsd-data")
	opts := pebblestore.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pebblestore.Open(opts)
	if !errors.Is(err, pebblestore.ErrDirInUse) {
		t.Fatalf("second open: got %v, want ErrDirInUse", err)
	}
	for _, want := range []string{"data directory " + dir + " is in use by another eventsd", filepath.Join(dir, "LOCK"), fmt.Sprintf("held by pid %d", os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second open: %q does not say %q", err, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseAndRemove: a store closed and removed with the directory a
// failed start created (a parent of its data directory) leaves nothing
// behind and logs nothing (it saves nothing into the directory it
// removes), while holding the lock until the directory is gone: another
// store opens the same path afresh afterwards. A directory that does not
// hold the data directory is refused, and the store stays open.
func TestCloseAndRemove(t *testing.T) {
	base := t.TempDir()
	created := filepath.Join(base, "new")
	dir := filepath.Join(created, "data")
	var logs strings.Builder
	opts := pebblestore.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := pebblestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CloseAndRemove(filepath.Join(base, "elsewhere")); err == nil || !strings.Contains(err.Error(), "is neither the data directory") {
		t.Errorf("CloseAndRemove of a directory beside the data directory: %v", err)
	}
	if _, err := pebblestore.Open(opts); !errors.Is(err, pebblestore.ErrDirInUse) {
		t.Errorf("the store is not open (locked) after a refused CloseAndRemove: %v", err)
	}
	if err := s.CloseAndRemove(created); err != nil {
		t.Fatalf("CloseAndRemove: %v", err)
	}
	if _, err := os.Stat(created); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after CloseAndRemove: %v", created, err)
	}
	if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("CloseAndRemove logged:\n%s", logs.String())
	}
	s, err = pebblestore.Open(opts)
	if err != nil {
		t.Fatalf("open after CloseAndRemove: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
