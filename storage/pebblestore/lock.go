package pebblestore

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ownerFile, beside pebble's LOCK file, holds the pid of the process that
// holds the lock, so that a second process can say who it is.
const ownerFile = "LOCK.owner"

// ErrDirInUse is returned by Open when another process (or another Store
// in this process) has the data directory open.
var ErrDirInUse = errors.New("in use by another eventsd")

// lockDir takes pebble's lock on dir, creating dir if needed, and records
// this process's pid beside it. If the lock is held, the error names the
// lock file and, when it is known, the holder's pid.
func lockDir(fs vfs.FS, dir string) (*pebble.Lock, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebblestore: creating %s: %w", dir, err)
	}
	lockPath := fs.PathJoin(dir, "LOCK")
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		holder := "another process"
		if pid := readOwner(fs, dir); pid != 0 {
			holder = "pid " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("data directory %s is %w (lock file %s held by %s; %v)",
			dir, ErrDirInUse, lockPath, holder, err)
	}
	if err := writeOwner(fs, dir); err != nil {
		lock.Close()
		return nil, err
	}
	return lock, nil
}

func readOwner(fs vfs.FS, dir string) int {
	f, err := fs.Open(fs.PathJoin(dir, ownerFile))
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 32)
	n, _ := f.Read(buf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}

func writeOwner(fs vfs.FS, dir string) error {
	f, err := fs.Create(fs.PathJoin(dir, ownerFile), vfs.WriteCategoryUnspecified)
	if err == nil {
		if _, err = f.Write([]byte(strconv.Itoa(os.Getpid()) + "\n")); err == nil {
			err = f.Close()
		} else {
			f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("pebblestore: recording the lock holder in %s: %w", dir, err)
	}
	return nil
}
