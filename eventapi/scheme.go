package eventapi

import (
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AddKubeventsToScheme registers events.k8s.io/v1's Event and EventList
// under events.kubevents.io/v1 (KubeventsV1's objects have that shape),
// with the meta types every group-version has (WatchEvent, ListOptions,
// ...), so that a client-go REST client whose serializer uses s decodes
// eventsd's own group, watches included, into *eventsv1.Event. Send list
// options with metav1.ParameterCodec.
func AddKubeventsToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(KubeventsGroupVersion, &eventsv1.Event{}, &eventsv1.EventList{})
	metav1.AddToGroupVersion(s, KubeventsGroupVersion)
	return nil
}
