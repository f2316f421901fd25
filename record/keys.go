package record

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AggregatePrefix starts the message of an aggregated event (client-go's
// text, which users grep for).
const AggregatePrefix = "(combined from similar events): "

// keySep joins key parts in the exported string key functions. client-go
// joins with an empty separator, which makes keys ambiguous (component "ab"
// with host "c" equals "a" with "bc"); NUL cannot occur in names, kinds or
// hosts.
const keySep = "\x00"

// objectParts are the source, involved object, type and reason of an event:
// the parts every correlator key shares. The internal keys are structs of
// strings rather than concatenations, so building one allocates nothing and
// two different events can never share a key by accident.
type objectParts struct {
	component, host                        string
	kind, namespace, name, uid, apiVersion string
	eventType, reason                      string
}

func partsOf(e *corev1.Event) objectParts {
	return objectParts{
		component:  e.Source.Component,
		host:       e.Source.Host,
		kind:       e.InvolvedObject.Kind,
		namespace:  e.InvolvedObject.Namespace,
		name:       e.InvolvedObject.Name,
		uid:        string(e.InvolvedObject.UID),
		apiVersion: e.InvolvedObject.APIVersion,
		eventType:  e.Type,
		reason:     e.Reason,
	}
}

// keyKind tells what a correlationKey identifies.
type keyKind uint8

const (
	// keyEvent: one event; a and b are the involved object's fieldPath and
	// the message (client-go's getEventKey).
	keyEvent keyKind = iota
	// keyAggregate: the aggregate group of the default key function; a and
	// b are the reportingController and reportingInstance
	// (client-go's EventAggregatorByReasonFunc).
	keyAggregate
	// keyCustom: a key returned by a caller's EventAggregatorKeyFunc.
	keyCustom
)

// correlationKey identifies an event in the deduplication cache and an
// aggregate group in the aggregator. An aggregated event is deduplicated
// under its group's key, so every later aggregated occurrence counts on the
// one combined event.
type correlationKey struct {
	obj    objectParts
	a, b   string
	custom string
	kind   keyKind
}

// eventKey is the deduplication key of an event: source, involved object
// (with fieldPath, without resourceVersion), type, reason and message.
func eventKey(e *corev1.Event) correlationKey {
	return correlationKey{obj: partsOf(e), a: e.InvolvedObject.FieldPath, b: e.Message, kind: keyEvent}
}

// aggregateKey is the default aggregate group of an event: source, involved
// object (without fieldPath), type, reason, reportingController and
// reportingInstance.
func aggregateKey(e *corev1.Event) correlationKey {
	return correlationKey{obj: partsOf(e), a: e.ReportingController, b: e.ReportingInstance, kind: keyAggregate}
}

// spamKey is a spam-filter bucket: by default source, involved object
// (without fieldPath), type and reason; or a caller's EventSpamKeyFunc
// result.
type spamKey struct {
	obj    objectParts
	custom string
	isCust bool
}

func defaultSpamKey(e *corev1.Event) spamKey { return spamKey{obj: partsOf(e)} }

// EventAggregatorByReasonFunc groups events that differ only in their
// message: the aggregate key is the source, the involved object (without
// fieldPath), type, reason, reportingController and reportingInstance; the
// local key is the message. It is client-go's default grouping; the
// broadcaster uses an allocation-free equivalent when KeyFunc is nil.
func EventAggregatorByReasonFunc(e *corev1.Event) (aggregateKey, localKey string) {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type, e.Reason, e.ReportingController, e.ReportingInstance,
	}, keySep), e.Message
}

// EventAggregatorByReasonMessageFunc returns AggregatePrefix followed by the
// event's message, the message of client-go's aggregated events.
func EventAggregatorByReasonMessageFunc(e *corev1.Event) string {
	return AggregatePrefix + e.Message
}

// SpamKeyByReason is the default spam key: source, involved object (without
// fieldPath), type and reason. With it each reason has its own token
// bucket, so a burst of one reason cannot keep another reason about the same
// object from being recorded.
func SpamKeyByReason(e *corev1.Event) string {
	return SpamKeyByObject(e) + keySep + e.Reason
}

// SpamKeyByObject is client-go's default spam key (1.32+): source, involved
// object (without fieldPath) and type, but not reason. Pass it as
// CorrelatorOptions.SpamKeyFunc to get client-go's filtering.
func SpamKeyByObject(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type,
	}, keySep)
}
