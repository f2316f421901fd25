package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/diskindex"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// diskEnv is an etcd, a client of it, and the on-disk index directory
// stores open.
type diskEnv struct {
	t        *testing.T
	cli      *clientv3.Client
	indexDir string
	ctx      context.Context
}

func newDiskEnv(t *testing.T) *diskEnv {
	t.Helper()
	e, endpoint := etcdtest.Start(t, t.TempDir())
	t.Cleanup(e.Close)
	return &diskEnv{t: t, cli: client(t, endpoint), indexDir: filepath.Join(t.TempDir(), "etcd-index"), ctx: testCtx(t)}
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// open opens a store on cli with the on-disk index in dir; compaction is
// the test's.
func openIndexed(t *testing.T, cli *clientv3.Client, dir, prefix string) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.Open(etcdstore.Options{Client: cli, IndexDir: dir, Prefix: prefix, CompactionInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reasons lists, through s's index, the events of each reason, as
// "name:reason" sorted, checking that the lists went through the index.
func reasons(t *testing.T, ctx context.Context, s *etcdstore.Store, rs ...string) []string {
	t.Helper()
	var out []string
	for _, r := range rs {
		before := s.IndexedLists()
		res, err := s.List(ctx, storage.ListOptions{Selector: fieldSel(t, "reason="+r), Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for {
			for _, it := range res.Items {
				out = append(out, it.Namespace+"/"+it.Name+":"+it.Reason)
			}
			if res.Continue == "" {
				break
			}
			if res, err = s.List(ctx, storage.ListOptions{Selector: fieldSel(t, "reason="+r), Limit: 3, Continue: res.Continue}); err != nil {
				t.Fatal(err)
			}
		}
		if s.IndexedLists() == before {
			t.Fatalf("the list of reason=%s did not go through the index", r)
		}
	}
	slices.Sort(out)
	return out
}

// model is what a store's lists should show: name → reason.
type model map[string]string

func (m model) want(rs ...string) []string {
	out := []string{}
	for k, r := range m {
		if slices.Contains(rs, r) {
			out = append(out, k+":"+r)
		}
	}
	slices.Sort(out)
	return out
}

// write creates or updates ns/name with reason (through w) and records it.
func (m model) write(t *testing.T, ctx context.Context, w storage.Interface, ns, name, reason string) {
	t.Helper()
	ev := event(ns, name)
	ev.Reason = reason
	if _, ok := m[ns+"/"+name]; ok {
		if _, err := w.Update(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if _, err := w.Create(ctx, ev, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m[ns+"/"+name] = reason
}

func (m model) delete(t *testing.T, ctx context.Context, w storage.Interface, ns, name string) {
	t.Helper()
	if _, err := w.Delete(ctx, ns, name, storage.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	delete(m, ns+"/"+name)
}

// changeWhileClosed writes through another replica (in-memory index)
// while the indexed store is closed: 3 new events, 2 deleted, 2 updated
// to another reason, and 1 updated with the same reason (its mod
// revision moves). It returns how many keys changed.
func changeWhileClosed(t *testing.T, ctx context.Context, cli *clientv3.Client, m model) int {
	t.Helper()
	w, err := etcdstore.Open(etcdstore.Options{Client: cli, CompactionInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 3 {
		m.write(t, ctx, w, "b", fmt.Sprintf("new%d", i), "Later")
	}
	m.delete(t, ctx, w, "a", "e0")
	m.delete(t, ctx, w, "b", "e1")
	m.write(t, ctx, w, "a", "e2", "Later")
	m.write(t, ctx, w, "b", "e3", "Later")
	ev := event("a", "e4")
	ev.Reason, ev.Message = m["a/e4"], "changed message"
	if _, err := w.Update(ctx, ev, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return 3 + 2 + 1 // the new and changed keys: what a reconciliation fetches
}

func fill(t *testing.T, ctx context.Context, s storage.Interface, m model) {
	t.Helper()
	for i := range 10 {
		ns := []string{"a", "b"}[i%2]
		m.write(t, ctx, s, ns, fmt.Sprintf("e%d", i), []string{"Started", "Pulled"}[i%3%2])
	}
}

// TestDiskIndexResumesBehind: a store reopened on its on-disk index while
// etcd moved on (another replica created, deleted and updated events)
// resumes the index without a reconciliation, and a list right after
// Open sees every write made while it was closed.
func TestDiskIndexResumesBehind(t *testing.T) {
	e := newDiskEnv(t)
	s := openIndexed(t, e.cli, e.indexDir, "")
	if s.IndexReconciliations() != 1 || s.IndexKeysFetched() != 0 {
		t.Fatalf("a new index: %d reconciliations fetching %d keys, want 1 fetching none (etcd is empty)", s.IndexReconciliations(), s.IndexKeysFetched())
	}
	m := model{}
	fill(t, e.ctx, s, m)
	all := []string{"Started", "Pulled", "Later"}
	if got, want := reasons(t, e.ctx, s, all...), m.want(all...); !slices.Equal(got, want) {
		t.Fatalf("before the restart: %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	changeWhileClosed(t, e.ctx, e.cli, m)
	s = openIndexed(t, e.cli, e.indexDir, "")
	defer s.Close()
	if n := s.IndexReconciliations(); n != 0 {
		t.Errorf("reopened behind etcd: %d reconciliations, want 0 (the watch replays the changes)", n)
	}
	if got, want := reasons(t, e.ctx, s, all...), m.want(all...); !slices.Equal(got, want) {
		t.Fatalf("right after the restart: %v, want %v", got, want)
	}
}

// behindCompaction leaves e's index behind a compaction: a store fills
// it and closes, events change while it is closed, and etcd compacts past
// them all. It returns the events' model, their reasons and how many
// keys changed.
func behindCompaction(t *testing.T, e *diskEnv) (m model, all []string, changed int) {
	t.Helper()
	s := openIndexed(t, e.cli, e.indexDir, "")
	m = model{}
	fill(t, e.ctx, s, m)
	all = []string{"Started", "Pulled", "Later"}
	reasons(t, e.ctx, s, all...) // the index has reached the writes
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	changed = changeWhileClosed(t, e.ctx, e.cli, m)
	resp, err := e.cli.Put(e.ctx, "/unrelated", "bump")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.Compact(e.ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	return m, all, changed
}

// TestDiskIndexReconcilesAfterCompaction: a store reopened on an index
// whose revision etcd has compacted reconciles it, fetching exactly the
// new and changed keys: deleted events are gone, changed ones updated,
// new ones present; later writes are followed.
func TestDiskIndexReconcilesAfterCompaction(t *testing.T) {
	e := newDiskEnv(t)
	m, all, changed := behindCompaction(t, e)
	s := openIndexed(t, e.cli, e.indexDir, "")
	defer s.Close()
	checkReconciled(t, e, s, m, all, changed)
}

// checkReconciled checks that s, reopened on an index behindCompaction
// left, reconciled it once, fetching exactly the changed keys, lists
// what m says, and follows a write and a delete after.
func checkReconciled(t *testing.T, e *diskEnv, s *etcdstore.Store, m model, all []string, changed int) {
	t.Helper()
	if n, f := s.IndexReconciliations(), s.IndexKeysFetched(); n != 1 || f != int64(changed) {
		t.Errorf("reopened after a compaction past the index: %d reconciliations fetching %d keys, want 1 fetching %d", n, f, changed)
	}
	if got, want := reasons(t, e.ctx, s, all...), m.want(all...); !slices.Equal(got, want) {
		t.Fatalf("after the reconciliation: %v, want %v", got, want)
	}
	m.write(t, e.ctx, s, "a", "after", "Later")
	m.delete(t, e.ctx, s, "a", "e2")
	if got, want := reasons(t, e.ctx, s, all...), m.want(all...); !slices.Equal(got, want) {
		t.Fatalf("writes after the reconciliation: %v, want %v", got, want)
	}
}

// TestDiskIndexOfAnotherClusterOrPrefix: an index built for another
// prefix, or for another etcd cluster, is discarded and rebuilt: the
// lists show only the events of this prefix and cluster.
func TestDiskIndexOfAnotherClusterOrPrefix(t *testing.T) {
	e := newDiskEnv(t)
	s := openIndexed(t, e.cli, e.indexDir, "")
	m := model{}
	fill(t, e.ctx, s, m)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	all := []string{"Started", "Pulled", "Later"}

	other := openIndexed(t, e.cli, e.indexDir, "/other")
	om := model{}
	om.write(t, e.ctx, other, "c", "x", "Started")
	if n, f := other.IndexReconciliations(), other.IndexKeysFetched(); n != 1 || f != 0 {
		t.Errorf("an index of another prefix: %d reconciliations fetching %d keys, want 1 fetching none", n, f)
	}
	if got, want := reasons(t, e.ctx, other, all...), om.want(all...); !slices.Equal(got, want) {
		t.Fatalf("another prefix over the index of /registry: %v, want %v", got, want)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}

	e2, endpoint2 := etcdtest.Start(t, t.TempDir())
	defer e2.Close()
	cli2 := client(t, endpoint2)
	// Past the first cluster's revision, so that only the cluster id
	// tells the index is not of this etcd.
	for i := range 50 {
		if _, err := cli2.Put(e.ctx, "/unrelated", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	c2 := model{}
	w, err := etcdstore.Open(etcdstore.Options{Client: cli2, Prefix: "/other", CompactionInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c2.write(t, e.ctx, w, "d", "y", "Pulled")
	c2.write(t, e.ctx, w, "d", "z", "Pulled")
	w.Close()
	s2 := openIndexed(t, cli2, e.indexDir, "/other")
	defer s2.Close()
	if n, f := s2.IndexReconciliations(), s2.IndexKeysFetched(); n != 1 || f != 2 {
		t.Errorf("an index of another cluster: %d reconciliations fetching %d keys, want 1 fetching 2", n, f)
	}
	if got, want := reasons(t, e.ctx, s2, all...), c2.want(all...); !slices.Equal(got, want) {
		t.Fatalf("another cluster over the index of the first: %v, want %v", got, want)
	}
}

// TestDiskIndexCrash: an index that lost its last batches (written
// without fsync: a crash leaves the batches up to some point) resumes
// from the revision written with the last batch it kept, and the store
// lists what etcd holds, including the writes of the lost batches.
func TestDiskIndexCrash(t *testing.T) {
	e := newDiskEnv(t)
	s := openIndexed(t, e.cli, e.indexDir, "")
	m := model{}
	fill(t, e.ctx, s, m)
	all := []string{"Started", "Pulled", "Later"}
	reasons(t, e.ctx, s, all...) // the index has reached the writes
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := s.CheckpointIndex(crashed); err != nil {
		t.Fatal(err)
	}
	at := s.IndexRevision()
	// Batches the crash loses: through the store itself.
	m.write(t, e.ctx, s, "a", "lost", "Later")
	m.delete(t, e.ctx, s, "a", "e0")
	m.write(t, e.ctx, s, "b", "e1", "Later")
	reasons(t, e.ctx, s, all...)
	if s.IndexRevision() <= at {
		t.Fatalf("the index did not move past the checkpoint's %d", at)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openIndexed(t, e.cli, crashed, "")
	defer s.Close()
	if n := s.IndexReconciliations(); n != 0 {
		t.Errorf("after the crash: %d reconciliations, want 0", n)
	}
	if got, want := reasons(t, e.ctx, s, all...), m.want(all...); !slices.Equal(got, want) {
		t.Fatalf("after the crash: %v, want %v", got, want)
	}
}

// TestDiskIndexOneStorePerDir: a second store on an index directory in
// use fails with an error naming the directory, and opens once the first
// closes.
func TestDiskIndexOneStorePerDir(t *testing.T) {
	e := newDiskEnv(t)
	s := openIndexed(t, e.cli, e.indexDir, "")
	_, err := etcdstore.Open(etcdstore.Options{Client: e.cli, IndexDir: e.indexDir, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, diskindex.ErrDirInUse) || !strings.Contains(err.Error(), "index directory "+e.indexDir+" is in use by another eventsd") {
		t.Fatalf("second store on one index directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openIndexed(t, e.cli, e.indexDir, "").Close()
}

// compactingClient is a client of cli's etcd that, before each of the
// first n reads of values at a past revision (a reconciliation's
// fetches, by range or by transaction of gets), writes a key outside the
// prefix and compacts etcd to the current revision through cli: the
// fetch then finds its revision compacted, as when kube-apiserver
// compacts a shared etcd mid-reconciliation. n < 0 is every read.
func compactingClient(t *testing.T, cli *clientv3.Client, n int) *clientv3.Client {
	t.Helper()
	var mu sync.Mutex
	atPast := func(method string, req any) bool {
		switch r := req.(type) {
		case *etcdserverpb.RangeRequest:
			return method == "/etcdserverpb.KV/Range" && r.Revision > 0 && !r.CountOnly
		case *etcdserverpb.TxnRequest:
			return len(r.Success) > 0 && r.Success[0].GetRequestRange().GetRevision() > 0
		}
		return false
	}
	compact := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if atPast(method, req) {
			mu.Lock()
			due := n != 0
			if n > 0 {
				n--
			}
			mu.Unlock()
			if due {
				resp, err := cli.Put(ctx, "/unrelated", "bump")
				if err != nil {
					return err
				}
				if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
					return err
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: cli.Endpoints(), DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(compact)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDiskIndexReconcileOutlivesCompaction: a reconciliation whose
// revision etcd compacts before it has fetched what changed is tried
// again at the current revision, and the store opens with every change;
// when every try is compacted before fetching anything, Open gives up
// after reconcileStalls tries with an error that says why.
func TestDiskIndexReconcileOutlivesCompaction(t *testing.T) {
	e := newDiskEnv(t)
	m, all, changed := behindCompaction(t, e)

	// Every try compacted before its first fetch: Open fails, and says so.
	_, err := etcdstore.Open(etcdstore.Options{Client: compactingClient(t, e.cli, -1), IndexDir: e.indexDir, CompactionInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, storage.ErrCompacted) || !strings.Contains(err.Error(), "3 reconciliations in a row") {
		t.Fatalf("Open while etcd compacts past every reconciliation: %v, want ErrCompacted after 3 tries", err)
	}
	t.Logf("Open while etcd compacts past every reconciliation: %v", err)

	// The first try compacted: the second reconciles.
	s, err := etcdstore.Open(etcdstore.Options{Client: compactingClient(t, e.cli, 1), IndexDir: e.indexDir, CompactionInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Open with one compaction mid-reconciliation: %v", err)
	}
	defer s.Close()
	checkReconciled(t, e, s, m, all, changed)
}
