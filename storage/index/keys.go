package index

// AppendEntryPrefix appends to dst the on-disk key prefix under which index
// id holds value: the id's byte, then the value escaped (0x00 → 0x00 0xff)
// and terminated by 0x00 0x01, so that no value's prefix is another
// value's and byte order is the values' order. The entry's key follows it
// ("<namespace>/<name>"). pebblestore's index keys and the etcd backend's
// on-disk index (storage/diskindex) share this layout.
func AppendEntryPrefix(dst []byte, id ID, value string) []byte {
	dst = append(dst, byte(id))
	for i := 0; i < len(value); i++ {
		dst = append(dst, value[i])
		if value[i] == 0 {
			dst = append(dst, 0xff)
		}
	}
	return append(dst, 0, 1)
}

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xff): an iterator's upper bound.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
