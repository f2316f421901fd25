package record

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// EventSink stores events; it is client-go's interface, so
// &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")} and any
// custom sink written for client-go work unchanged. Only Create and Patch
// are called.
type EventSink = record.EventSink

// EventRecorder records events about objects; it is client-go's interface.
type EventRecorder = record.EventRecorder

// EventRecorderLogger is an EventRecorder with a replaceable logger; it is
// client-go's interface, and what NewRecorder returns.
type EventRecorderLogger = record.EventRecorderLogger

// EventBroadcaster is client-go's broadcaster interface, which *Broadcaster
// implements.
type EventBroadcaster = record.EventBroadcaster

// CorrelatorOptions configure aggregation, deduplication and the spam
// filter; it is client-go's struct, so existing option values carry over.
// As in client-go, a zero field means its default. Two defaults differ from
// client-go: SpamKeyFunc defaults to SpamKeyByReason, and Clock, when set
// and no WithClock is given, drives the whole broadcaster (see WithClock).
type CorrelatorOptions = record.CorrelatorOptions

// EventAggregatorKeyFunc groups events for aggregation: events with the same
// aggregate key and different local keys count as distinct similar events.
type EventAggregatorKeyFunc = record.EventAggregatorKeyFunc

// EventAggregatorMessageFunc builds the message of an aggregated event.
type EventAggregatorMessageFunc = record.EventAggregatorMessageFunc

// EventSpamKeyFunc returns the spam-filter bucket an event is counted in.
type EventSpamKeyFunc = record.EventSpamKeyFunc

// Lister lists events. WithResume needs the sink to be listable: either a
// *typedcorev1.EventSinkImpl (its Interface lists) or a custom sink that
// implements Lister; typedcorev1.EventInterface has this method.
type Lister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.EventList, error)
}

// Compile-time checks that the types satisfy client-go's interfaces, so
// values can be passed wherever client-go's are expected.
var (
	_ record.EventBroadcaster           = (*Broadcaster)(nil)
	_ record.EventRecorderLogger        = (*recorder)(nil)
	_ record.EventAggregatorKeyFunc     = EventAggregatorByReasonFunc
	_ record.EventAggregatorMessageFunc = EventAggregatorByReasonMessageFunc
	_ record.EventSpamKeyFunc           = SpamKeyByReason
	_ record.EventSpamKeyFunc           = SpamKeyByObject
)
