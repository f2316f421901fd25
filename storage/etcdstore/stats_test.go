package etcdstore_test

import (
	"fmt"
	"testing"

	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/prometheus/client_golang/prometheus"
)

// etcdRanges is the embedded etcd's count of range reads (all members
// in this process register it in the default registry).
const etcdRanges = "etcd_mvcc_range_total"

// TestStatsReadsNoRange: Stats (every metrics scrape) counts the events
// from the replica's index, never by asking etcd to count the prefix, a
// read that costs etcd O(events) (over the request timeout at 10M); the
// count has each write as soon as it is acknowledged, with either index.
func TestStatsReadsNoRange(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "MemoryIndex", true: "DiskIndex"}[disk], func(t *testing.T) {
			e := newEnv(t, func(o *etcdstore.Options) {
				o.CompactionInterval = -1
				if disk {
					o.IndexDir = t.TempDir()
				}
			})
			ranges := func() float64 { return metricstest.Sum(t, prometheus.DefaultGatherer, etcdRanges) }
			var names []string
			for i := range 5 {
				ev, err := e.s.Create(e.ctx, event("default", fmt.Sprintf("e%d", i)), storage.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, ev.Name)
				before := ranges()
				if got := e.s.Stats().Events; got != int64(i+1) {
					t.Fatalf("after create %d: Stats().Events = %d, want %d", i, got, i+1)
				}
				if after := ranges(); after != before {
					t.Fatalf("Stats read etcd %v times (range reads %v before, %v after)", after-before, before, after)
				}
			}
			if _, err := e.s.Delete(e.ctx, "default", names[0], storage.Preconditions{}); err != nil {
				t.Fatal(err)
			}
			if got := e.s.Stats().Events; got != 4 {
				t.Fatalf("after a delete: Stats().Events = %d, want 4", got)
			}
		})
	}
}
