package events

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/recordermetrics"
	"github.com/kubevents/kubevents/internal/sinkretry"
	"k8s.io/client-go/tools/record/util"
)

// snapshot is the state of a series a write sends.
type snapshot struct {
	taken        time.Time // when; a successful write counts as made then
	event        *eventsv1.Event
	count        int32
	lastObserved time.Time
	created      bool
	state        string // SeriesStateAnnotation value; "" for a singleton
}

// snapshotLocked returns what a write of s would send, and whether there
// is anything to send: a creation, occurrences not yet written, a change of
// state, or a heartbeat that is due.
func (b *Broadcaster) snapshotLocked(s *series, now time.Time) (snapshot, bool) {
	snap := snapshot{taken: now, event: s.event, count: s.count, lastObserved: s.lastObserved, created: s.created}
	if s.count >= 2 {
		switch {
		case s.finished:
			snap.state = SeriesFinished
		case b.stopped:
			snap.state = SeriesUnknown // no one counts it any more
		default:
			snap.state = SeriesOngoing
		}
	}
	heartbeat := s.count >= 2 && !s.lastWrite.IsZero() && !now.Before(s.lastWrite.Add(b.o.heartbeat))
	needed := !s.created || s.count > s.written || (b.o.stateAnnotation && snap.state != s.state) || heartbeat
	return snap, needed
}

// seriesPatch is the body of a series update: client-go's
// {"series":{"count":N,"lastObservedTime":T}}, and the state annotation.
type seriesPatch struct {
	Metadata *patchMeta           `json:"metadata,omitempty"`
	Series   eventsv1.EventSeries `json:"series"`
}

type patchMeta struct {
	Annotations map[string]string `json:"annotations"`
}

func (b *Broadcaster) patchBody(snap snapshot) ([]byte, error) {
	p := seriesPatch{Series: eventsv1.EventSeries{Count: snap.count, LastObservedTime: metav1.NewMicroTime(snap.lastObserved)}}
	if b.o.stateAnnotation && snap.state != "" {
		p.Metadata = &patchMeta{Annotations: map[string]string{SeriesStateAnnotation: snap.state}}
	}
	return json.Marshal(p)
}

// creation is the object a create sends: the first occurrence's event,
// carrying the series when there were more by now.
func (b *Broadcaster) creation(snap snapshot) *eventsv1.Event {
	ev := snap.event.DeepCopy()
	ev.ResourceVersion = ""
	if snap.count >= 2 {
		ev.Series = &eventsv1.EventSeries{Count: snap.count, LastObservedTime: metav1.NewMicroTime(snap.lastObserved)}
		if b.o.stateAnnotation {
			if ev.Annotations == nil {
				ev.Annotations = map[string]string{}
			}
			ev.Annotations[SeriesStateAnnotation] = snap.state
		}
	}
	return ev
}

// write sends snap: a create if the object does not exist yet, a series
// patch otherwise (a create again if the patch finds it gone), retrying
// failures the policy allows.
func (b *Broadcaster) write(ctx context.Context, s *series, snap snapshot) {
	for attempt := 1; ; attempt++ {
		verb, err := b.attempt(ctx, s, &snap)
		if err == nil {
			b.metrics.Writes.WithLabelValues(verb, "success").Inc()
			b.mu.Lock()
			s.created = true
			if snap.count > s.written {
				s.written = snap.count
			}
			s.state = snap.state
			s.lastWrite = snap.taken
			if !s.removed && s.count >= 2 {
				b.scheduleLocked(s, b.nextDueLocked(s))
			}
			b.mu.Unlock()
			return
		}
		b.metrics.Writes.WithLabelValues(verb, "error").Inc()
		if ctx.Err() != nil {
			b.giveUp(s, snap, recordermetrics.DropShutdown, err, "Event dropped: not written before shutdown")
			return
		}
		if sinkretry.Classify(err) == sinkretry.Drop {
			b.giveUp(s, snap, recordermetrics.DropRejected, err, "Event dropped: the server refused it")
			return
		}
		if attempt >= b.retry.MaxAttempts {
			b.giveUp(s, snap, recordermetrics.DropRetriesExhausted, err, fmt.Sprintf("Event dropped: every one of %d attempts failed", attempt))
			return
		}
		b.metrics.Retries.Inc()
		t := b.o.clock.NewTimer(b.retry.Delay(attempt, err))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			b.giveUp(s, snap, recordermetrics.DropShutdown, err, "Event dropped: not written before shutdown")
			return
		}
	}
}

// giveUp counts the occurrences a failed write carried and the server
// does not have (snap's count less the count written before) as dropped
// under cause, and takes them out of s's count, so that no later write of
// s carries them: every occurrence is either in a stored count or counted
// as dropped, never both. Occurrences counted after snap was taken are
// not affected: the next write carries them (queued here for an event
// whose create failed; a created series' next deadline or Shutdown writes
// them). A failed write of the state alone drops nothing and is only
// logged.
func (b *Broadcaster) giveUp(s *series, snap snapshot, cause string, err error, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := snap.count - s.written
	kv := []any{"name", snap.event.Name, "reason", snap.event.Reason}
	if n <= 0 {
		b.drops.Log(b.o.logger, dropLogKey, 0, err, "Series state not written", kv...)
		return
	}
	s.count -= n
	b.drops.Drop(b.o.logger, dropLogKey, cause, int(n), err, msg, kv...)
	if !s.created && !s.removed {
		if s.count == 0 {
			b.forgetLocked(s) // nothing left: a new occurrence starts afresh
		} else {
			b.queueWriteLocked(s) // the occurrences since: a create of their own
		}
	}
}

// attempt makes one write. A patch that finds the object gone creates it
// again under the same name (with the series); a create of a series that
// finds its object already there (an earlier create whose answer was lost)
// is followed by the patch.
func (b *Broadcaster) attempt(ctx context.Context, s *series, snap *snapshot) (verb string, err error) {
	if snap.created {
		body, err := b.patchBody(*snap)
		if err != nil {
			return "patch", err
		}
		_, err = b.sink.Patch(ctx, snap.event, body)
		if !apierrors.IsNotFound(err) {
			return "patch", err
		}
		b.metrics.Writes.WithLabelValues("patch", "error").Inc()
		snap.created = false
	}
	_, err = b.sink.Create(ctx, b.creation(*snap))
	b.mu.Lock()
	tried := s.createTried
	if err != nil && !apierrors.IsAlreadyExists(err) && sinkretry.Classify(err) == sinkretry.Retry {
		s.createTried = true // it may have landed
	}
	b.mu.Unlock()
	if !apierrors.IsAlreadyExists(err) {
		return "create", err
	}
	b.metrics.Writes.WithLabelValues("create", "error").Inc()
	if !tried {
		// Nothing of ours can be there: another event took the name (two
		// recorders, one object, one clock tick). Take a new name rather
		// than lose the event, as client-go does.
		b.rename(s, snap)
		return b.attempt(ctx, s, snap)
	}
	// An earlier create whose answer was lost did land.
	snap.created = true
	if snap.count >= 2 {
		return b.attempt(ctx, s, snap)
	}
	return "create", nil
}

// rename gives s's event a fresh name.
func (b *Broadcaster) rename(s *series, snap *snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ev := s.event.DeepCopy()
	ev.Name = util.GenerateEventName(ev.Regarding.Name, b.uniqueNano(b.o.clock.Now()))
	s.event, snap.event = ev, ev
}
