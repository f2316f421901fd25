package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/internal/dirlock"
)

// ErrDirInUse is returned by Open when another process (or another Store
// in this process) has the data directory open.
var ErrDirInUse = dirlock.ErrInUse

// lockDir takes pebble's lock on dir, creating dir if needed, and records
// this process's pid beside it (internal/dirlock). If the lock is held,
// the error names the lock file and, when it is known, the holder's pid.
func lockDir(fs vfs.FS, dir string) (*pebble.Lock, error) {
	return dirlock.Lock(fs, dir, "data directory")
}
