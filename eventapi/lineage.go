package eventapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LineageResource is the plural resource eventsd's own group serves the
// ownership lineage under: GET /apis/events.kubevents.io/v1
// [/namespaces/NS]/lineages?fieldSelector=family.kind=...,family.name=...
// lists the objects of a family (what a family.* selector of events
// covers), for clients that draw it as a tree (evctl timeline, the web
// page). It is read-only and list-only, and takes only family.* field
// selectors.
const LineageResource = "lineages"

// Lineage is what eventsd knows of one object events are about
// (events.kubevents.io/v1, kind Lineage): its identity, its owners, the
// node a Pod ran on, when it was seen and whether it was deleted.
// metadata.name is the object's uid, or "name:KIND:NAMESPACE:NAME" for an
// object known only by name (from a controller's event that named it).
type Lineage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	// Object is the object: kind, apiVersion, namespace, name and (when
	// known) uid.
	Object corev1.ObjectReference `json:"object"`
	// Owners are the objects that own it, as far as eventsd knows them
	// (an owner it never saw has only its uid).
	Owners []corev1.ObjectReference `json:"owners,omitempty"`
	// Node is the node a Pod ran on.
	Node string `json:"node,omitempty"`
	// FirstSeen is when the object was created or first seen; LastSeen
	// the last time it was seen existing (its deletion, when Deleted).
	FirstSeen metav1.Time `json:"firstSeen"`
	LastSeen  metav1.Time `json:"lastSeen"`
	// Deleted is set once the object was seen deleted.
	Deleted bool `json:"deleted,omitempty"`
}

// LineageList is a family's objects: the named object first, then the
// objects it owns, depth first (owners before what they own), then, with
// family.withNodes, the Nodes its Pods ran on.
type LineageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Lineage `json:"items"`
}
