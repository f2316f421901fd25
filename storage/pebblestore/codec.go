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

// A log value is a type byte, the length of the object protobuf as uvarint,
// the object, and (for MODIFIED) the previous object.
const (
	logAdded    = 'A'
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

func decodeLog(rev int64, v []byte) (entry, error) {
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
	if len(prevBytes) > 0 {
		if e.prev, err = decodeEvent(prevBytes, rev); err != nil {
			return entry{}, err
		}
	}
	return e, nil
}
