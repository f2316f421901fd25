package pebblestore

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
)

// prefixRecord keys the records of storage.RecordStore:
// r <space> 0x00 <key> → the record's value as given. A space is
// [a-z0-9.-], so the 0x00 ends it: no space's keys fall among another's,
// and a space's keys sort by key. They are not objects, change-log
// entries or index entries, so lists, watches, counts, expiry and the
// storage budget never meet them.
const prefixRecord = 'r'

var _ storage.RecordStore = (*Store)(nil)

// recordPrefix is the prefix of the keys of space's records.
func recordPrefix(space string) []byte {
	k := make([]byte, 0, 2+len(space))
	k = append(k, prefixRecord)
	k = append(k, space...)
	return append(k, 0)
}

// stageRecords adds the writes of one SaveRecords to the group's batch.
func stageRecords(g *group, space string, writes []storage.RecordWrite) {
	p := recordPrefix(space)
	for _, w := range writes {
		k := append(append(make([]byte, 0, len(p)+len(w.Key)), p...), w.Key...)
		if w.Value == nil {
			g.batch.Delete(k)
		} else {
			g.batch.Set(k, w.Value)
		}
		g.records = true
	}
}

// Records implements storage.RecordStore: the records of space in the
// newest durable view, a pebble snapshot, so the scan sees one moment
// however long fn takes. The committer publishes a view after each group
// that writes records, so a Records after a SaveRecords that returned
// sees its writes.
func (s *Store) Records(ctx context.Context, space string, fn func(key string, value []byte) error) error {
	if err := storage.CheckRecordSpace(space); err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.release(v)
	lower := recordPrefix(space)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return fmt.Errorf("pebblestore: reading records of %q: %w", space, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("pebblestore: reading record %q of %q: %w", it.Key()[len(lower):], space, err)
		}
		if err := fn(string(it.Key()[len(lower):]), val); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("pebblestore: reading records of %q: %w", space, err)
	}
	return nil
}

// SaveRecords implements storage.RecordStore. The writes go through the
// committer as one op, into the synced batch of the group it commits
// (they take no revision and publish nothing to watchers), so they are
// applied all or none, as durable as an acknowledged write, at no fsync
// of their own; on a full disk they fail with storage.ErrUnavailable as
// writes do. The values are not copied: the caller must not change them
// before the call returns.
func (s *Store) SaveRecords(ctx context.Context, space string, writes []storage.RecordWrite) error {
	if err := storage.CheckRecordWrites(space, writes); err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	return s.submit(ctx, &op{kind: opRecords, name: space, records: writes})
}
