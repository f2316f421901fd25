package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
)

// prefixCursor keys the cursors of storage.CursorStore: c <name> → the
// revision, 8 bytes big-endian. They are not objects, change-log entries
// or index entries, so lists, watches and counts never meet them.
const prefixCursor = 'c'

// maxCursorName bounds a cursor's name: names are sink names from
// eventsd's configuration, not client input, but a key stays small. A
// name has no '/', as on etcd, where it is one key segment.
const maxCursorName = 253

var _ storage.CursorStore = (*Store)(nil)

func cursorKey(name string) []byte {
	return append([]byte{prefixCursor}, name...)
}

func checkCursorName(name string) error {
	if name == "" || len(name) > maxCursorName || strings.Contains(name, "/") {
		return fmt.Errorf("pebblestore: invalid cursor name %q: it must have 1 to %d bytes and no '/'", name, maxCursorName)
	}
	return nil
}

// Cursor implements storage.CursorStore: the revision last saved under
// name, and whether one is.
func (s *Store) Cursor(ctx context.Context, name string) (int64, bool, error) {
	if err := checkCursorName(name); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	// Close closes the database once it has set stopped under submitMu:
	// reading under submitMu keeps it open.
	s.submitMu.RLock()
	defer s.submitMu.RUnlock()
	if s.stopped {
		return 0, false, storage.ErrClosed
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return 0, false, s.health.err()
	}
	val, closer, err := s.db.Get(cursorKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pebblestore: reading cursor %q: %w", name, err)
	}
	defer closer.Close()
	if len(val) != 8 {
		return 0, false, fmt.Errorf("pebblestore: corrupt cursor %q", name)
	}
	return int64(binary.BigEndian.Uint64(val)), true, nil
}

// SaveCursor implements storage.CursorStore. The cursor goes through the
// committer with the writes waiting beside it, in the same synced batch
// (it takes no revision and publishes nothing), so it is as durable as an
// acknowledged write and costs the events no extra fsync; on a full disk
// it fails with storage.ErrUnavailable as writes do.
func (s *Store) SaveCursor(ctx context.Context, name string, rev int64) error {
	if err := checkCursorName(name); err != nil {
		return err
	}
	if rev < 0 {
		return fmt.Errorf("pebblestore: cursor %q: negative revision %d", name, rev)
	}
	return s.submit(ctx, &op{kind: opCursor, name: name, cursorRev: rev})
}
