package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A paginated range read of a large prefix costs etcd O(keys after the
// page) per page, not O(page): etcd counts every key from the page's start
// to the range's end for the response's Count (its treeIndex.Revisions
// visits them all). Reading 10M keys in pages of 10,000 is a thousand
// such walks, 4-5 s each on this project's 2-core machine: over an hour.
// etcd 3.7's RangeStream sends the whole range at one revision in chunks
// it sizes itself and counts nothing, so the same read takes about a
// minute. keyPages uses it, falling back to pages where etcd answers
// Unimplemented (3.6 and older).

// keyPageFunc receives the keys (keys only: Value is empty) of one page of
// the prefix, in key order, and start, the key the page's range began at;
// it is called once more with last set and no keys after the final page.
type keyPageFunc func(kvs []*mvccpb.KeyValue, start string, last bool) error

// keyPages reads the keys of the store's prefix at rev (which must be set)
// and hands them to fn page by page. A stream that sends nothing for the
// store's request timeout is given up as etcd being unavailable.
func (s *Store) keyPages(ctx context.Context, rev int64, fn keyPageFunc) error {
	err := s.streamKeyPages(ctx, rev, fn)
	if status.Code(err) != codes.Unimplemented {
		return err
	}
	s.log.Info("etcdstore: etcd has no RangeStream (older than 3.7): reading the prefix's keys in pages")
	return s.pagedKeyPages(ctx, rev, fn)
}

// errStreamIdle ends a stream that sent nothing for the request timeout.
var errStreamIdle = errors.New("etcd sent no part of the range within the request timeout")

func (s *Store) streamKeyPages(parent context.Context, rev int64, fn keyPageFunc) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(parent))
	defer cancel()
	ch, err := s.cli.KV.GetStream(ctx, s.root,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.root)), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		for range ch { // the client's goroutine ends once it has delivered
		}
	}()
	idle := s.opts.Clock.NewTimer(s.opts.RequestTimeout)
	defer idle.Stop()
	start := s.root
	for {
		var r clientv3.RangeStreamResponse
		var ok bool
		select {
		case r, ok = <-ch:
		case <-idle.C():
			return fmt.Errorf("etcdstore: read the keys of %s at %d: %w", s.root, rev, s.unavailable(parent, errStreamIdle))
		}
		if !ok {
			break
		}
		if err := r.Err(); err != nil {
			return err
		}
		if r.RangeResponse != nil && len(r.Kvs) > 0 {
			if err := fn(r.Kvs, start, false); err != nil {
				return err
			}
			start = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
		}
		if !idle.Stop() {
			select {
			case <-idle.C():
			default:
			}
		}
		idle.Reset(s.opts.RequestTimeout)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(nil, start, true)
}

func (s *Store) pagedKeyPages(ctx context.Context, rev int64, fn keyPageFunc) error {
	end := clientv3.GetPrefixRangeEnd(s.root)
	start := s.root
	for {
		resp, err := s.get(ctx, start, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(indexBuildBatch), clientv3.WithRev(rev))
		if err != nil {
			return err
		}
		if len(resp.Kvs) > 0 {
			if err := fn(resp.Kvs, start, false); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return fn(nil, start, true)
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
