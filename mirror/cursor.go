package mirror

import (
	"context"
	"time"

	"github.com/kubevents/kubevents/storage"
)

// finalSaveTimeout bounds the last save of the cursor when the mirror
// stops.
const finalSaveTimeout = 5 * time.Second

// saveCursors saves the applier's cursor, and the time the mirror was
// last caught up, every CursorInterval while they change, and once more
// when ctx ends (unless the store is shared by replicas: a save must then
// be fenced on a leadership that ended with ctx, and the next leader
// re-applies, and skips, what came after the last save).
func (m *Mirror) saveCursors(ctx context.Context, a *applier) {
	t := m.opts.Clock.NewTicker(m.opts.CursorInterval)
	defer t.Stop()
	var saved string
	var savedAt time.Time
	save := func(ctx context.Context) {
		cursor, _ := a.state()
		n, ok := parseRV(cursor)
		if !ok || cursor == saved {
			return
		}
		if err := m.opts.Store.SaveCursor(ctx, cursorName, n); err != nil {
			m.metrics.cursorErrors.Inc()
			if ok, k := m.dropLog.Allow(); ok && ctx.Err() == nil {
				m.log.Warn("saving the mirror's cursor", "err", err, "similarSinceLastLog", k)
			}
			return
		}
		saved = cursor
		m.mu.Lock()
		caughtUp := m.caughtUp
		m.mu.Unlock()
		if caughtUp.After(savedAt) {
			if err := m.opts.Store.SaveCursor(ctx, caughtUpName, caughtUp.Unix()); err == nil {
				savedAt = caughtUp
			}
		}
	}
	for {
		select {
		case <-t.C():
			save(ctx)
		case <-ctx.Done():
			if _, shared := m.opts.Store.(storage.Elector); !shared {
				a.stop() // nothing moves the cursor any more
				fctx, cancel := context.WithTimeout(context.Background(), finalSaveTimeout)
				save(fctx)
				cancel()
			}
			return
		}
	}
}
