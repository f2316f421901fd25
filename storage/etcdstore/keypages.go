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
// minute (keys only). keyPages and valuePages (an in-memory index build)
// use it, falling back to pages where etcd answers
// Unimplemented (3.6 and older).

// keyPageFunc receives the keys of one page of the prefix (keys only,
// Value empty, or with their values), in key order, and start, the key
// the page's range began at; it is called once more with last set and no
// keys after the final page.
type keyPageFunc func(kvs []*mvccpb.KeyValue, start string, last bool) error

// keyPages reads the keys (only) of the store's prefix at rev (which must
// be set) and hands them to fn page by page. A stream that sends nothing
// for the store's request timeout is given up as etcd being unavailable.
func (s *Store) keyPages(ctx context.Context, rev int64, fn keyPageFunc) error {
	return s.prefixPages(ctx, rev, true, fn)
}

// valuePages is keyPages with the values: what an in-memory index build
// decodes.
func (s *Store) valuePages(ctx context.Context, rev int64, fn keyPageFunc) error {
	return s.prefixPages(ctx, rev, false, fn)
}

func (s *Store) prefixPages(ctx context.Context, rev int64, keysOnly bool, fn keyPageFunc) error {
	err := s.streamPages(ctx, rev, keysOnly, fn)
	if status.Code(err) != codes.Unimplemented {
		return err
	}
	s.log.Info("etcdstore: etcd has no RangeStream (older than 3.7): reading the prefix in pages")
	return s.pagedPages(ctx, rev, keysOnly, fn)
}

// readOpts are the options of a read of the prefix's range at rev.
func (s *Store) readOpts(rev int64, keysOnly bool, more ...clientv3.OpOption) []clientv3.OpOption {
	opts := append([]clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.root)), clientv3.WithRev(rev)}, more...)
	if keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	return opts
}

// errStreamIdle ends a stream that sent nothing for the request timeout.
var errStreamIdle = errors.New("etcd sent no part of the range within the request timeout")

func (s *Store) streamPages(parent context.Context, rev int64, keysOnly bool, fn keyPageFunc) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(parent))
	defer cancel()
	ch, err := s.cli.KV.GetStream(ctx, s.root, s.readOpts(rev, keysOnly)...)
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
			return fmt.Errorf("etcdstore: read %s at %d: %w", s.root, rev, s.unavailable(parent, errStreamIdle))
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

func (s *Store) pagedPages(ctx context.Context, rev int64, keysOnly bool, fn keyPageFunc) error {
	start := s.root
	for {
		resp, err := s.get(ctx, start, s.readOpts(rev, keysOnly, clientv3.WithLimit(indexBuildBatch))...)
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
