package etcdstore_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/kubevents/kubevents/storage"
)

// BenchmarkCreate measures creates through the store against an
// in-process etcd (fsync off): the transaction and lease path, not disk.
func BenchmarkCreate(b *testing.B) {
	e := newEnv(b, nil)
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.s.Create(e.ctx, event("bench", "e"+strconv.FormatInt(n.Add(1), 10)), storage.WriteOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(e.s.LeaseGrants()), "lease-grants")
}
