package export

import (
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage/clusterview"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// Filter selects the changes a sink gets: those whose event is of one of
// the clusters and meets the criteria, and whose kind of change is wanted
// (creates always are; updates unless Updates is false; deletions only
// when Deletions is true).
type Filter struct {
	// Clusters are the clusters of a fleet whose events the sink gets:
	// cluster names, "" the root cluster; empty, every cluster's.
	Clusters clusterview.Names `json:"clusters,omitempty"`
	// Criteria are the events' (real, not storage) namespaces, types,
	// reasons and reporting controllers; empty lists match any value.
	eventapi.Criteria `json:",inline"`
	// Updates, true when unset, exports updates: above all the count
	// changes of a repeating event (a series growing from 2 to 600).
	Updates *bool `json:"updates,omitempty"`
	// Deletions exports deletions too (by a client or by TTL expiry),
	// with the event's last state.
	Deletions bool `json:"deletions,omitempty"`
}

// Validate returns the filter's errors, under path.
func (f *Filter) Validate(path *field.Path) field.ErrorList {
	return append(f.Clusters.Validate(path.Child("clusters")), f.Criteria.Validate(path)...)
}

// Matches reports whether the change of type t to ev, an event of
// cluster cluster ("" the root) with its real namespace, is one of the
// filter's.
func (f *Filter) Matches(t watch.EventType, cluster string, ev *corev1.Event) bool {
	switch t {
	case watch.Added:
	case watch.Modified:
		if f.Updates != nil && !*f.Updates {
			return false
		}
	case watch.Deleted:
		if !f.Deletions {
			return false
		}
	default:
		return false
	}
	return f.Clusters.Matches(cluster) && f.Criteria.Matches(ev)
}
