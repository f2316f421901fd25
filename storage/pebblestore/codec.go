package pebblestore

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// An object value is a 16-byte header (revision, expiry in unix nanoseconds)
// followed by the Event in protobuf without its resourceVersion.
const objectHeader = 16

func encodeObject(rev, expiry int64, proto []byte) []byte {
	v := make([]byte, objectHeader+len(proto))
	binary.BigEndian.PutUint64(v, uint64(rev))
	binary.BigEndian.PutUint64(v[8:], uint64(expiry))
	copy(v[objectHeader:], proto)
	return v
}

func objectHeaderOf(v []byte) (rev, expiry int64, proto []byte, err error) {
	if len(v) < objectHeader {
		return 0, 0, nil, fmt.Errorf("corrupt object value of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), v[objectHeader:], nil
}

// decodeEvent decodes a stored Event and stamps it with rev.
func decodeEvent(proto []byte, rev int64) (*corev1.Event, error) {
	ev := &corev1.Event{}
	if err := ev.Unmarshal(proto); err != nil {
		return nil, fmt.Errorf("decoding stored event: %w", err)
	}
	eventapi.SetCoreTypeMeta(ev)
	ev.ResourceVersion = strconv.FormatInt(rev, 10)
	return ev, nil
}

func decodeObject(v []byte) (*corev1.Event, int64, error) {
	rev, _, proto, err := objectHeaderOf(v)
	if err != nil {
		return nil, 0, err
	}
	ev, err := decodeEvent(proto, rev)
	return ev, rev, err
}

// A log value is a type byte and then:
//
//	logAddedRef:  the object's "<ns>/<name>". The object is not copied: it
//	              is read from the object key, which holds it while its
//	              revision is this one. The write that overwrites it (an
//	              update or a deletion) replaces the reference with a
//	              logAdded copy in the same batch (see materializeCreate),
//	              so the log keeps every state of the window. Logs written
//	              before that could hold a reference to a moved-on object;
//	              readers skip those (see watcher.skipped).
//	logModified:  uvarint length, the object, and the previous object only
//	              when a selectable field or a label changed (otherwise any
//	              selector treats both alike and the previous state is not
//	              needed).
//	logDeleted:   uvarint length, the last state.
//	logAdded:     uvarint length, the object: a create whose object has
//	              been overwritten since.
//
// So a create, the common write, adds a few dozen bytes to the log rather
// than a second copy of the event, unless the event is updated or deleted
// while its create is in the log.
const (
	logAdded    = 'A'
	logAddedRef = 'a'
	logModified = 'M'
	logDeleted  = 'D'
)

func encodeLog(typ byte, obj, prev []byte) []byte {
	v := make([]byte, 0, 1+binary.MaxVarintLen64+len(obj)+len(prev))
	v = append(v, typ)
	v = binary.AppendUvarint(v, uint64(len(obj)))
	v = append(v, obj...)
	return append(v, prev...)
}

func encodeLogRef(sfx []byte) []byte {
	return append([]byte{logAddedRef}, sfx...)
}

// decodeLog decodes the log entry at rev. resolve reads an object by its
// suffix from the same snapshot the entry was read from; a reference whose
// object has moved on yields an entry with skip set.
func decodeLog(rev int64, v []byte, resolve func(sfx []byte) (*corev1.Event, int64, error)) (entry, error) {
	if len(v) >= 2 && v[0] == logAddedRef {
		obj, objRev, err := resolve(v[1:])
		if err != nil {
			return entry{}, err
		}
		if obj == nil || objRev != rev {
			return entry{rev: rev, skip: string(v[1:])}, nil
		}
		return entry{rev: rev, typ: watch.Added, obj: obj}, nil
	}
	if len(v) < 2 {
		return entry{}, fmt.Errorf("corrupt log value at revision %d", rev)
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || uint64(len(v)-1-w) < n {
		return entry{}, fmt.Errorf("corrupt log value at revision %d", rev)
	}
	objBytes, prevBytes := v[1+w:1+w+int(n)], v[1+w+int(n):]
	e := entry{rev: rev}
	switch v[0] {
	case logAdded:
		e.typ = watch.Added
	case logModified:
		e.typ = watch.Modified
	case logDeleted:
		e.typ = watch.Deleted
	default:
		return entry{}, fmt.Errorf("corrupt log type %q at revision %d", v[0], rev)
	}
	var err error
	if e.obj, err = decodeEvent(objBytes, rev); err != nil {
		return entry{}, err
	}
	switch {
	case len(prevBytes) > 0:
		if e.prev, err = decodeEvent(prevBytes, rev); err != nil {
			return entry{}, err
		}
	case e.typ == watch.Modified:
		e.sameSelection = true
	}
	return e, nil
}
