package fieldmanager

import (
	"sync"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxCachedShapes bounds createCache: recorders create events of a few
// shapes (a legacy event, a new one, a series), so a few dozen are
// usual; past the bound, creates of new shapes take the full path.
const maxCachedShapes = 1024

// shape is what decides the field set of a created event without maps or
// lists: the API version it is written through, and which of its fields
// are set. The field manager's field set of such an event is a function
// of it: the fields whose values are set, with ObjectReference and
// every other structure the schema makes atomic as one field.
// TestShapeCoversEveryField keeps it complete as k8s.io/api changes.
type shape uint64

// Bits of a shape.
const (
	setGenerateName shape = 1 << iota
	setReason
	setMessage
	setSourceComponent
	setSourceHost
	setFirstTimestamp
	setLastTimestamp
	setCount
	setType
	setEventTime
	setSeries
	setSeriesCount
	setSeriesLastObservedTime
	setAction
	setRelated
	setReportingController
	setReportingInstance
	eventsV1 // written through events.k8s.io/v1
)

// shapeOf returns ev's shape when it has one: no labels, annotations,
// owner references, finalizers, managed fields or deletion fields (whose
// entries in the field set depend on their keys, not only on being
// set). The involved object is always set (it is not optional) and is
// atomic, as are the related object and a series' fields.
func shapeOf(v eventapi.Version, ev *corev1.Event) (shape, bool) {
	m := &ev.ObjectMeta
	if m.Labels != nil || m.Annotations != nil || m.OwnerReferences != nil || m.Finalizers != nil ||
		m.ManagedFields != nil || m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil {
		return 0, false
	}
	var s shape
	set := func(b shape, ok bool) {
		if ok {
			s |= b
		}
	}
	set(setGenerateName, m.GenerateName != "")
	set(setReason, ev.Reason != "")
	set(setMessage, ev.Message != "")
	set(setSourceComponent, ev.Source.Component != "")
	set(setSourceHost, ev.Source.Host != "")
	set(setFirstTimestamp, !ev.FirstTimestamp.IsZero())
	set(setLastTimestamp, !ev.LastTimestamp.IsZero())
	set(setCount, ev.Count != 0)
	set(setType, ev.Type != "")
	set(setEventTime, !ev.EventTime.IsZero())
	if ev.Series != nil {
		s |= setSeries
		set(setSeriesCount, ev.Series.Count != 0)
		set(setSeriesLastObservedTime, !ev.Series.LastObservedTime.IsZero())
	}
	set(setAction, ev.Action != "")
	set(setRelated, ev.Related != nil)
	set(setReportingController, ev.ReportingController != "")
	set(setReportingInstance, ev.ReportingInstance != "")
	set(eventsV1, v == eventapi.EventsV1)
	return s, true
}

// createCache remembers, per shape, the field set the field manager
// recorded for a create of that shape, so that later creates of the shape
// get their managedFields entry without converting the event to a typed
// value and walking it (two thirds of a create's field-manager cost, and
// a quarter of eventsd's CPU per create): the cheap path kube-apiserver
// does not have.
type createCache struct {
	mu     sync.RWMutex
	fields map[shape]entryTemplate
}

// entryTemplate is the managedFields entry of a create of one shape,
// but for its manager and time.
type entryTemplate struct {
	apiVersion string
	fieldsV1   []byte
}

// fill sets ev's managedFields from the shape's cached entry, reporting
// whether there was one. The entry is the field manager's for a create:
// one Update by manager at the current time (on the wall clock, as the
// field manager's own).
func (c *createCache) fill(key shape, ev *corev1.Event, manager string) bool {
	c.mu.RLock()
	t, ok := c.fields[key]
	c.mu.RUnlock()
	if !ok {
		return false
	}
	ev.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: t.apiVersion,
		Time:       &metav1.Time{Time: time.Now().UTC()},
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: t.fieldsV1},
	}}
	return true
}

// learn caches the entry the field manager gave out, a create of shape
// key by manager, if it is that: exactly one Update entry of manager.
func (c *createCache) learn(key shape, out *corev1.Event, manager string) {
	if len(out.ManagedFields) != 1 {
		return
	}
	e := out.ManagedFields[0]
	if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationUpdate || e.FieldsType != "FieldsV1" ||
		e.FieldsV1 == nil || e.Subresource != "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fields == nil {
		c.fields = map[shape]entryTemplate{}
	}
	if _, ok := c.fields[key]; !ok && len(c.fields) < maxCachedShapes {
		c.fields[key] = entryTemplate{apiVersion: e.APIVersion, fieldsV1: e.FieldsV1.Raw}
	}
}
