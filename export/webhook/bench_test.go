package webhook_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kubevents/kubevents/export/webhook"
	"github.com/kubevents/kubevents/export/webhook/webhooktest"
)

// BenchmarkSend measures batches of records POSTed to a loopback receiver
// that keeps only their keys.
func BenchmarkSend(b *testing.B) {
	for _, format := range []string{webhook.FormatRecords, webhook.FormatSlack} {
		for _, size := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/batch=%d", format, size), func(b *testing.B) {
				r := webhooktest.New(b, webhooktest.Options{KeysOnly: true})
				s, err := webhook.New(webhook.Config{URL: r.URL(), Format: format}, webhook.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				batch := batchOf(size)
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
}
