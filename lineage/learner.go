package lineage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// EventCursor is the CursorStore name under which the event learner
// keeps the revision of the last stored change it learned from.
const EventCursor = "lineage-events"

// learnerRetry is how long the event learner waits before watching the
// store again after a failure.
const learnerRetry = time.Second

// EventLearnerOptions configure RunEventLearner.
type EventLearnerOptions struct {
	// Store is watched for every change of every event.
	Store storage.Interface
	// Cursors keeps the learner's position, so that a restart resumes
	// where it was instead of reading every stored event again; nil
	// reads them all at each start.
	Cursors storage.CursorStore
	// Graph learns from each event (ObserveEvent).
	Graph *Graph
	// NoteKind, when set, is told the apiVersion and kind of each event's
	// regarding and related objects (a metadata follower starts following
	// kinds as events name them).
	NoteKind func(apiVersion, kind string)
	// Clock drives the cursor's saving; Log receives failures.
	Clock clock.WithTicker
	Log   *slog.Logger
}

// RunEventLearner feeds every event the store keeps, and every later
// change, to the graph until ctx ends. Its cursor is saved once a second,
// after the graph has saved what the events taught it, so that after a
// crash the learner reads again at most what it may have lost. A cursor
// the store's history no longer reaches (a long stop) reads the stored
// events again, from the start.
func RunEventLearner(ctx context.Context, opts EventLearnerOptions) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	for ctx.Err() == nil {
		err := learnOnce(ctx, &opts)
		if ctx.Err() != nil {
			return
		}
		opts.Log.Warn("lineage: learning from events again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-opts.Clock.After(learnerRetry):
		}
	}
}

// learnOnce runs one watch of the store until it fails or ctx ends.
func learnOnce(ctx context.Context, opts *EventLearnerOptions) error {
	wo := storage.WatchOptions{SendInitialEvents: true, InitialEventsEndBookmark: true}
	if opts.Cursors != nil {
		rev, found, err := opts.Cursors.Cursor(ctx, EventCursor)
		if err != nil {
			return fmt.Errorf("reading the cursor: %w", err)
		}
		if found {
			wo = storage.WatchOptions{Revision: rev, FromOrigin: rev == 0}
		}
	}
	w, err := opts.Store.Watch(ctx, wo)
	if errors.Is(err, storage.ErrCompacted) {
		wo = storage.WatchOptions{SendInitialEvents: true, InitialEventsEndBookmark: true}
		w, err = opts.Store.Watch(ctx, wo)
	}
	if err != nil {
		return fmt.Errorf("watching the store: %w", err)
	}
	defer w.Stop()
	save := opts.Clock.NewTicker(time.Second)
	defer save.Stop()
	// During the initial events the position is not yet a revision the
	// watch can resume from: it is, once they are all delivered.
	var at, saved int64
	initial := wo.SendInitialEvents
	if !initial {
		at, saved = wo.Revision, wo.Revision
	}
	for {
		select {
		case <-ctx.Done():
			saveCursor(opts, at, saved)
			return ctx.Err()
		case <-save.C():
			if !initial && at != saved && saveCursor(opts, at, saved) {
				saved = at
			}
		case e, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the store ended the watch")
			}
			if e.Err != nil {
				if errors.Is(e.Err, storage.ErrCompacted) && opts.Cursors != nil {
					// Read everything again at the next watch.
					_ = opts.Cursors.SaveCursor(ctx, EventCursor, 0)
				}
				return e.Err
			}
			if e.Type == watch.Bookmark {
				if e.InitialEventsEnd {
					initial = false
				}
				if !initial {
					at = e.Revision
				}
				continue
			}
			if e.Type != watch.Deleted {
				learn(opts, e.Object)
			}
			if !initial {
				at = e.Revision
			}
		}
	}
}

// learn feeds one event to the graph and its kinds to NoteKind.
func learn(opts *EventLearnerOptions, ev *corev1.Event) {
	opts.Graph.ObserveEvent(ev)
	if opts.NoteKind != nil {
		opts.NoteKind(ev.InvolvedObject.APIVersion, ev.InvolvedObject.Kind)
		if ev.Related != nil {
			opts.NoteKind(ev.Related.APIVersion, ev.Related.Kind)
		}
	}
}

// saveCursor saves at after flushing the graph; it reports whether it did.
func saveCursor(opts *EventLearnerOptions, at, saved int64) bool {
	if opts.Cursors == nil || at == saved {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := opts.Graph.Flush(ctx); err != nil {
		opts.Log.Warn("lineage: not saved; the event learner's cursor stays", "err", err)
		return false
	}
	if err := opts.Cursors.SaveCursor(ctx, EventCursor, at); err != nil {
		opts.Log.Warn("lineage: the event learner's cursor not saved", "err", err)
		return false
	}
	return true
}

// StoreChecker answers Collect's question from the store: does it keep an
// event whose regarding or related object is o.
type StoreChecker struct{ Store storage.Interface }

var _ EventChecker = StoreChecker{}

// HasEvents implements EventChecker with an indexed list of one item.
func (c StoreChecker) HasEvents(ctx context.Context, o *Object) (bool, error) {
	fs := eventapi.FieldSelector{{Field: eventapi.FieldInvolvesUID, Value: string(o.UID())}}
	if o.UID() == "" {
		fs = eventapi.FieldSelector{
			{Field: eventapi.FieldInvolvesKind, Value: o.Kind},
			{Field: eventapi.FieldInvolvesNamespace, Value: o.Namespace},
			{Field: eventapi.FieldInvolvesName, Value: o.Name},
		}
	}
	res, err := c.Store.List(ctx, storage.ListOptions{Selector: storage.Selector{Fields: fs}, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(res.Items) > 0, nil
}
