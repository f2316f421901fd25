package lineage

import (
	"context"

	"github.com/kubevents/kubevents/storage"
)

// RecordStore is where a Graph keeps its objects durably: the part of
// storage.RecordStore it uses, implemented by both backends.
type RecordStore interface {
	Records(ctx context.Context, space string, fn func(key string, value []byte) error) error
	SaveRecords(ctx context.Context, space string, writes []storage.RecordWrite) error
}

// EventChecker tells Collect whether the store still keeps an event of an
// object: one whose regarding or related object has the object's uid or,
// for objects known only by name, its kind, namespace and name.
type EventChecker interface {
	HasEvents(ctx context.Context, o *Object) (bool, error)
}

var _ RecordStore = storage.RecordStore(nil)
