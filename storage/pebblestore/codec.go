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

// withResourceVersion returns a stored Event's protobuf (written by
// Marshal with an empty resourceVersion) with its resourceVersion set to
// rev: what Marshal gives for the Event decodeEvent returns, without
// decoding it. Marshal writes ObjectMeta first (Event field 1) and in
// it every string field, empty ones too, in field order: name,
// generateName, namespace, selfLink, uid, then resourceVersion (field 6,
// empty). Anything else is an error (the caller encodes the decoded
// event instead).
func withResourceVersion(proto []byte, rev int64) ([]byte, error) {
	metaLen, n := binary.Uvarint(proto[min(1, len(proto)):])
	if len(proto) == 0 || proto[0] != 1<<3|2 || n <= 0 || metaLen > uint64(len(proto)-1-n) {
		return nil, fmt.Errorf("stored event: no metadata first")
	}
	metaStart := 1 + n
	meta := proto[metaStart : metaStart+int(metaLen)]
	rest := proto[metaStart+int(metaLen):]
	// Skip fields 1 to 5, each a tag byte and a length-delimited value.
	pos := 0
	for field := byte(1); field <= 5; field++ {
		if pos >= len(meta) || meta[pos] != field<<3|2 {
			return nil, fmt.Errorf("stored event: metadata field %d not where Marshal writes it", field)
		}
		l, n := binary.Uvarint(meta[pos+1:])
		if n <= 0 || l > uint64(len(meta)-pos-1-n) {
			return nil, fmt.Errorf("stored event: metadata field %d truncated", field)
		}
		pos += 1 + n + int(l)
	}
	if len(meta) < pos+2 || meta[pos] != 6<<3|2 || meta[pos+1] != 0 {
		return nil, fmt.Errorf("stored event: no empty resourceVersion where Marshal writes it")
	}
	var rv [20]byte
	rvb := strconv.AppendInt(rv[:0], rev, 10)
	newMetaLen := len(meta) + len(rvb) // field 6's length byte stays one byte (< 128)
	out := make([]byte, 0, 1+binary.MaxVarintLen64+newMetaLen+len(rest))
	out = binary.AppendUvarint(append(out, 1<<3|2), uint64(newMetaLen))
	out = append(out, meta[:pos]...)
	out = append(append(out, 6<<3|2, byte(len(rvb))), rvb...)
	out = append(out, meta[pos+2:]...)
	return append(out, rest...), nil
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
