package eventfilter

import (
	"context"
	"fmt"
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
	f      *Filter
	ctx    context.Context
	budget uint64
	onErr  func(error)

	mu    sync.Mutex
	spent uint64
	n     int64
	err   error
	done  chan struct{}
}

// NewRun starts a run of f whose evaluations ctx interrupts, with f's
// request budget. onErr, when not nil, is called once with the run's
// error when it fails (to cancel the list that evaluates it).
func (f *Filter) NewRun(ctx context.Context, onErr func(error)) *Run {
	return &Run{f: f, ctx: ctx, budget: f.limits.RequestCostBudget, onErr: onErr, done: make(chan struct{})}
}

// Matches reports whether ev is selected; false once the run failed.
func (r *Run) Matches(ev *corev1.Event) bool {
	r.mu.Lock()
	failed := r.err != nil
	r.mu.Unlock()
	if failed {
		return false
	}
	ok, cost, err := r.f.Eval(r.ctx, ev)
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
	r.mu.Unlock()
	if first && r.onErr != nil {
		r.onErr(err)
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
