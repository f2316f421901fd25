package mirror

import (
	"context"
	"errors"
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/storage"
)

// change is one change of the source to apply.
type change struct {
	typ watch.EventType
	ev  *corev1.Event
	// rv is the change's place in the source's order; empty for the
	// events of a sync's state, which come in no order (the sync's end
	// moves the cursor).
	rv string
	e  *entry
}

// entry is a change, or a mark, in the order the source gave them.
type entry struct {
	rv       string
	done     bool
	received time.Time
	// onPop runs once every entry before this one and it are done.
	onPop func()
}

// applier applies changes with several workers, each key on the same
// one, and keeps the cursor: the resourceVersion of the last entry such
// that it and every entry before it are done.
type applier struct {
	m      *Mirror
	ctx    context.Context
	cancel context.CancelFunc
	queues []chan change
	seed   maphash.Seed
	wg     sync.WaitGroup
	once   sync.Once

	mu      sync.Mutex
	pending []*entry
	cursor  string
}

func newApplier(ctx context.Context, m *Mirror) *applier {
	ctx, cancel := context.WithCancel(ctx)
	a := &applier{m: m, ctx: ctx, cancel: cancel, seed: maphash.MakeSeed(), queues: make([]chan change, m.opts.Workers)}
	for i := range a.queues {
		a.queues[i] = make(chan change, workerQueue)
		a.wg.Add(1)
		go a.work(a.queues[i])
	}
	m.mu.Lock()
	m.applier = a
	m.mu.Unlock()
	return a
}

// stop ends the workers: what they have not applied stays pending, and
// the cursor does not pass it.
func (a *applier) stop() {
	a.once.Do(func() {
		a.cancel()
		a.wg.Wait()
		a.m.mu.Lock()
		if a.m.applier == a {
			a.m.applier = nil
		}
		a.m.mu.Unlock()
	})
}

// goBackground runs f beside the workers, stopped with them.
func (a *applier) goBackground(f func(ctx context.Context)) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f(a.ctx)
	}()
}

// dispatch queues c on its key's worker; false if the applier stopped
// first.
func (a *applier) dispatch(c change) bool {
	c.e = &entry{rv: c.rv, received: a.m.opts.Clock.Now()}
	a.mu.Lock()
	a.pending = append(a.pending, c.e)
	a.mu.Unlock()
	q := a.queues[maphash.String(a.seed, c.ev.Namespace+"/"+c.ev.Name)%uint64(len(a.queues))]
	select {
	case q <- c:
		return true
	case <-a.ctx.Done():
		return false
	}
}

// mark queues a point of the source's order with nothing to apply (a
// bookmark, the end of a sync): the cursor moves to rv once every change
// before it is applied, and onPop runs then.
func (a *applier) mark(rv string, onPop func()) {
	a.mu.Lock()
	a.pending = append(a.pending, &entry{rv: rv, done: true, received: a.m.opts.Clock.Now(), onPop: onPop})
	pops := a.advanceLocked()
	a.mu.Unlock()
	runAll(pops)
}

func (a *applier) complete(e *entry) {
	a.mu.Lock()
	e.done = true
	pops := a.advanceLocked()
	a.mu.Unlock()
	runAll(pops)
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// advanceLocked drops the done entries at the head of pending, moving the
// cursor; it returns their onPop functions, to run unlocked.
func (a *applier) advanceLocked() []func() {
	var pops []func()
	n := 0
	for n < len(a.pending) && a.pending[n].done {
		e := a.pending[n]
		if e.rv != "" {
			a.cursor = e.rv
		}
		if e.onPop != nil {
			pops = append(pops, e.onPop)
		}
		a.pending[n] = nil
		n++
	}
	if n > 0 {
		a.pending = a.pending[n:]
		if len(a.pending) == 0 {
			a.m.setCaughtUp()
		}
	}
	return pops
}

// state returns the cursor and the time the oldest change not yet
// applied was received (zero when none is pending).
func (a *applier) state() (cursor string, oldest time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) > 0 {
		oldest = a.pending[0].received
	}
	return a.cursor, oldest
}

func (a *applier) work(q chan change) {
	defer a.wg.Done()
	for {
		select {
		case c := <-q:
			if !a.m.applyRetrying(a.ctx, c) {
				return
			}
			a.complete(c.e)
		case <-a.ctx.Done():
			return
		}
	}
}

// applyRetrying applies c, trying again while the store is unavailable
// (a full disk, etcd unreachable): a change is never dropped for that.
// A change the store refuses for good is counted and logged, and skipped.
// It returns false when ctx ended before c was applied.
func (m *Mirror) applyRetrying(ctx context.Context, c change) bool {
	backoff := m.opts.MinBackoff
	for {
		err := m.apply(ctx, c)
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil || errors.Is(err, storage.ErrClosed):
			return false
		case errors.Is(err, storage.ErrUnavailable), errors.Is(err, storage.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
			m.metrics.storeRetries.Inc()
			if ok, n := m.dropLog.Allow(); ok {
				m.log.Warn("the store cannot take a mirrored change; trying again", "err", err, "retryIn", backoff, "similarSinceLastLog", n)
			}
			if !m.sleep(ctx, backoff) {
				return false
			}
			backoff = min(2*backoff, m.opts.MaxBackoff)
		default:
			m.metrics.dropped.Inc()
			if ok, n := m.dropLog.Allow(); ok {
				m.log.Error("the store refused a mirrored change; it is skipped", "namespace", c.ev.Namespace, "name", c.ev.Name,
					"resourceVersion", c.ev.ResourceVersion, "err", err, "similarSinceLastLog", n)
			}
			return true
		}
	}
}

// apply makes the store hold the change c of the source: the event as
// the source has it, with the source's resourceVersion as annotation. A
// change not newer than the one the stored event was written from is
// already applied and changes nothing. Writes are conditional on the
// revision read; a conflict reads again.
func (m *Mirror) apply(ctx context.Context, c change) error {
	src := c.ev
	if c.typ == watch.Added {
		// Most additions are new to the store: create without reading
		// first (the read was a fifth of the mirror's CPU in a sync). One
		// the store holds already (a replay after a restart) goes the
		// conditional way below.
		ev := m.local(src)
		_, err := m.opts.Store.Create(ctx, ev, m.writeOptions(ev))
		if !errors.Is(err, storage.ErrExists) {
			if err == nil {
				m.metrics.applied.WithLabelValues("added").Inc()
				m.stored(ev)
			}
			return err
		}
	}
	for {
		local, err := m.opts.Store.Get(ctx, src.Namespace, src.Name)
		if errors.Is(err, storage.ErrNotFound) {
			local, err = nil, nil
		}
		if err != nil {
			return err
		}
		var localRev int64
		if local != nil {
			localRev, _ = strconv.ParseInt(local.ResourceVersion, 10, 64)
		}
		if c.typ == watch.Deleted {
			if m.opts.Deletions != DeletionsPropagate {
				m.metrics.skipped.WithLabelValues("deletion-kept").Inc()
				return nil
			}
			if local == nil || local.UID != src.UID {
				m.metrics.skipped.WithLabelValues("absent").Inc()
				return nil
			}
			_, err := m.opts.Store.Delete(ctx, src.Namespace, src.Name, storage.Preconditions{Revision: localRev, UID: string(src.UID)})
			switch {
			case errors.Is(err, storage.ErrConflict):
				continue
			case errors.Is(err, storage.ErrNotFound):
				return nil
			case err == nil:
				m.metrics.applied.WithLabelValues("deleted").Inc()
			}
			return err
		}
		if local != nil && !newer(src.ResourceVersion, local.Annotations[SourceResourceVersionAnnotation]) {
			m.metrics.skipped.WithLabelValues("applied").Inc()
			return nil
		}
		ev := m.local(src)
		wo := m.writeOptions(ev)
		if local == nil {
			_, err = m.opts.Store.Create(ctx, ev, wo)
			if errors.Is(err, storage.ErrExists) {
				continue
			}
			if err == nil {
				m.metrics.applied.WithLabelValues("added").Inc()
				m.stored(ev)
			}
			return err
		}
		wo.Precondition.Revision = localRev
		_, err = m.opts.Store.Update(ctx, ev, wo)
		switch {
		case errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			continue
		case err == nil:
			m.metrics.applied.WithLabelValues("modified").Inc()
			m.stored(ev)
		}
		return err
	}
}

// local is the event to store for the source's src: src as the source
// has it, its resourceVersion kept as an annotation.
func (m *Mirror) local(src *corev1.Event) *corev1.Event {
	ev := src.DeepCopy()
	ev.ResourceVersion, ev.SelfLink = "", ""
	if ev.Annotations == nil {
		ev.Annotations = map[string]string{}
	}
	ev.Annotations[SourceResourceVersionAnnotation] = src.ResourceVersion
	return ev
}

// writeOptions are the options of a write of the local event ev: its
// time to live.
func (m *Mirror) writeOptions(ev *corev1.Event) storage.WriteOptions {
	var wo storage.WriteOptions
	if m.opts.TTL != nil {
		wo.TTL = m.opts.TTL(ev)
	}
	return wo
}

// stored tells Options.Stored, if set, that ev is stored.
func (m *Mirror) stored(ev *corev1.Event) {
	if m.opts.Stored != nil {
		m.opts.Stored(ev)
	}
}

// newer reports whether the source resourceVersion rv is newer than
// applied, the one a stored event was written from. Source
// resourceVersions are etcd revisions, compared as numbers; if either is
// not one, only an equal one counts as applied.
func newer(rv, applied string) bool {
	if applied == "" {
		return true
	}
	a, okA := parseRV(rv)
	b, okB := parseRV(applied)
	if !okA || !okB {
		return rv != applied
	}
	return a > b
}

// setCaughtUp records that every change received is applied.
func (m *Mirror) setCaughtUp() {
	m.mu.Lock()
	m.caughtUp = m.opts.Clock.Now()
	m.mu.Unlock()
}
