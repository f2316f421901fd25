package server

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// statsStore reports fixed Stats and counts the calls; its other methods
// are not implemented.
type statsStore struct {
	storage.Interface
	calls atomic.Int64
}

func (s *statsStore) Stats() storage.Stats {
	s.calls.Add(1)
	return storage.Stats{Events: 7, Bytes: 4096, Expired: 3, OldestRevision: 2, Commits: 5, CommittedWrites: 11}
}

func (s *statsStore) Revision() int64 { return 42 }

// TestStoreMetrics: a scrape reads the store's Stats once and exports
// each of them under its name, help and type.
func TestStoreMetrics(t *testing.T) {
	store := &statsStore{}
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, store, nil); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP eventsd_expired_events_total Events deleted because their TTL passed, since start.
# TYPE eventsd_expired_events_total counter
eventsd_expired_events_total 3
# HELP eventsd_storage_bytes Approximate bytes the store uses on disk.
# TYPE eventsd_storage_bytes gauge
eventsd_storage_bytes 4096
# HELP eventsd_storage_commits_total Durable commits (one fsync each) since start.
# TYPE eventsd_storage_commits_total counter
eventsd_storage_commits_total 5
# HELP eventsd_storage_committed_writes_total Writes carried by the durable commits since start; divided by commits, the mean group size.
# TYPE eventsd_storage_committed_writes_total counter
eventsd_storage_committed_writes_total 11
# HELP eventsd_storage_revision Revision of the last durable write.
# TYPE eventsd_storage_revision gauge
eventsd_storage_revision 42
# HELP eventsd_stored_events Events currently stored.
# TYPE eventsd_stored_events gauge
eventsd_stored_events 7
`
	names := []string{"eventsd_expired_events_total", "eventsd_storage_bytes", "eventsd_storage_commits_total",
		"eventsd_storage_committed_writes_total", "eventsd_storage_revision", "eventsd_stored_events"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("one scrape called Stats %d times, want 1", n)
	}
}
