package eventapi

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterAnnotation names the cluster of an event served across a fleet's
// clusters (at /clusters/*/): an eventsd mirroring several clusters serves
// each at /clusters/NAME/ and every one at once at /clusters/*/.
const ClusterAnnotation = "events.kubevents.io/cluster"

// ClusterList is what GET /clusters/ answers on an eventsd serving a
// fleet: its clusters, sorted by name. An eventsd without a fleet answers
// an empty list.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// Items are the fleet's clusters.
	Items []ClusterInfo `json:"items"`
}

// ClusterInfo is one cluster of a fleet.
type ClusterInfo struct {
	// Name is the cluster's name: its events are served at
	// /clusters/NAME/.
	Name string `json:"name"`
	// Root is set on the cluster the root also serves (a fleet of one).
	Root bool `json:"root,omitempty"`
	// ReadOnly is set when the cluster's events are written by eventsd
	// alone (a mirrored cluster).
	ReadOnly bool `json:"readOnly,omitempty"`
}
