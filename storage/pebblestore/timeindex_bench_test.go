package pebblestore_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkCreateTimeIndex is BenchmarkCreate with the time index
// (issue 32) and without it, side by side in one run: its cost is one
// more index entry per create (an update writes one only when its event
// moves to another minute).
func BenchmarkCreateTimeIndex(b *testing.B) {
	for _, c := range []struct {
		name string
		opts func(pebblestore.Options) pebblestore.Options
	}{
		{"without", pebblestore.WithoutTimeIndex},
		{"with", func(o pebblestore.Options) pebblestore.Options { return o }},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchCreate(b, c.opts(pebblestore.Options{Dir: b.TempDir(), DefaultTTL: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)}))
		})
	}
}

// BenchmarkListTimeRange lists the last hour, and the last five minutes,
// of a day of events (TIMERANGE_EVENTS of them, 100,000 unless set: 1M
// for BENCHMARKS.md), whole and in pages of 500, with the time index and
// by a scan of the same store, which must give the same answer.
func BenchmarkListTimeRange(b *testing.B) {
	stored := int64(100_000)
	if v, err := strconv.ParseInt(os.Getenv("TIMERANGE_EVENTS"), 10, 64); err == nil && v > 0 {
		stored = v
	}
	s, err := pebblestore.Open(pebblestore.Options{Dir: b.TempDir(), DefaultTTL: 48 * time.Hour, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	end := time.Unix(1_700_000_000, 0).Add(24 * time.Hour)
	at := func(i int64) time.Time {
		return end.Add(-time.Duration(stored-i) * (24 * time.Hour / time.Duration(stored))) // no overflow at 1M
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= stored; i = next.Add(1) {
				ev := kubeletEvent(i)
				ev.LastTimestamp = metav1.NewTime(at(i))
				if _, err := s.Create(ctx, ev, storage.WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Logf("stored %d events in %v", stored, time.Since(start).Round(time.Second))
	cases := []struct {
		name  string
		since time.Duration
		limit int64
	}{
		{"hour", time.Hour, 0},
		{"hour/pages-of-500", time.Hour, 500},
		{"5m", 5 * time.Minute, 0},
	}
	// A first list of each, untimed: the load's flushes and compactions
	// settle, and the cache holds what every way reads.
	for _, c := range cases {
		if _, err := s.List(ctx, storage.ListOptions{Selector: storage.Selector{Since: end.Add(-c.since)}, Limit: c.limit}); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range cases {
		sel := storage.Selector{Since: end.Add(-c.since)}
		want := -1
		for _, way := range []string{"index", "scan"} {
			b.Run(c.name+"/"+way, func(b *testing.B) {
				s.ServeTimeIndex(way == "index")
				for b.Loop() {
					n := 0
					opts := storage.ListOptions{Selector: sel, Limit: c.limit}
					for {
						res, err := s.List(ctx, opts)
						if err != nil {
							b.Fatal(err)
						}
						n += len(res.Items)
						if opts.Continue = res.Continue; opts.Continue == "" {
							break
						}
					}
					if want < 0 {
						want = n
					}
					if n != want || n == 0 {
						b.Fatalf("%d items, want %d", n, want)
					}
				}
				b.ReportMetric(float64(want), "items")
			})
		}
	}
	s.ServeTimeIndex(true)
}
