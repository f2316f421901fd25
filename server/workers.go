package server

import (
	"context"
	"sync"
	"time"
)

// workerIdleTimeout is how long a handler worker waits for more work
// before it exits: long enough to carry a steady load without starting
// goroutines, short enough that a burst's workers do not linger.
const workerIdleTimeout = 30 * time.Second

// workerPool runs handlers in goroutines that are kept between requests.
// withTimeout must run a handler outside the request's goroutine, so that
// the 504 can be answered while the handler goes on; a fresh goroutine
// per request would grow its stack again on every request (decoding
// needs a deep one), which cost about 20% more CPU per create. A worker
// keeps its grown stack. There is no bound here: the in-flight limits
// bound the handlers that do work, and a request refused by them returns
// at once.
type workerPool struct {
	work chan func()
	stop chan struct{}
	wg   sync.WaitGroup // running handlers
	live sync.WaitGroup // worker goroutines
	once sync.Once
}

func newWorkerPool() *workerPool {
	return &workerPool{work: make(chan func()), stop: make(chan struct{})}
}

// run runs f in an idle worker, or in a new one when none is idle.
func (p *workerPool) run(f func()) {
	p.wg.Add(1)
	select {
	case p.work <- f:
	default:
		p.live.Add(1)
		go p.worker(f)
	}
}

func (p *workerPool) worker(f func()) {
	defer p.live.Done()
	// Wall-clock time: how long an idle goroutine lives is not logic
	// anything observes, and a fake clock would keep it forever.
	idle := time.NewTimer(workerIdleTimeout)
	defer idle.Stop()
	for {
		f()
		p.wg.Done()
		idle.Reset(workerIdleTimeout)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		case <-p.stop:
			return
		}
	}
}

// drain waits until every handler has returned, including those whose
// requests timed out and that go on in the background, or until ctx ends.
func (p *workerPool) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the idle workers and waits for them; workers still running a
// handler end after it.
func (p *workerPool) close() {
	p.once.Do(func() { close(p.stop) })
	p.live.Wait()
}
