package mirror

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/kubevents/kubevents/storage"
)

// sourceIDName is the store cursor holding a hash of Options.SourceID:
// cursors hold numbers, and the hash tells one source from another.
const sourceIDName = "mirror-source"

// ExistingEventsError is CheckStore's refusal of a store that holds
// events the mirror did not write: events of eventsd's own API from
// before it mirrored (no cursor), or a mirror of another source. It wraps
// ErrRefused.
type ExistingEventsError struct {
	// OtherSource: the store holds the cursor of another source than
	// Options.SourceID; otherwise it holds events and no cursor.
	OtherSource bool
	// Events is how many events the store holds, at least (1 when only
	// one was looked at), and Example names one, namespace/name.
	Events  int64
	Example string
}

// Error implements error.
func (e *ExistingEventsError) Error() string {
	if e.OtherSource {
		return "the store already holds the mirror of another source (its cursor is another source's): the events of both would be mixed"
	}
	n := fmt.Sprintf("%d events", e.Events)
	if e.Events == 1 {
		n = "1 event"
	}
	return fmt.Sprintf("the store holds %s (such as %s) that no mirror wrote, eventsd's own: the source's events would be mixed with them", n, e.Example)
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *ExistingEventsError) Unwrap() error { return ErrRefused }

// sourceHash is the number the store keeps for a SourceID: 63 bits of
// its FNV-1a hash, so that it is a positive int64.
func sourceHash(id string) int64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int64(h.Sum64() >> 1)
}

// CheckStore checks, before the mirror runs, that the store is one this
// mirror may write into: one that it already mirrors this source into,
// or one without events. A store holding events but no cursor (events
// written through eventsd's own API before it was made a mirror) or the
// cursor of another source is refused with an *ExistingEventsError,
// unless Options.AllowExistingEvents: then the events are kept beside the
// mirrored ones and another source's cursor is dropped, so that this
// source is read from its start. The source is then recorded in the
// store (Options.SourceID), before anything is mirrored, so that a mirror
// that stops before its first cursor is recognised as this source's. A
// store whose cursor predates the record of its source is taken as this
// source's.
func (m *Mirror) CheckStore(ctx context.Context) error {
	st := m.opts.Store
	_, hasCursor, err := st.Cursor(ctx, cursorName)
	if err != nil {
		return fmt.Errorf("mirror: reading the cursor: %w", err)
	}
	id, hasID, err := st.Cursor(ctx, sourceIDName)
	if err != nil {
		return fmt.Errorf("mirror: reading the source of the cursor: %w", err)
	}
	want := sourceHash(m.opts.SourceID)
	switch {
	case m.opts.SourceID == "":
		// Nothing to compare with; only whether the store holds events
		// of its own matters.
		hasID = hasCursor
	case hasID && id != want:
		if !m.opts.AllowExistingEvents {
			return &ExistingEventsError{OtherSource: true}
		}
		m.log.Warn("the store held the mirror of another source: keeping its events and reading this source from its start")
		if err := st.SaveCursor(ctx, cursorName, 0); err != nil {
			return fmt.Errorf("mirror: dropping the other source's cursor: %w", err)
		}
		if err := st.SaveCursor(ctx, caughtUpName, 0); err != nil {
			return fmt.Errorf("mirror: dropping the other source's cursor: %w", err)
		}
		hasID = false
	}
	if !hasID && !hasCursor {
		res, err := st.List(ctx, storage.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("mirror: looking for events in the store: %w", err)
		}
		if len(res.Items) > 0 {
			n := int64(1)
			if res.RemainingItemCount != nil {
				n += *res.RemainingItemCount
			}
			ev := res.Items[0]
			if !m.opts.AllowExistingEvents {
				return &ExistingEventsError{Events: n, Example: ev.Namespace + "/" + ev.Name}
			}
			m.log.Warn("the store holds events no mirror wrote: keeping them beside the mirrored ones", "events", n)
		}
	}
	if m.opts.SourceID != "" && (!hasID || id != want) {
		if err := st.SaveCursor(ctx, sourceIDName, want); err != nil {
			return fmt.Errorf("mirror: recording the source in the store: %w", err)
		}
	}
	return nil
}
