package events

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	clientevents "k8s.io/client-go/tools/events"

	"github.com/kubevents/kubevents/internal/pager"
)

// resumeJob resumes the series of one reporting controller and instance.
type resumeJob struct{ controller, instance string }

// listPage is the page size of the resume list.
const listPage = 500

// startResume queues the resume of a new recorder's earlier series ahead
// of every write, so that its occurrences continue them.
func (b *Broadcaster) startResume(controller, instance string) {
	if !b.o.resume || b.listFunc() == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.jobs = append([]job{{resume: &resumeJob{controller: controller, instance: instance}}}, b.jobs...)
	b.signal()
}

func (b *Broadcaster) listFunc() func(context.Context, metav1.ListOptions) (*eventsv1.EventList, error) {
	switch s := b.sink.(type) {
	case Lister:
		return s.List
	case *clientevents.EventSinkImpl:
		return s.Interface.Events(metav1.NamespaceAll).List
	}
	return nil
}

// resume lists the events this controller and instance wrote before and
// tracks those still ongoing: series not finished (ongoing, or unknown
// after a Shutdown, which becomes ongoing again) and singletons, whose
// last occurrence is within FinishAfter; a series left ongoing or unknown
// whose last occurrence is older is written finished. An occurrence already counted in
// memory for the same key is folded into the listed object.
func (b *Broadcaster) resume(ctx context.Context, j *resumeJob) {
	list := b.listFunc()
	ctx, cancel := context.WithTimeout(ctx, b.o.resumeTimeout)
	defer cancel()
	// eventsd selects on reportingInstance; kube-apiserver refuses that
	// label (400), so fall back to the controller and filter here.
	selectors := []string{
		fields.Set{"reportingController": j.controller, "reportingInstance": j.instance}.String(),
		fields.Set{"reportingController": j.controller}.String(),
	}
	var items []eventsv1.Event
	for i, sel := range selectors {
		var err error
		items, err = listAll(ctx, list, sel)
		if err == nil {
			break
		}
		if !apierrors.IsBadRequest(err) || i == len(selectors)-1 {
			b.o.logger.Error(err, "listing earlier events to resume their series; continuing without", "reportingController", j.controller)
			return
		}
	}
	now := b.o.clock.Now()
	resumed := 0
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range items {
		ev := &items[i]
		if ev.ReportingController != j.controller || ev.ReportingInstance != j.instance {
			continue
		}
		count, last := int32(1), ev.EventTime.Time
		if ev.Series != nil {
			count, last = ev.Series.Count, ev.Series.LastObservedTime.Time
		}
		state := ev.Annotations[SeriesStateAnnotation]
		if state == SeriesFinished {
			continue // over: a new occurrence starts a new event
		}
		if !now.Before(last.Add(b.o.finishAfter)) {
			// Over too, but left ongoing or unknown by a recorder that
			// stopped: this one, the same instance, writes it finished.
			if b.o.stateAnnotation && count >= 2 && state != "" {
				base := ev.DeepCopy()
				base.Series, base.ResourceVersion = nil, ""
				s := &series{event: base, count: count, lastObserved: last, created: true, written: count,
					lastWrite: now, state: state, finished: true, removed: true}
				b.queueWriteLocked(s)
			}
			continue
		}
		k := eventKey{eventType: ev.Type, action: ev.Action, reason: ev.Reason, controller: ev.ReportingController,
			instance: ev.ReportingInstance, regarding: objectKeyOf(&ev.Regarding)}
		if ev.Related != nil {
			k.related = objectKeyOf(ev.Related)
		}
		if s := b.series[k]; s != nil {
			if s.created {
				continue
			}
			// Counted before the list came back: continue the listed
			// object rather than create a second one.
			s.event.Name, s.event.Namespace = ev.Name, ev.Namespace
			s.count += count
			s.written, s.created = count, true
			if last.After(s.lastObserved) {
				s.lastObserved = last
			}
			if s.queued {
				b.newWrites--
			}
			b.queueWriteLocked(s)
			resumed++
			continue
		}
		base := ev.DeepCopy()
		base.Series, base.ResourceVersion = nil, ""
		s := &series{key: k, event: base, count: count, lastObserved: last, created: true, written: count, lastWrite: now}
		b.series[k] = s
		if count >= 2 {
			s.state = state
			if b.o.stateAnnotation && state != SeriesOngoing {
				b.queueWriteLocked(s) // counted again: ongoing, not unknown
			}
		}
		b.scheduleLocked(s, b.nextDueLocked(s)) // its finish, or its next live count
		resumed++
	}
	b.metrics.ActiveSeries.Set(float64(len(b.series)))
	if resumed > 0 {
		b.o.logger.Info("Resumed earlier events", "reportingController", j.controller, "reportingInstance", j.instance, "events", resumed)
	}
}

// listAll lists every event selector selects, listPage at a time.
func listAll(ctx context.Context, list func(context.Context, metav1.ListOptions) (*eventsv1.EventList, error), selector string) ([]eventsv1.Event, error) {
	var out []eventsv1.Event
	err := pager.Each(ctx, metav1.ListOptions{FieldSelector: selector, Limit: listPage}, list, func(l *eventsv1.EventList) error {
		out = append(out, l.Items...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
