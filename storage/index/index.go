package index

import (
	"fmt"
	"iter"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ID identifies an index. The IDs are stable: pebblestore writes them in
// its index keys, so an ID is never reused for another field.
type ID byte

// The indexes. The first eight are pebblestore's on-disk indexes.
const (
	InvolvedUID        ID = 'u' // involvedObject.uid (regarding.uid)
	RelatedUID         ID = 'U' // related.uid
	InvolvedName       ID = 'n' // involvedObject.name (regarding.name)
	RelatedName        ID = 'N' // related.name
	Reason             ID = 'r' // reason
	ReportingComponent ID = 'c' // reportingComponent (reportingController)
	Source             ID = 's' // source (component, else reporting controller)
	Type               ID = 't' // type
	ReportingInstance  ID = 'i' // reportingInstance; not on pebble's disk
	Action             ID = 'a' // action; not on pebble's disk
	// LastObserved is the time an event was last observed
	// (eventapi.LastObserved), in buckets of BucketWidth (see Bucket): an
	// ordered index, served by Range lookups for a selector's time range.
	// It has no field: no equality selects it.
	LastObserved ID = 'l'
)

// Field returns the field id indexes, or "" for an unknown ID.
func (id ID) Field() eventapi.Field {
	switch id {
	case InvolvedUID:
		return eventapi.FieldInvolvedUID
	case RelatedUID:
		return eventapi.FieldRelatedUID
	case InvolvedName:
		return eventapi.FieldInvolvedName
	case RelatedName:
		return eventapi.FieldRelatedName
	case Reason:
		return eventapi.FieldReason
	case ReportingComponent:
		return eventapi.FieldReportingComponent
	case Source:
		return eventapi.FieldSource
	case Type:
		return eventapi.FieldType
	case ReportingInstance:
		return eventapi.FieldReportingInstance
	case Action:
		return eventapi.FieldAction
	}
	return ""
}

// String returns the indexed field's name.
func (id ID) String() string {
	if id == LastObserved {
		return "lastObserved"
	}
	if f := id.Field(); f != "" {
		return string(f)
	}
	return fmt.Sprintf("index(%q)", byte(id))
}

// involves maps the involves.* fields that have indexes to the pair of
// indexes (regarding, related) whose union holds their events.
var involves = [...]struct {
	field eventapi.Field
	pair  [2]ID
}{
	{eventapi.FieldInvolvesUID, [2]ID{InvolvedUID, RelatedUID}},
	{eventapi.FieldInvolvesName, [2]ID{InvolvedName, RelatedName}},
}

// Set is the indexes a backend keeps, in order of preference: the planner
// uses the first that applies, so the most selective come first. The
// LastObserved index, which no equality selects, comes last; see Plan for
// how a time range ranks.
type Set struct {
	ids []ID
	// clock, when set, is the now of open-ended time ranges (WithClock).
	clock clock.PassiveClock
}

// Base returns the indexes pebblestore keeps on disk, in its preference
// order: the uids, the names, then reason, reporting component, source and
// type, and the last-observed time. Adding one to it changes pebble's
// on-disk format: existing data lacks its entries, so pebblestore must
// backfill them at open (as it does for LastObserved, added by issue 32),
// or the index go to All only.
func Base() Set {
	return Set{ids: []ID{InvolvedUID, RelatedUID, InvolvedName, RelatedName, Reason, ReportingComponent, Source, Type, LastObserved}}
}

// All returns Base plus reportingInstance and action, which issue 11 asks
// the etcd backend to index too. ReportingInstance (one node or controller
// replica) comes after reason; action is about as coarse as reason.
func All() Set {
	return Set{ids: []ID{InvolvedUID, RelatedUID, InvolvedName, RelatedName, Reason, ReportingInstance, Action, ReportingComponent, Source, Type, LastObserved}}
}

// Without returns s without index id.
func (s Set) Without(id ID) Set {
	ids := make([]ID, 0, len(s.ids))
	for _, x := range s.ids {
		if x != id {
			ids = append(ids, x)
		}
	}
	s.ids = ids
	return s
}

// IDs returns the indexes of s in preference order.
func (s Set) IDs() []ID { return append([]ID(nil), s.ids...) }

// Len returns the number of indexes in s.
func (s Set) Len() int { return len(s.ids) }

// Has reports whether s keeps index id.
func (s Set) Has(id ID) bool { return s.pos(id) >= 0 }

// pos returns the position of id in s, or -1.
func (s Set) pos(id ID) int {
	for i, x := range s.ids {
		if x == id {
			return i
		}
	}
	return -1
}

// Entries yields, for each index of s in order, the value ev contributes
// to it (Value). Empty values are not indexed: they are common (legacy
// events have no reporting controller, most have no related object) and a
// selector asking for an empty value is served by a scan.
func (s Set) Entries(ev *corev1.Event) iter.Seq2[ID, string] {
	return func(yield func(ID, string) bool) {
		for _, id := range s.ids {
			if v := Value(ev, id); v != "" && !yield(id, v) {
				return
			}
		}
	}
}

// Value returns the value ev contributes to index id: its field's value,
// or for LastObserved the bucket of its last-observed time (never empty).
func Value(ev *corev1.Event, id ID) string {
	if id == LastObserved {
		return lastObservedValue(ev)
	}
	return eventapi.Value(ev, id.Field())
}
