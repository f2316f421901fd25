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
