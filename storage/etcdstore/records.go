package etcdstore

import (
	"context"
	"fmt"

	"github.com/kubevents/kubevents/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of the requests of storage.RecordStore.
const (
	// recordTxnOps bounds the writes of one transaction of SaveRecords:
	// etcd's --max-txn-ops default, which a larger transaction fails.
	recordTxnOps = 128
	// recordTxnBytes bounds the keys and values of one transaction of
	// SaveRecords, under etcd's --max-request-bytes default (1.5 MiB).
	recordTxnBytes = 1 << 20
	// recordPage is the number of records one range read of Records
	// returns, so that a large space is not one huge response.
	recordPage = 500
)

var _ storage.RecordStore = (*Store)(nil)

// recordPrefix is <prefix>/kubevents.io/records/<space>/, the prefix of
// space's records: a record is that followed by its key, holding its
// value as given, without a lease. A key has no '/', so a space's keys
// are exactly the keys under its prefix, and sort by key.
func (s *Store) recordPrefix(space string) string {
	return s.opts.Prefix + ownPrefix + "records/" + space + "/"
}

// Records implements storage.RecordStore with range reads of space's
// prefix, recordPage records at a time, all at the revision of the first
// (linearizable) one: the scan sees one moment however many pages it
// takes. A scan longer than the compaction interval may find that
// revision compacted: it then fails with an error wrapping
// storage.ErrCompacted, after the records it had given fn.
func (s *Store) Records(ctx context.Context, space string, fn func(key string, value []byte) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := storage.CheckRecordSpace(space); err != nil {
		return fmt.Errorf("etcdstore: %w", err)
	}
	prefix := s.recordPrefix(space)
	end := clientv3.GetPrefixRangeEnd(prefix)
	start, rev := prefix, int64(0)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(recordPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.get(ctx, start, opts...)
		if err != nil {
			return fmt.Errorf("etcdstore: read records of %q: %w", space, mapErr(err))
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(string(kv.Key[len(prefix):]), kv.Value); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// SaveRecords implements storage.RecordStore with transactions of puts
// (without a lease) and deletes, in the order of writes. etcd refuses a
// transaction of more than --max-txn-ops operations (128 by default) or
// of more than --max-request-bytes (1.5 MiB), so writes go in
// transactions of at most recordTxnOps writes and recordTxnBytes bytes:
// each is applied all or none, and the call is all or none only when its
// writes fit in one. When one fails, the transactions before it stay
// applied and the error says how many writes they held; writing them
// again is harmless (a put or a delete of the same value). Callers that
// need one call to be all or none keep it within 128 small writes.
//
// When ctx descends from a leading context of Lead, each transaction is
// fenced on that leadership, as SaveCursor's put is: a replica that lost
// the leadership without noticing yet gets an error wrapping
// storage.ErrConflict and writes nothing more.
func (s *Store) SaveRecords(ctx context.Context, space string, writes []storage.RecordWrite) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := storage.CheckRecordWrites(space, writes); err != nil {
		return fmt.Errorf("etcdstore: %w", err)
	}
	prefix := s.recordPrefix(space)
	for done := 0; done < len(writes); {
		ops := make([]clientv3.Op, 0, min(len(writes)-done, recordTxnOps))
		size := 0
		for _, w := range writes[done:] {
			n := len(prefix) + len(w.Key) + len(w.Value)
			if len(ops) == recordTxnOps || len(ops) > 0 && size+n > recordTxnBytes {
				break
			}
			key := prefix + w.Key
			if w.Value == nil {
				ops = append(ops, clientv3.OpDelete(key))
			} else {
				ops = append(ops, clientv3.OpPut(key, string(w.Value)))
			}
			size += n
		}
		if err := s.saveRecordsTxn(ctx, space, ops); err != nil {
			if done > 0 {
				return fmt.Errorf("%w (the first %d of the %d writes were saved)", err, done, len(writes))
			}
			return err
		}
		done += len(ops)
	}
	return nil
}

// saveRecordsTxn commits ops in one transaction, fenced on the leadership
// ctx carries.
func (s *Store) saveRecordsTxn(ctx context.Context, space string, ops []clientv3.Op) error {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	txn, l := s.fencedTxn(ctx, rctx)
	resp, err := txn.Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: save records of %q: %w", space, mapErr(s.unavailable(ctx, err)))
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdstore: records of %q not saved: this replica no longer leads %q: %w", space, l.name, storage.ErrConflict)
	}
	return nil
}
