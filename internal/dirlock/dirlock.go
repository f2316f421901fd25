// Package dirlock gives one process a directory that a pebble database
// lives in: it takes pebble's LOCK file and records the holder's pid
// beside it, so that a second process opening the directory fails with
// an error that says who holds it. pebblestore's data directory and the
// etcd backend's on-disk index use it.
package dirlock

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

// ErrInUse is wrapped by Lock's error when another process (or another
// user in this process) holds the directory.
var ErrInUse = errors.New("in use by another eventsd")

// Lock takes pebble's lock on dir, creating dir if needed, and records
// this process's pid beside it. what names the directory in errors ("data
// directory", "index directory"). If the lock is held, the error wraps
// ErrInUse and names the lock file and, when it is known, the holder's
// pid. The caller passes the lock to pebble (pebble.Options.Lock) and
// closes it after the database.
func Lock(fs vfs.FS, dir, what string) (*pebble.Lock, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s %s: %w", what, dir, err)
	}
	lockPath := fs.PathJoin(dir, "LOCK")
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		holder := "another process"
		if pid := readOwner(fs, dir); pid != 0 {
			holder = "pid " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("%s %s is %w (lock file %s held by %s; %v)",
			what, dir, ErrInUse, lockPath, holder, err)
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
		return fmt.Errorf("recording the lock holder in %s: %w", dir, err)
	}
	return nil
}
