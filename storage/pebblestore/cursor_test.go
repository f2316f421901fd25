package pebblestore_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/kubevents/kubevents/storage"
)

// TestDiskFullRefusesCursors: on a full disk SaveCursor is refused as
// writes are (ErrUnavailable for ENOSPC) and changes nothing, Cursor
// still reads, and saves resume once space is freed.
func TestDiskFullRefusesCursors(t *testing.T) {
	fs, clk, s := openOnFullFS(t)
	ctx := context.Background()
	if err := s.SaveCursor(ctx, "sink", 5); err != nil {
		t.Fatal(err)
	}
	fs.leave(1 << 19) // below the reserve
	if err := s.SaveCursor(ctx, "sink", 6); !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: got %v, want ErrUnavailable for ENOSPC", err)
	}
	if got, _, err := s.Cursor(ctx, "sink"); err != nil || got != 5 {
		t.Fatalf("cursor on a full disk: %d, %v; want 5", got, err)
	}
	fs.limit.Store(1 << 40)
	waitHealthy(t, s, clk)
	if err := s.SaveCursor(ctx, "sink", 7); err != nil {
		t.Fatalf("save once space is back: %v", err)
	}
	if got, _, err := s.Cursor(ctx, "sink"); err != nil || got != 7 {
		t.Fatalf("cursor: %d, %v; want 7", got, err)
	}
}
