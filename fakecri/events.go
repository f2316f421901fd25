package fakecri

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// ErrSubscriptionClosed is what Subscription.Recv returns after the
// subscriber's own Close.
var ErrSubscriptionClosed = errors.New("fakecri: subscription closed")

// Stats are the event pipeline's counters (since New) and current sizes.
type Stats struct {
	// Published is the number of events produced by state changes.
	Published uint64
	// Delivered is the number of events handed to subscribers (a stream's
	// handler or an in-process Subscription), once per subscriber, duplicates
	// and replays included.
	Delivered uint64
	// Dropped is the number of events dropped because the shared buffer
	// was full (BufferDrop, BufferDropBroadcast).
	Dropped uint64
	// FaultDropped is the number of events dropped by Faults.DropNext.
	FaultDropped uint64
	// Expired is the number of events kept for a future subscriber
	// (BufferBlock) and discarded after Options.StaleRetention.
	Expired uint64
	// Lost is the number of events lost otherwise: produced while the
	// runtime refuses (Refuse) or after Close, discarded by Refuse's
	// restart, or consumed by BufferDropBroadcast's broadcaster while no
	// one was subscribed. Events left in the buffer of a subscriber that
	// goes away are not counted.
	Lost uint64
	// Subscribers is the number of open subscriptions (streams).
	Subscribers int
	// BlockedPublishers is the number of deliveries waiting for room in a
	// subscriber's buffer (BufferBlock) right now.
	BlockedPublishers int
	// Stale is the number of events kept for the next subscriber
	// (BufferBlock) right now.
	Stale int
	// Buffered is the number of events in the shared buffer (drop modes)
	// right now.
	Buffered int
	// Held is 1 while Faults.Reorder holds an event.
	Held int
	// Delayed is the number of events waiting in Faults.Delay's queue.
	Delayed int
}

// Stats returns the event pipeline's counters.
func (r *Runtime) Stats() Stats { return r.ev.snapshot() }

type resp = runtimeapi.ContainerEventResponse

type staleEvent struct {
	at time.Time
	ev *resp
}

type delayed struct {
	ev    *resp
	timer clock.Timer // nil: no wait
}

// eventQueue carries events from state changes to subscribers, through
// the fault stages (drop, duplicate, reorder, delay) and the buffer mode.
type eventQueue struct {
	r         *Runtime
	mode      BufferMode
	buffer    int
	retention time.Duration
	shared    chan *resp // drop modes
	stop      chan struct{}
	wake      chan struct{}
	wg        sync.WaitGroup

	mu           sync.Mutex
	closed       bool
	subs         []*Subscription
	stale        []staleEvent
	held         *resp
	line         []delayed
	lineBusy     bool
	lineRunning  bool
	gen          uint64 // incremented by reset: in-flight deliveries of older generations are lost
	broadcasting bool
	blocked      int
	stats        Stats
}

func newEventQueue(r *Runtime) *eventQueue {
	q := &eventQueue{
		r:         r,
		mode:      r.opts.Mode,
		buffer:    r.opts.Buffer,
		retention: r.opts.StaleRetention,
		stop:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
	}
	if q.mode != BufferBlock {
		q.shared = make(chan *resp, q.buffer)
	}
	return q
}

// publish sends events produced by a state change down the pipeline. The
// caller holds r.opMu, so events leave in production order.
func (q *eventQueue) publish(evs ...*resp) {
	for _, ev := range evs {
		q.mu.Lock()
		q.stats.Published++
		q.mu.Unlock()
		drop, f := q.r.takeDrop()
		if drop {
			q.mu.Lock()
			q.stats.FaultDropped++
			q.mu.Unlock()
			q.r.log.Info("event dropped (fault)", "container", ev.ContainerId, "type", ev.ContainerEventType)
			continue
		}
		q.reorderStage(ev, &f)
		if f.Duplicate {
			q.reorderStage(ev, &f)
		}
	}
}

func (q *eventQueue) reorderStage(ev *resp, f *Faults) {
	q.mu.Lock()
	held := q.held
	if f.Reorder && held == nil {
		q.held = ev
		q.mu.Unlock()
		return
	}
	q.held = nil
	q.mu.Unlock()
	if f.Reorder {
		q.delayStage(ev, f)
		q.delayStage(held, f)
		return
	}
	if held != nil {
		q.delayStage(held, f)
	}
	q.delayStage(ev, f)
}

func (q *eventQueue) flushHeld() {
	q.mu.Lock()
	held := q.held
	q.held = nil
	q.mu.Unlock()
	if held != nil {
		f := q.r.faultsSnapshot()
		q.delayStage(held, &f)
	}
}

func (q *eventQueue) delayStage(ev *resp, f *Faults) {
	q.mu.Lock()
	if f.Delay <= 0 && len(q.line) == 0 && !q.lineBusy {
		gen := q.gen
		q.mu.Unlock()
		q.deliver(ev, gen)
		return
	}
	defer q.mu.Unlock()
	if q.closed {
		q.stats.Lost++
		return
	}
	d := delayed{ev: ev}
	if f.Delay > 0 {
		d.timer = q.r.clk.NewTimer(f.Delay)
	}
	q.line = append(q.line, d)
	if !q.lineRunning {
		q.lineRunning = true
		q.wg.Add(1)
		go q.runLine()
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// runLine delivers delayed events in order, each once its timer fires.
func (q *eventQueue) runLine() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.line) == 0 {
			q.lineBusy = false
			q.mu.Unlock()
			select {
			case <-q.wake:
				continue
			case <-q.stop:
				return
			}
		}
		d := q.line[0]
		q.line[0] = delayed{}
		q.line = q.line[1:]
		q.lineBusy = true
		gen := q.gen
		q.mu.Unlock()
		if d.timer != nil {
			select {
			case <-d.timer.C():
			case <-q.stop:
				d.timer.Stop()
				return
			}
		}
		q.deliver(d.ev, gen)
	}
}

// deliver hands ev to the buffer mode, unless the runtime refuses or was
// reset since the event entered the pipeline (gen).
func (q *eventQueue) deliver(ev *resp, gen uint64) {
	refusing := q.r.refusing()
	q.mu.Lock()
	if q.closed || refusing || gen != q.gen {
		q.stats.Lost++
		q.mu.Unlock()
		return
	}
	q.r.log.Debug("event", "container", ev.ContainerId, "type", ev.ContainerEventType, "createdAt", ev.CreatedAt)
	if q.mode != BufferBlock {
		q.mu.Unlock()
		select {
		case q.shared <- ev:
		default:
			q.mu.Lock()
			q.stats.Dropped++
			q.mu.Unlock()
			q.r.log.Debug("event buffer is full, discarding event", "container", ev.ContainerId, "type", ev.ContainerEventType)
		}
		return
	}
	if len(q.subs) == 0 {
		q.pruneLocked()
		if q.retention < 0 {
			q.stats.Expired++
		} else {
			q.stale = append(q.stale, staleEvent{at: q.r.clk.Now(), ev: ev})
		}
		q.mu.Unlock()
		return
	}
	subs := append([]*Subscription(nil), q.subs...)
	q.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
			continue
		case <-s.done:
			continue
		default:
		}
		q.mu.Lock()
		q.blocked++
		q.mu.Unlock()
		select {
		case s.ch <- ev:
		case <-s.done:
		}
		q.mu.Lock()
		q.blocked--
		q.mu.Unlock()
	}
}

// pruneLocked discards stale events older than the retention.
func (q *eventQueue) pruneLocked() {
	now := q.r.clk.Now()
	i := 0
	for i < len(q.stale) && (q.retention < 0 || now.Sub(q.stale[i].at) > q.retention) {
		i++
	}
	if i > 0 {
		q.stats.Expired += uint64(i)
		q.r.log.Debug("stale container events discarded", "count", i)
		q.stale = append([]staleEvent(nil), q.stale[i:]...)
	}
}

// broadcast is BufferDropBroadcast's broadcaster.
func (q *eventQueue) broadcast() {
	defer q.wg.Done()
	for {
		var ev *resp
		select {
		case <-q.stop:
			return
		case ev = <-q.shared:
		}
		q.mu.Lock()
		subs := append([]*Subscription(nil), q.subs...)
		if len(subs) == 0 {
			q.stats.Lost++
		}
		q.mu.Unlock()
		for _, s := range subs {
			select {
			case s.ch <- ev:
			case <-s.done:
			case <-q.stop:
				return
			}
		}
	}
}

// Subscription is an open event subscription: what a GetContainerEvents
// stream reads, usable in-process without gRPC through Subscribe. Recv is
// not safe for concurrent use (like a gRPC stream's); Close is.
type Subscription struct {
	q      *eventQueue
	src    <-chan *resp
	ch     chan *resp // own buffer (BufferBlock) or hand-off (BufferDropBroadcast)
	done   chan struct{}
	err    error // set before done is closed
	replay []*resp
}

// Subscribe opens an in-process subscription, equivalent to a
// GetContainerEvents stream (and subject to the same faults and buffer
// mode) but not counted as an RPC and not going through RPCHook. If the
// stream would fail (Unimplemented, EventsDisabled, Refuse, closed
// runtime), the first Recv returns the error a gRPC client would see
// (a status error, or io.EOF for EventsDisabled).
func (r *Runtime) Subscribe() *Subscription {
	if err := r.streamFault(); err != nil {
		s := &Subscription{q: r.ev, done: make(chan struct{}), err: err}
		close(s.done)
		return s
	}
	return r.ev.subscribe()
}

func (q *eventQueue) subscribe() *Subscription {
	s := &Subscription{q: q, done: make(chan struct{})}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		s.err = status.Error(codes.Unavailable, "fakecri: runtime closed")
		close(s.done)
		return s
	}
	switch q.mode {
	case BufferBlock:
		s.ch = make(chan *resp, q.buffer)
		s.src = s.ch
		q.pruneLocked()
		for _, st := range q.stale {
			s.replay = append(s.replay, st.ev)
		}
		q.stale = nil
	case BufferDrop:
		s.src = q.shared
	case BufferDropBroadcast:
		s.ch = make(chan *resp)
		s.src = s.ch
		if !q.broadcasting {
			q.broadcasting = true
			q.wg.Add(1)
			go q.broadcast()
		}
	}
	q.subs = append(q.subs, s)
	return s
}

// Recv returns the next event, blocking until there is one or the
// subscription ends: after Close (ErrSubscriptionClosed), BreakStreams,
// Refuse or the runtime's Close (codes.Unavailable status errors). In
// BufferBlock it first returns the stale events kept while no one was
// subscribed.
func (s *Subscription) Recv() (*runtimeapi.ContainerEventResponse, error) {
	select {
	case <-s.done:
		return nil, s.err
	default:
	}
	var ev *resp
	if len(s.replay) > 0 {
		ev = s.replay[0]
		s.replay[0] = nil
		s.replay = s.replay[1:]
	} else {
		select {
		case ev = <-s.src:
		case <-s.done:
			return nil, s.err
		}
	}
	s.q.mu.Lock()
	s.q.stats.Delivered++
	s.q.mu.Unlock()
	return ev, nil
}

// Close ends the subscription. Events in its buffer are lost.
func (s *Subscription) Close() {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	s.q.endLocked(s, ErrSubscriptionClosed)
}

// endLocked ends s with err and forgets it.
func (q *eventQueue) endLocked(s *Subscription, err error) {
	select {
	case <-s.done:
		return
	default:
	}
	s.err = err
	close(s.done)
	for i, o := range q.subs {
		if o == s {
			q.subs = append(q.subs[:i:i], q.subs[i+1:]...)
			break
		}
	}
}

func (q *eventQueue) breakAllLocked(msg string) int {
	subs := q.subs
	for _, s := range subs {
		q.endLocked(s, status.Error(codes.Unavailable, msg))
	}
	q.subs = nil
	return len(subs)
}

// breakAll ends every subscription with codes.Unavailable.
func (q *eventQueue) breakAll(msg string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.breakAllLocked(msg)
}

// reset is a runtime restart: every subscription ends and every event in
// memory is lost.
func (q *eventQueue) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.breakAllLocked("fakecri: runtime restarting")
	lost := len(q.stale) + len(q.line)
	for _, d := range q.line {
		if d.timer != nil {
			d.timer.Stop()
		}
	}
	q.stale, q.line = nil, nil
	if q.held != nil {
		lost++
		q.held = nil
	}
	q.gen++
	if q.shared != nil {
	drain:
		for {
			select {
			case <-q.shared:
				lost++
			default:
				break drain
			}
		}
	}
	q.stats.Lost += uint64(lost)
}

// close ends every subscription and stops the queue's goroutines.
func (q *eventQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.breakAllLocked("fakecri: runtime closed")
	for _, d := range q.line {
		if d.timer != nil {
			d.timer.Stop()
		}
	}
	close(q.stop)
	q.mu.Unlock()
	q.wg.Wait()
}

func (q *eventQueue) snapshot() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pruneLocked()
	st := q.stats
	st.Subscribers = len(q.subs)
	st.BlockedPublishers = q.blocked
	st.Stale = len(q.stale)
	if q.shared != nil {
		st.Buffered = len(q.shared)
	}
	if q.held != nil {
		st.Held = 1
	}
	st.Delayed = len(q.line)
	if q.lineBusy {
		st.Delayed++
	}
	return st
}
