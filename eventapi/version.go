package eventapi

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Version identifies one of the two API group-versions that serve Events.
type Version int

const (
	// CoreV1 is the legacy core/v1 API (/api/v1).
	CoreV1 Version = iota
	// EventsV1 is the events.k8s.io/v1 API (/apis/events.k8s.io/v1).
	EventsV1
)

// Resource is the plural resource name both groups serve.
const Resource = "events"

// GroupVersion returns the schema.GroupVersion of v.
func (v Version) GroupVersion() schema.GroupVersion {
	if v == EventsV1 {
		return eventsv1.SchemeGroupVersion
	}
	return corev1.SchemeGroupVersion
}

// Group returns the API group of v ("" for core).
func (v Version) Group() string { return v.GroupVersion().Group }

// APIVersion returns the apiVersion string objects of v carry ("v1" or
// "events.k8s.io/v1").
func (v Version) APIVersion() string { return v.GroupVersion().String() }

// GroupResource returns the qualified resource of v, used in Status details.
func (v Version) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: v.Group(), Resource: Resource}
}

// String names v for logs and metrics labels.
func (v Version) String() string { return v.APIVersion() }
