package events

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientevents "k8s.io/client-go/tools/events"

	"github.com/kubevents/kubevents/internal/seriesstate"
)

// The interfaces are client-go's, so that values of this package can be
// used wherever client-go's are.
type (
	// EventSink writes events; client-go's *events.EventSinkImpl is one.
	EventSink = clientevents.EventSink
	// EventRecorder records events.
	EventRecorder = clientevents.EventRecorder
	// EventRecorderLogger is an EventRecorder with a settable logger.
	EventRecorderLogger = clientevents.EventRecorderLogger
	// AnnotatedEventRecorder records events with annotations.
	AnnotatedEventRecorder = clientevents.AnnotatedEventRecorder
	// EventBroadcaster is client-go's broadcaster interface.
	EventBroadcaster = clientevents.EventBroadcaster
)

// Lister is implemented by sinks that can list events; a broadcaster over
// one resumes the series it finds (see WithResume). client-go's
// *events.EventSinkImpl is recognised without implementing it.
type Lister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*eventsv1.EventList, error)
}

// SeriesStateAnnotation ("events.kubevents.io/series-state") is set on
// events in a series, with the redesign's three states (client-go's
// EventSeriesStateOngoing, Finished and Unknown, lower-cased):
// SeriesOngoing while occurrences may still be counted; SeriesFinished once
// the series has been idle for FinishAfter and its final count is written;
// SeriesUnknown when the recorder stopped (Shutdown) while the series was
// ongoing, with the count it had: nobody counts it any more, unless a
// recorder with the same reporting instance resumes it (NewRecorder), which
// sets it back to SeriesOngoing.
const (
	SeriesStateAnnotation = seriesstate.Annotation
	SeriesOngoing         = seriesstate.Ongoing
	SeriesFinished        = seriesstate.Finished
	SeriesUnknown         = seriesstate.Unknown
)

// Compile-time checks against client-go's interfaces.
var (
	_ EventBroadcaster       = (*Broadcaster)(nil)
	_ EventRecorderLogger    = (*recorder)(nil)
	_ AnnotatedEventRecorder = (*recorder)(nil)
)
