package eventfilter

import (
	"context"
	"fmt"
	"math"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Run evaluates a Filter for one request (a list or a watch), summing
// the actual cost of its evaluations against the request's budget. It
// implements storage.Predicate: the first error (a cost limit reached,
// or the run's context ended) is kept, Matches answers false from then
// on, Err returns the error and Done is closed, so that the request ends
// with the error rather than with what was selected before it. It is
// safe for concurrent use.
type Run struct {
	f *Filter

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	budget uint64
	spent  uint64
	n      int64
	err    error
	done   chan struct{}
}

// NewRun starts a run of f whose summed cost is bounded by f's
// RequestCostBudget.
func (f *Filter) NewRun() *Run {
	return &Run{f: f, ctx: context.Background(), budget: f.limits.RequestCostBudget, done: make(chan struct{})}
}

// Unbudgeted lifts the run's summed-cost bound, leaving the per-event
// limit alone: for a watch, whose cost follows the rate of changes
// rather than a scan.
func (r *Run) Unbudgeted() {
	r.mu.Lock()
	r.budget = math.MaxUint64
	r.mu.Unlock()
}

// Bind makes parent interrupt the run's evaluations, and returns a child
// of parent cancelled when the run fails, for the list or watch that
// evaluates it to stop at once. The caller calls cancel when done.
func (r *Run) Bind(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(parent)
	r.mu.Lock()
	r.ctx, r.cancel = ctx, cancelCause
	r.mu.Unlock()
	return ctx, func() { cancelCause(context.Canceled) }
}

// Matches reports whether ev is selected; false once the run failed.
func (r *Run) Matches(ev *corev1.Event) bool {
	r.mu.Lock()
	failed, ctx := r.err != nil, r.ctx
	r.mu.Unlock()
	if failed {
		return false
	}
	ok, cost, err := r.f.Eval(ctx, ev)
	r.mu.Lock()
	r.spent += cost
	r.n++
	if err == nil && r.spent > r.budget {
		err = fmt.Errorf("%w: after %d events (the last %s/%s) it has cost %d, over the request's budget of %d; narrow the request with a namespace, a fieldSelector or a labelSelector",
			ErrCostExceeded, r.n, ev.Namespace, ev.Name, r.spent, r.budget)
	}
	first := err != nil && r.err == nil
	if first {
		r.err = err
		close(r.done)
	}
	cancel := r.cancel
	r.mu.Unlock()
	if first && cancel != nil {
		cancel(err)
	}
	return ok && err == nil
}

// Err returns the error that ended the run, or nil.
func (r *Run) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Done is closed when the run fails.
func (r *Run) Done() <-chan struct{} { return r.done }

// Spent returns the actual cost summed over the run's evaluations.
func (r *Run) Spent() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spent
}
