package etcdstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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

// benchEventsEnv sets how many events BenchmarkListOnePod stores.
const benchEventsEnv = "KUBEVENTS_BENCH_EVENTS"

// defaultBenchEvents is BenchmarkListOnePod's default store size: large
// enough that a range read's cost shows, small enough to fill in a
// couple of minutes on two cores.
const defaultBenchEvents = 100_000

// benchFillTimeout bounds BenchmarkListOnePod's fill and lists.
const benchFillTimeout = 20 * time.Minute

// BenchmarkListOnePod lists one pod's 50 events among N stored (N from
// KUBEVENTS_BENCH_EVENTS, default 100,000), through the in-memory index
// (an involvedObject.uid selector) and through a range read (a label
// selector, which no index serves), and reports the memory a replica
// opened over the N events holds per event (its index).
func BenchmarkListOnePod(b *testing.B) {
	n := defaultBenchEvents
	if v := os.Getenv(benchEventsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("%s: %v", benchEventsEnv, err)
		}
	}
	const perPod = 50
	e := newEnv(b, nil)
	// Filling a large store takes longer than the env's context allows.
	ctx, cancel := context.WithTimeout(context.Background(), benchFillTimeout)
	defer cancel()
	e.ctx = ctx
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				pod := i / perPod
				ev := event("default", fmt.Sprintf("e%07d", i))
				ev.InvolvedObject.Name = fmt.Sprintf("pod%d", pod)
				ev.InvolvedObject.UID = types.UID(fmt.Sprintf("uid-pod%d", pod))
				ev.Labels = map[string]string{"pod": ev.InvolvedObject.Name}
				if _, err := e.s.Create(e.ctx, ev, storage.WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	target := n / perPod / 2
	check := func(b *testing.B, res *storage.ListResult, err error) {
		if err != nil || len(res.Items) != perPod {
			b.Fatalf("got %v items, err %v; want %d", res, err, perPod)
		}
	}
	b.Run("index", func(b *testing.B) {
		f, err := eventapi.ParseFieldSelector(eventapi.CoreV1, fmt.Sprintf("involvedObject.uid=uid-pod%d", target), true)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			res, err := e.s.List(e.ctx, storage.ListOptions{Selector: storage.Selector{Fields: f}})
			check(b, res, err)
		}
	})
	b.Run("range", func(b *testing.B) {
		sel := labels.SelectorFromSet(labels.Set{"pod": fmt.Sprintf("pod%d", target)})
		for b.Loop() {
			res, err := e.s.List(e.ctx, storage.ListOptions{Selector: storage.Selector{Labels: sel}})
			check(b, res, err)
		}
	})
	b.Run("replica-memory", func(b *testing.B) {
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r, err := etcdstore.Open(etcdstore.Options{Client: e.cli, Clock: e.clock, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(r)
			r.Close()
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/event")
		}
	})
}
