package etcdstore_test

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/kubevents/kubevents/storage/storagetest"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// etcd members' peer HTTP connections (rafthttp's probes) that a
		// member's Close finds mid-request end only after etcd's peer read
		// timeout (5 s), which their connection sets again on every read:
		// the cluster tests (etcdtest.Cluster) may end before they do.
		goleak.IgnoreAnyFunction("net/http.(*connReader).abortPendingRead"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}

// withEtcd is a store that stops its etcd when it closes.
type withEtcd struct {
	*etcdstore.Store
	etcd *embed.Etcd
	once sync.Once
}

func (s *withEtcd) Close() error {
	err := s.Store.Close()
	s.once.Do(s.etcd.Close)
	return err
}

func open(t *testing.T, dir string, o storagetest.Options) storage.Interface {
	t.Helper()
	return openWith(t, dir, o, "")
}

// openDisk is open with the on-disk index in dir/etcd-index, so that a
// reopen of dir resumes the index the store closed.
func openDisk(t *testing.T, dir string, o storagetest.Options) storage.Interface {
	t.Helper()
	return openWith(t, dir, o, filepath.Join(dir, "etcd-index"))
}

func openWith(t *testing.T, dir string, o storagetest.Options, indexDir string) storage.Interface {
	t.Helper()
	e, endpoint := etcdtest.Start(t, filepath.Join(dir, "etcd"))
	s, err := etcdstore.Open(etcdstore.Options{
		IndexDir:            indexDir,
		Endpoints:           []string{endpoint},
		Clock:               o.Clock,
		DefaultTTL:          o.DefaultTTL,
		HistoryMaxRevisions: o.HistoryMaxEvents,
		MaxHistoryHold:      o.MaxHistoryHold,
		RingSize:            256, // small, so lagging watchers catch up with watches of their own
		Logger:              slog.New(slog.DiscardHandler),
	})
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	return &withEtcd{Store: s, etcd: e}
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{Open: open, WallClockTTL: true, ContinueExpiresByCompaction: true, SharedRevisions: true})
}

// TestConformanceDiskIndex runs the suite with the on-disk index
// (Options.IndexDir): its cases that close and reopen a store resume the
// index it kept.
func TestConformanceDiskIndex(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{Open: openDisk, WallClockTTL: true, ContinueExpiresByCompaction: true, SharedRevisions: true})
}
