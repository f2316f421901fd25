package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/internal/ratelog"
	"github.com/kubevents/kubevents/storage"
	"k8s.io/utils/clock"
)

// logInterval is how often a recurring storage error is logged: pebble
// retries a failing flush many times a second.
const logInterval = 10 * time.Second

// health is what the store knows about its ability to write. It is shared
// with pebble's logger, event listener and cleaner, which exist before the
// Store does.
type health struct {
	dir string
	log *slog.Logger
	lim *ratelog.Limiter

	mu sync.Mutex
	// space: free space was below the reserve at the last check.
	space error
	// background: pebble's last flush or compaction failed; cleared by
	// one that succeeds.
	background error
	// broken: pebble's commit pipeline or manifest failed. Pebble cannot
	// go on writing; writes are refused until a restart, and obsolete files
	// are no longer deleted, so nothing synced is lost.
	broken error
	// readOnly: the store was opened read-only because the disk was full
	// at start.
	readOnly error
}

func newHealth(dir string, log *slog.Logger, clk clock.PassiveClock) *health {
	return &health{dir: dir, log: log, lim: ratelog.New(clk, logInterval)}
}

// err is the reason writes are refused, or nil.
func (h *health) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range []error{h.broken, h.readOnly, h.space, h.background} {
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *health) isBroken() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.broken != nil
}

func (h *health) set(field *error, err error) {
	h.mu.Lock()
	was := *field
	*field = err
	h.mu.Unlock()
	switch {
	case err != nil && was == nil:
		h.log.Error("the store cannot take writes", "err", err)
	case err == nil && was != nil:
		h.log.Info("the store takes writes again", "was", was.Error())
	}
}

// logError logs a recurring error, rate-limited.
func (h *health) logError(msg string, args ...any) {
	if ok, suppressed := h.lim.Allow(); ok {
		h.log.Error(msg, append(args, "component", "pebble", "suppressed", suppressed)...)
	}
}

// unavailable wraps cause as a storage.ErrUnavailable naming the data
// directory; for a full disk, cause is or wraps syscall.ENOSPC.
func (h *health) unavailable(what string, cause error) error {
	return fmt.Errorf("pebblestore: data directory %s: %s: %w: %w", h.dir, what, storage.ErrUnavailable, cause)
}

// diskFull reports whether err is the filesystem being out of space.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || err != nil && strings.Contains(err.Error(), syscall.ENOSPC.Error())
}

// checkSpace records whether the data directory's filesystem has the
// reserve plus need bytes free, and returns the error if not. A
// filesystem that cannot tell is assumed to have room.
func (s *Store) checkSpace(need int) error {
	if s.opts.MinFreeBytes < 0 {
		return nil
	}
	du, err := s.opts.FS.GetDiskUsage(s.opts.Dir)
	if err != nil {
		return nil
	}
	var serr error
	if want := uint64(s.opts.MinFreeBytes) + uint64(need); du.AvailBytes < want {
		serr = s.health.unavailable(fmt.Sprintf("%d bytes free, less than the %d kept free for pebble's flushes and compactions plus the %d to write",
			du.AvailBytes, s.opts.MinFreeBytes, need), syscall.ENOSPC)
	}
	s.health.set(&s.health.space, serr)
	return serr
}

// writable returns why a commit of need bytes must not be attempted now,
// or nil.
func (s *Store) writable(need int) error {
	s.health.mu.Lock()
	err := s.health.broken
	if err == nil {
		err = s.health.readOnly
	}
	if err == nil && diskFull(s.health.background) {
		// A flush failed for want of space: a commit would fill the
		// memtables and stall until one succeeds.
		err = s.health.background
	}
	s.health.mu.Unlock()
	if err != nil {
		return err
	}
	return s.checkSpace(need)
}

// Health implements storage.HealthReporter: nil while the store takes
// writes, otherwise why not (wrapping storage.ErrUnavailable).
func (s *Store) Health() error { return s.health.err() }

// pebbleLogger routes pebble's logs: informational ones at debug level,
// errors rate-limited, and fatal ones, which pebble raises when its commit
// pipeline or manifest fails (a full disk), into the store's broken state
// rather than a panic, so that the process keeps serving reads and can be
// stopped cleanly.
type pebbleLogger struct{ h *health }

// Infof logs at debug level.
func (l pebbleLogger) Infof(format string, args ...any) {
	l.h.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

// Errorf logs at error level, at most once per logInterval.
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.h.logError(fmt.Sprintf(format, args...))
}

// Fatalf marks the store broken: writes are refused until a restart.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	var cause error = messageError{msg: msg}
	if strings.Contains(msg, syscall.ENOSPC.Error()) {
		cause = messageError{msg: msg, errno: syscall.ENOSPC}
	}
	l.h.set(&l.h.broken, l.h.unavailable("pebble failed writing; writes resume once there is room again and the database is reopened", cause))
}

// messageError is an error known by its message (pebble's Fatalf gives
// no error value), wrapping the errno the message reports, if any.
type messageError struct {
	msg   string
	errno error
}

// Error implements error.
func (e messageError) Error() string { return e.msg }

// Unwrap returns the errno.
func (e messageError) Unwrap() error { return e.errno }

// eventListener tracks pebble's background errors for health.
func (h *health) eventListener() *pebble.EventListener {
	clear := func(err error) {
		if err == nil {
			h.mu.Lock()
			was := h.background
			h.background = nil
			h.mu.Unlock()
			if was != nil {
				h.log.Info("pebble's background work succeeds again", "was", was.Error())
			}
		}
	}
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			h.mu.Lock()
			h.background = h.unavailable("pebble's background work failed", err)
			h.mu.Unlock()
			h.logError("pebble background error", "err", err)
		},
		FlushEnd:      func(info pebble.FlushInfo) { clear(info.Err) },
		CompactionEnd: func(info pebble.CompactionInfo) { clear(info.Err) },
	}
}

// keepingFS deletes files unless the store is broken: then pebble's idea
// of which files are obsolete may rest on a manifest that was not written,
// so files are kept for the restart to sort out (pebble's Cleaner cannot be
// implemented outside pebble, so this is done on the filesystem).
type keepingFS struct {
	vfs.FS
	h *health
}

// Remove implements vfs.FS.
func (fs keepingFS) Remove(name string) error {
	if fs.h.isBroken() {
		return nil
	}
	return fs.FS.Remove(name)
}

// RemoveAll implements vfs.FS.
func (fs keepingFS) RemoveAll(name string) error {
	if fs.h.isBroken() {
		return nil
	}
	return fs.FS.RemoveAll(name)
}

// Unwrap returns the wrapped filesystem.
func (fs keepingFS) Unwrap() vfs.FS { return fs.FS }
