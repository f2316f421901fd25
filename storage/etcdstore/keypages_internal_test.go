package etcdstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestKeyPages: the streamed read (etcd 3.7's RangeStream) and the paged
// one (older etcd) hand over the same keys of the prefix at the given
// revision, each once, in key order, with starts that cover every key,
// and end with one last call; keys written after the revision, and keys
// outside the prefix, are not among them. Keys-only reads carry no
// values; the others each key's value.
func TestKeyPages(t *testing.T) {
	e, endpoint := etcdtest.Start(t, t.TempDir())
	defer e.Close()
	s, err := Open(Options{Endpoints: []string{endpoint}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// More than one page of each reader: 25,000 keys in transactions of
	// 100 puts.
	const n = 25000
	var want []string
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			k := fmt.Sprintf("%sns%d/ev-%05d", s.root, j%3, j)
			ops = append(ops, clientv3.OpPut(k, "v:"+k))
			want = append(want, k)
		}
		if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	cur, err := s.cli.Get(ctx, s.root)
	if err != nil {
		t.Fatal(err)
	}
	rev := cur.Header.Revision
	if _, err := s.cli.Put(ctx, s.root+"ns0/later", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Put(ctx, "/registry/eventsz", ""); err != nil {
		t.Fatal(err)
	}
	// A store whose etcd answers RangeStream as etcd 3.6 and older do
	// (Unimplemented, on the stream's first receive) reads in pages.
	old, oldLog := openWithoutRangeStream(t, endpoint)
	readers := map[string]func(context.Context, int64, bool, keyPageFunc) error{
		"stream":               s.streamPages,
		"paged":                s.pagedPages,
		"no RangeStream (3.6)": old.prefixPages,
	}
	for reader, read := range readers {
		for _, keysOnly := range []bool{true, false} {
			name := fmt.Sprintf("%s, keys only %v", reader, keysOnly)
			checkPages(t, name, want, func(fn keyPageFunc) error { return read(ctx, rev, keysOnly, fn) }, keysOnly)
		}
	}
	if !strings.Contains(oldLog.String(), "etcd has no RangeStream") {
		t.Errorf("reading without RangeStream did not say so; log:\n%s", oldLog)
	}
}

// checkPages checks that read hands over the keys want, in pages as
// TestKeyPages says, with values (v: and the key) unless keysOnly.
func checkPages(t *testing.T, name string, want []string, read func(keyPageFunc) error, keysOnly bool) {
	t.Helper()
	var got []string
	pages, lasts := 0, 0
	err := read(func(kvs []*mvccpb.KeyValue, start string, last bool) error {
		if lasts > 0 {
			t.Fatalf("%s: a call after the last", name)
		}
		if last {
			lasts++
			if len(kvs) != 0 {
				t.Errorf("%s: the last call has %d keys", name, len(kvs))
			}
			return nil
		}
		pages++
		if first := string(kvs[0].Key); first < start || (len(got) > 0 && start <= got[len(got)-1]) {
			t.Errorf("%s: page %d starts at %q, its first key is %q, the previous page's last %q", name, pages, start, first, got[len(got)-1])
		}
		for _, kv := range kvs {
			if wantValue := "v:" + string(kv.Key); kv.ModRevision == 0 || (keysOnly && len(kv.Value) != 0) ||
				(!keysOnly && string(kv.Value) != wantValue) {
				t.Fatalf("%s: key %s with value %q, mod revision %d", name, kv.Key, kv.Value, kv.ModRevision)
			}
			got = append(got, string(kv.Key))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if lasts != 1 || pages < 2 {
		t.Errorf("%s: %d pages, %d last calls; want more than one page and one last call", name, pages, lasts)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: %d keys, want %d (first %q)", name, len(got), len(want), got[:min(3, len(got))])
	}
}

// openWithoutRangeStream opens a store on endpoint through a client that
// gets, for every RangeStream, what etcd 3.6 and older answer a method
// they do not have: the stream opens, and its first receive fails with
// Unimplemented. The store's log is returned.
func openWithoutRangeStream(t *testing.T, endpoint string) (*Store, *syncbuf.Buffer) {
	t.Helper()
	refuse := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method == "/etcdserverpb.KV/RangeStream" {
			return unimplementedStream{ctx: ctx, method: method}, nil
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout,
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(refuse)}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	logs := &syncbuf.Buffer{}
	s, err := Open(Options{Client: cli, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, logs
}

// unimplementedStream is a client stream to a server without its method.
type unimplementedStream struct {
	ctx    context.Context
	method string
}

func (u unimplementedStream) Header() (metadata.MD, error) { return nil, nil }
func (u unimplementedStream) Trailer() metadata.MD         { return nil }
func (u unimplementedStream) CloseSend() error             { return nil }
func (u unimplementedStream) Context() context.Context     { return u.ctx }
func (u unimplementedStream) SendMsg(any) error            { return nil }
func (u unimplementedStream) RecvMsg(any) error {
	return status.Errorf(codes.Unimplemented, "unknown method %s", u.method)
}
