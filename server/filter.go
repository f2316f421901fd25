package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/kubevents/kubevents/eventfilter"
	"github.com/kubevents/kubevents/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// filterParam is the query parameter of a list or a watch that carries a
// CEL filter (package eventfilter), an extension of eventsd's.
const filterParam = "filter"

// parseFilter compiles the filter parameter of q, if any, into sel's
// predicate: a run of the filter for this one request. A filter that
// does not compile, is not a bool or may cost too much on one event is
// 400, with CEL's message or the estimate and the limit, as
// kube-apiserver answers a selector it cannot parse. With extensions off
// the parameter is refused likewise.
func (s *Server) parseFilter(q url.Values, rr resourceRequest, sel *storage.Selector) *apierrors.StatusError {
	expr, ok := q[filterParam]
	if !ok {
		return nil
	}
	if s.cfg.DisableExtensions {
		return apierrors.NewBadRequest("the filter parameter is an extension of eventsd's, and extensions are disabled (--extensions=false)")
	}
	if len(expr) != 1 {
		return apierrors.NewBadRequest(fmt.Sprintf("filter: %d values given, at most one is allowed", len(expr)))
	}
	f, err := s.filters.Compile(rr.version, expr[0])
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid filter %q: %v", expr[0], err))
	}
	sel.Predicate = f.NewRun()
	return nil
}

// filterRun returns sel's filter run, or nil.
func filterRun(sel storage.Selector) *eventfilter.Run {
	p := sel.Predicate
	for p != nil {
		if run, ok := p.(*eventfilter.Run); ok {
			return run
		}
		u, ok := p.(interface{ Unwrap() storage.Predicate })
		if !ok {
			return nil
		}
		p = u.Unwrap()
	}
	return nil
}

// bindFilter binds sel's filter run, if any, to ctx: the returned
// context ends when the run fails, so that the list or watch stops at
// once. The caller calls cancel when done.
func bindFilter(ctx context.Context, sel storage.Selector) (context.Context, context.CancelFunc) {
	if run := filterRun(sel); run != nil {
		return run.Bind(ctx)
	}
	return ctx, func() {}
}

// filterFailure returns the error of sel's filter run when it reached a
// cost limit: the list or watch that evaluated it is cut with it, never
// answered with what was selected before. It is 400, naming the event
// and the limit. nil when the run did not fail so (a cancelled request
// keeps its own answer: a 504 at the request timeout).
func filterFailure(sel storage.Selector) *apierrors.StatusError {
	run := filterRun(sel)
	if run == nil {
		return nil
	}
	if err := run.Err(); errors.Is(err, eventfilter.ErrCostExceeded) {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// filterDone is closed when sel's filter run fails; nil (never ready)
// without a filter.
func filterDone(sel storage.Selector) <-chan struct{} {
	if run := filterRun(sel); run != nil {
		return run.Done()
	}
	return nil
}
