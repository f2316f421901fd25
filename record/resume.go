package record

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubevents/kubevents/internal/pager"
)

// resumePageSize is the page size of the resume list: large enough that a
// component's events take few requests, small enough that no single
// response is large.
const resumePageSize = 500

// listerOf returns what lists the sink's events, or nil.
func listerOf(sink EventSink) Lister {
	switch s := sink.(type) {
	case *typedcorev1.EventSinkImpl:
		if s.Interface != nil {
			return s.Interface
		}
	case Lister:
		return s
	}
	return nil
}

// resumeFrom seeds the worker's deduplication cache with the events src
// already stored in the sink (WithResume), oldest first, so that when the
// cache is too small the most recent survive.
func (w *sinkWorker) resumeFrom(src corev1.EventSource) {
	l := listerOf(w.sink)
	if l == nil {
		w.b.logger.Info("Not resuming event counts: the sink cannot list events", "component", src.Component, "host", src.Host)
		return
	}
	events, err := listSource(w.b.ctx, l, src)
	if err != nil {
		w.b.logger.Error(err, "Not resuming event counts", "component", src.Component, "host", src.Host)
		return
	}
	slices.SortStableFunc(events, func(a, b *corev1.Event) int {
		return cmp.Or(a.LastTimestamp.Time.Compare(b.LastTimestamp.Time), cmp.Compare(a.Count, b.Count))
	})
	for _, ev := range events {
		w.corr.seed(ev)
	}
	w.b.logger.V(2).Info("Resumed event counts", "component", src.Component, "host", src.Host, "events", len(events))
}

// listSource lists the events of src: those of its component (the server
// filters by the source field selector, where supported) from its host
// (filtered here).
func listSource(ctx context.Context, l Lister, src corev1.EventSource) ([]*corev1.Event, error) {
	opts := metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("source", src.Component).String(),
		Limit:         resumePageSize,
	}
	var out []*corev1.Event
	err := pager.Each(ctx, opts, l.List, func(list *corev1.EventList) error {
		for i := range list.Items {
			ev := &list.Items[i]
			if ev.Source.Component == src.Component && ev.Source.Host == src.Host {
				out = append(out, ev)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the events of %q on %q: %w", src.Component, src.Host, err)
	}
	return out, nil
}
