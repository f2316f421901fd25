package file_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kubevents/kubevents/export/file"
)

// BenchmarkSend measures batches appended and fsynced to a file in the
// test's temporary directory (so the figure is the disk's fsync latency
// for small batches).
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s, err := file.New(file.Config{Path: filepath.Join(b.TempDir(), "events.jsonl")}, file.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := records(0, size)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := s.Send(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
