package pleg

import (
	"sort"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubevents/kubevents/internal/ratelog"
)

// emitter sends PLEG events to the consumer's channel without ever
// blocking, and remembers, per container, the state the consumer was last
// told of, so that the two sources of events (the runtime's stream and
// the relist) do not tell it the same thing twice: a container reported
// dead by an event is not reported dead again by the next relist, and a
// deleted one gets Removed without a second Died.
type emitter struct {
	ch      chan *PodLifecycleEvent
	metrics *Metrics
	log     logr.Logger
	limit   *ratelog.Limiter

	mu   sync.Mutex
	sent map[types.UID]map[string]containerState
}

func newEmitter(ch chan *PodLifecycleEvent, m *Metrics, log logr.Logger, limit *ratelog.Limiter) *emitter {
	return &emitter{ch: ch, metrics: m, log: log, limit: limit, sent: map[types.UID]map[string]containerState{}}
}

// news reports whether ev would tell the consumer something it has not
// been told.
func (e *emitter) newsLocked(ev *PodLifecycleEvent) bool {
	id, _ := ev.Data.(string)
	last, known := e.sent[ev.ID][id]
	switch ev.Type {
	case ContainerStarted:
		return !known || last != stateRunning
	case ContainerDied:
		return !known || (last != stateExited && last != stateNonExistent)
	case ContainerRemoved:
		return !known || last != stateNonExistent
	case ContainerChanged:
		return false // computed, never sent, as upstream
	}
	return true
}

// emit sends the events that are news, non-blocking, and returns the IDs
// of the containers they were about. An event the full channel cannot
// take is counted in pleg_discard_events and not remembered as sent.
func (e *emitter) emit(evs []*PodLifecycleEvent) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var news map[string]bool
	for _, ev := range evs {
		if !e.newsLocked(ev) {
			continue
		}
		id, _ := ev.Data.(string)
		if news == nil {
			news = map[string]bool{}
		}
		news[id] = true
		select {
		case e.ch <- ev:
		default:
			e.metrics.Discards.Inc()
			if ok, n := e.limit.Allow(); ok {
				e.log.Error(nil, "PLEG event channel is full, discarding events", "capacity", cap(e.ch), "suppressed", n)
			}
			continue
		}
		if ev.Type == PodSync {
			continue
		}
		m := e.sent[ev.ID]
		if m == nil {
			m = map[string]containerState{}
			e.sent[ev.ID] = m
		}
		switch ev.Type {
		case ContainerStarted:
			m[id] = stateRunning
		case ContainerDied:
			m[id] = stateExited
		case ContainerRemoved:
			m[id] = stateNonExistent
		}
	}
	return news
}

// removalEvents returns the events that tell the consumer a pod it was
// told of is gone: Died for what it last heard running, and Removed.
func (e *emitter) removalEvents(id types.UID) []*PodLifecycleEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for cid, st := range e.sent[id] {
		if st != stateNonExistent {
			ids = append(ids, cid)
		}
	}
	sort.Strings(ids)
	var evs []*PodLifecycleEvent
	for _, cid := range ids {
		evs = append(evs, transition(id, cid, e.sent[id][cid], stateNonExistent)...)
	}
	return evs
}

// retain forgets every pod keep rejects.
func (e *emitter) retain(keep func(types.UID) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id := range e.sent {
		if !keep(id) {
			delete(e.sent, id)
		}
	}
}

// prune keeps only the containers a relist still lists for a pod.
func (e *emitter) prune(id types.UID, live map[string]containerState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.sent[id]
	for cid := range m {
		if _, ok := live[cid]; !ok {
			delete(m, cid)
		}
	}
	if len(m) == 0 {
		delete(e.sent, id)
	}
}

// full reports whether the channel is at capacity.
func (e *emitter) full() bool { return len(e.ch) == cap(e.ch) }
