package pebblestore

import (
	"bytes"
	"encoding/binary"

	"github.com/kubevents/kubevents/storage/index"
	corev1 "k8s.io/api/core/v1"
)

// Key prefixes. Besides these: 'm' the metadata keys below, 'c' the
// cursors (cursor.go, prefixCursor), 'r' the records (records.go,
// prefixRecord). Every scan is bounded by the prefix it reads, so none
// meets another prefix's keys.
const (
	prefixObject = 'o'
	prefixLog    = 'l'
	prefixExpiry = 'x'
	prefixIndex  = 'i'
)

// Metadata keys, under 'm'.
var (
	metaRevision = []byte("mrev")
	metaCount    = []byte("mcount")
	metaOldest   = []byte("moldest")
	metaBytes    = []byte("mbytes") // the stored events' bytes, as the budget counts them
	// metaTimeIndex is the revision up to which the LastObserved index
	// entries are complete (see timeindex.go): written with every commit
	// that maintains them.
	metaTimeIndex = []byte("mtimeidx")
)

// objectKey is etcd's key order: namespace, '/', name. Neither may contain
// '/', so the key is unambiguous and lists come out in kube-apiserver order.
func objectKey(ns, name string) []byte {
	k := make([]byte, 0, 2+len(ns)+len(name))
	k = append(k, prefixObject)
	k = append(k, ns...)
	k = append(k, '/')
	return append(k, name...)
}

func splitSuffix(s []byte) (ns, name string, ok bool) {
	i := bytes.IndexByte(s, '/')
	if i < 0 {
		return "", "", false
	}
	return string(s[:i]), string(s[i+1:]), true
}

func logKey(rev int64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], uint64(rev))
	return k
}

func expiryKey(expiry int64, sfx []byte) []byte {
	k := make([]byte, 9, 9+len(sfx))
	k[0] = prefixExpiry
	binary.BigEndian.PutUint64(k[1:], uint64(expiry))
	return append(k, sfx...)
}

// indexPrefix returns the key prefix under which index id holds value
// (index.AppendEntryPrefix after the 'i' byte).
func indexPrefix(id index.ID, value string) []byte {
	return appendIndexPrefix(make([]byte, 0, 4+len(value)), id, value)
}

// appendIndexPrefix appends indexPrefix(id, value) to k.
func appendIndexPrefix(k []byte, id index.ID, value string) []byte {
	return index.AppendEntryPrefix(append(k, prefixIndex), id, value)
}

// indexKey is indexPrefix(id, value) followed by sfx, in one allocation
// (a write makes one per index entry).
func indexKey(id index.ID, value string, sfx []byte) []byte {
	return append(appendIndexPrefix(make([]byte, 0, 4+len(value)+len(sfx)), id, value), sfx...)
}

// indexKeys returns the index entries of ev in the indexes of set (the
// store's: the shared package's Base set, whose IDs its keys hold): one per
// value it contributes to an index (empty values are not indexed).
func indexKeys(set index.Set, ev *corev1.Event, sfx []byte) [][]byte {
	keys := make([][]byte, 0, set.Len())
	for id, v := range set.Entries(ev) {
		keys = append(keys, indexKey(id, v, sfx))
	}
	return keys
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte { return index.PrefixEnd(p) }
