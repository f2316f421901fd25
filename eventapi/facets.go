package eventapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FacetResource is the plural resource eventsd's own group serves
// summaries of events under: GET /apis/events.kubevents.io/v1
// [/namespaces/NS]/facets takes a list's fieldSelector, labelSelector,
// filter, since and until, and answers how many occurrences (series and
// counts summed, not events) the selected events report, by value of each
// FacetField and by time bucket. It is read-only and list-only.
const FacetResource = "facets"

// The fields facets count by: the Facet.Field values.
const (
	FacetReason              = "reason"
	FacetType                = "type"
	FacetKind                = "kind"      // regarding (involvedObject) kind
	FacetNamespace           = "namespace" // the event's namespace
	FacetReportingController = "reportingController"
	// FacetTime is the time buckets: Facet.Value is a bucket's start
	// (RFC 3339), FacetList.BucketSeconds its width, and an event counts
	// in the bucket of its last observation (LastObserved).
	FacetTime = "time"
)

// FacetFields are the fields facets count by, in the order a FacetList
// gives them.
var FacetFields = []string{FacetReason, FacetType, FacetKind, FacetNamespace, FacetReportingController, FacetTime}

// Facet is one value of one field and what the selected events with that
// value report.
type Facet struct {
	// Field is one of FacetFields.
	Field string `json:"field"`
	// Value is the field's value ("" when events leave it empty), or a
	// time bucket's start.
	Value string `json:"value"`
	// Other is set on the facet that counts together the field's values
	// beyond the top ones given (Value is then empty).
	Other bool `json:"other,omitempty"`
	// Occurrences is the occurrences the events report (Occurrences
	// summed); Events how many events there are.
	Occurrences int64 `json:"occurrences"`
	Events      int64 `json:"events"`
}

// FacetList is a summary of the events a selector, filter and time range
// select (events.kubevents.io/v1, kind FacetList): per field, its values
// with the most occurrences first (at most the request's top, 10 by
// default), then the time buckets in time order.
type FacetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	// Since and Until are the time range summarized: the request's, or
	// (when it gave none) the selected events' first and last observation.
	Since *metav1.Time `json:"since,omitempty"`
	Until *metav1.Time `json:"until,omitempty"`
	// BucketSeconds is the width of the time buckets.
	BucketSeconds int64 `json:"bucketSeconds,omitempty"`
	// Occurrences and Events are the totals over every selected event.
	Occurrences int64 `json:"occurrences"`
	Events      int64 `json:"events"`
	// Items are the facets.
	Items []Facet `json:"items"`
}
