package storage

import (
	"errors"
	"fmt"
	"strings"
)

// Bounds of RecordStore names.
const (
	// MaxRecordSpace is the longest record space name: a cluster's name
	// (a DNS label), a '.', and a space of one of eventsd's packages (a
	// constant, itself at most a DNS label), as a cluster of a fleet keeps
	// its own spaces (package clusterview).
	MaxRecordSpace = 127
	// MaxRecordKey is the longest record key: a DNS subdomain's length,
	// enough for an object's UID or a namespace/name kept as one key
	// (with another separator than '/').
	MaxRecordKey = 253
)

// ErrInvalidRecord is wrapped by the errors of RecordStore calls whose
// space or keys are not valid; such a call reads or writes nothing.
var ErrInvalidRecord = errors.New("invalid record name")

// CheckRecordSpace returns an error wrapping ErrInvalidRecord unless space
// is a valid RecordStore space: 1 to MaxRecordSpace bytes of [a-z0-9.-].
func CheckRecordSpace(space string) error {
	if space == "" || len(space) > MaxRecordSpace {
		return fmt.Errorf("record space %q: it must have 1 to %d bytes: %w", space, MaxRecordSpace, ErrInvalidRecord)
	}
	for i := 0; i < len(space); i++ {
		if c := space[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("record space %q: byte %d (%q) is not one of [a-z0-9.-]: %w", space, i, c, ErrInvalidRecord)
		}
	}
	return nil
}

// CheckRecordWrites returns an error wrapping ErrInvalidRecord unless
// space is valid (CheckRecordSpace) and every write's key is 1 to
// MaxRecordKey bytes without '/', each key at most once (a call that
// wrote one key twice would depend on an order backends need not keep).
func CheckRecordWrites(space string, writes []RecordWrite) error {
	if err := CheckRecordSpace(space); err != nil {
		return err
	}
	seen := make(map[string]struct{}, len(writes))
	for i, w := range writes {
		if w.Key == "" || len(w.Key) > MaxRecordKey || strings.Contains(w.Key, "/") {
			return fmt.Errorf("record %d of space %q: key %q: it must have 1 to %d bytes and no '/': %w", i, space, w.Key, MaxRecordKey, ErrInvalidRecord)
		}
		if _, dup := seen[w.Key]; dup {
			return fmt.Errorf("record %d of space %q: key %q written twice in one call: %w", i, space, w.Key, ErrInvalidRecord)
		}
		seen[w.Key] = struct{}{}
	}
	return nil
}
