package pebblestore

import (
	"errors"
	"time"
)

// reopenWait bounds how long a reopen waits for readers to release their
// snapshots of the old database; past it, the reopen is tried again on a
// later maintenance tick.
const reopenWait = 5 * time.Second

// errReadersBusy: a reopen found snapshots still in use.
var errReadersBusy = errors.New("pebblestore: readers still use the database; reopening later")

// needsReopen: the database was opened read-only on a full disk, or
// pebble failed writing; only reopening it lets writes resume.
func (h *health) needsReopen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.broken != nil || h.readOnly != nil
}

// reopen closes and reopens the database once there is room again, so
// that writes resume by themselves after a full disk: a read-only start,
// or pebble's failed log write, leave a database that cannot write. It
// runs on the committer, the only writer, waits (up to reopenWait) for
// readers to release their snapshots (new readers wait meanwhile), drops
// the snapshots kept for continue tokens (their tokens get 410, as after a
// restart), and recovers the committer's state from the reopened
// database, whose log may hold writes that were refused but had reached
// it. Watchers read changes from the log from there on.
func (s *Store) reopen() error {
	if !s.health.needsReopen() {
		return nil
	}
	if err := s.checkSpace(0); err != nil {
		return err
	}
	if !s.quiesceViews() {
		return errReadersBusy
	}
	s.dbMu.Lock()
	if err := s.db.Close(); err != nil {
		s.log.Warn("closing the database to reopen it", "err", err)
	}
	s.health.mu.Lock()
	s.health.broken = nil // the new database's own failures set it again
	s.health.mu.Unlock()
	db, err := s.openDB()
	s.db = db // nil if it failed: the store is broken
	s.dbMu.Unlock()
	if err == nil {
		err = s.loadState()
	}
	s.viewMu.Lock()
	if err == nil {
		s.view, s.namespaces = s.newViewLocked(s.rev), s.loadedNamespaces
	} else {
		s.health.set(&s.health.broken, s.health.unavailable("reopening the database failed; restart eventsd", err))
	}
	s.swapping = false
	s.viewCond.Broadcast()
	s.viewMu.Unlock()
	s.hub.reset(s.rev)
	if err == nil {
		s.log.Info("database reopened", "revision", s.rev, "readOnly", s.popts.ReadOnly)
	}
	return err
}

// quiesceViews stops handing out views and waits until none of the
// current database is open. If that takes longer than reopenWait it hands
// out views again and reports false.
func (s *Store) quiesceViews() bool {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	s.swapping = true
	for rev, v := range s.retained {
		delete(s.retained, rev)
		s.unrefLocked(v)
	}
	cur := s.view
	s.view = nil
	if cur != nil {
		s.unrefLocked(cur)
	}
	t := s.clock.NewTimer(reopenWait)
	defer t.Stop()
	timedOut := false
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-t.C():
			s.viewMu.Lock()
			timedOut = true
			s.viewCond.Broadcast()
			s.viewMu.Unlock()
		case <-stop:
		}
	}()
	for s.live > 0 && !timedOut {
		s.viewCond.Wait()
	}
	if s.live > 0 {
		s.view = s.newViewLocked(s.durableRev.Load())
		s.swapping = false
		s.viewCond.Broadcast()
		return false
	}
	return true
}

// reset empties the ring after a reopen: the reopened database may hold
// changes the ring never had, so watchers read them from the log.
func (h *hub) reset(rev int64) {
	h.mu.Lock()
	clear(h.ring)
	h.n, h.bytes, h.lastRev = 0, 0, rev
	close(h.notify)
	h.notify = make(chan struct{})
	h.mu.Unlock()
}
