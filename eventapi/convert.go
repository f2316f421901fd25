package eventapi

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// coreTypeMeta and eventsTypeMeta are the TypeMeta each version's objects
// carry on the wire; list items carry them too.
var (
	coreTypeMeta   = metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}
	eventsTypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}
)

// SetCoreTypeMeta sets ev's kind and apiVersion to core/v1 Event.
func SetCoreTypeMeta(ev *corev1.Event) { ev.TypeMeta = coreTypeMeta }

// ToEventsV1 converts a core/v1 Event to its events.k8s.io/v1 form with
// upstream's field mapping (involvedObject→regarding, message→note,
// source→deprecatedSource, firstTimestamp/lastTimestamp/count→deprecated*).
// No field is synthesised. The result shares maps and slices with in.
func ToEventsV1(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		TypeMeta:                 eventsTypeMeta,
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// FromEventsV1 converts an events.k8s.io/v1 Event to the core/v1 storage
// form; it is the inverse of ToEventsV1. The result shares maps and slices
// with in.
func FromEventsV1(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		TypeMeta:            coreTypeMeta,
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		Action:              in.Action,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}
