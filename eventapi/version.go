package eventapi

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Version identifies one of the API group-versions that serve Events.
type Version int

const (
	// CoreV1 is the legacy core/v1 API (/api/v1).
	CoreV1 Version = iota
	// EventsV1 is the events.k8s.io/v1 API (/apis/events.k8s.io/v1).
	EventsV1
	// KubeventsV1 is eventsd's own group, events.kubevents.io/v1
	// (/apis/events.kubevents.io/v1): the events.k8s.io/v1 shape and field
	// selectors under a group kube-apiserver does not serve, so that a
	// cluster's kube-apiserver can register eventsd for it (an APIService)
	// while core/v1 and events.k8s.io/v1 stay its own. It is read-only.
	KubeventsV1
)

// Resource is the plural resource name every group serves.
const Resource = "events"

// KubeventsGroupVersion is the group-version of KubeventsV1.
var KubeventsGroupVersion = schema.GroupVersion{Group: "events.kubevents.io", Version: "v1"}

// GroupVersion returns the schema.GroupVersion of v.
func (v Version) GroupVersion() schema.GroupVersion {
	switch v {
	case EventsV1:
		return eventsv1.SchemeGroupVersion
	case KubeventsV1:
		return KubeventsGroupVersion
	}
	return corev1.SchemeGroupVersion
}

// Shape is the version whose object schema, field labels and validation
// v uses: KubeventsV1 has events.k8s.io/v1's, the others their own.
func (v Version) Shape() Version {
	if v == KubeventsV1 {
		return EventsV1
	}
	return v
}

// Group returns the API group of v ("" for core).
func (v Version) Group() string { return v.GroupVersion().Group }

// APIVersion returns the apiVersion string objects of v carry ("v1",
// "events.k8s.io/v1" or "events.kubevents.io/v1").
func (v Version) APIVersion() string { return v.GroupVersion().String() }

// GroupResource returns the qualified resource of v, used in Status details.
func (v Version) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: v.Group(), Resource: Resource}
}

// String names v for logs and metrics labels.
func (v Version) String() string { return v.APIVersion() }
