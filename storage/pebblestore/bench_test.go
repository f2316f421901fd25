package pebblestore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// kubeletEvent is shaped like the events client-go's legacy recorder
// creates for a pod.
func kubeletEvent(i int64) *corev1.Event {
	pod := fmt.Sprintf("web-%d", i/50)
	now := metav1.NewTime(time.Unix(1_700_000_000+i, 0))
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("%s.%x", pod, 1_700_000_000_000_000_000+i),
			UID: types.UID(fmt.Sprintf("8c1402cd-a2ea-4cd7-acad-%012d", i)), CreationTimestamp: now},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: fmt.Sprintf("ns-%d", i%10), Name: pod, APIVersion: "v1",
			UID: types.UID(fmt.Sprintf("6c1d2f0e-3b7a-4c55-9f1e-%012d", i/50)), ResourceVersion: "4242", FieldPath: "spec.containers{app}"},
		Reason: "Pulled", Message: `Successfully pulled image "registry.k8s.io/e2e-test-images/agnhost:2.53" in 1.204s (1.204s including waiting). Image size: 52139218 bytes.`,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-7"}, FirstTimestamp: now, LastTimestamp: now, Count: 1, Type: corev1.EventTypeNormal,
		ReportingController: "kubelet", ReportingInstance: "node-7",
	}
}

func cpuNanos() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkCreate measures the store's cost per create with 64 concurrent
// writers and synced group commits: process CPU per create (which
// includes pebble's flushes and compactions as they happen) and the bytes
// pebble writes per create (WAL, flushes and compactions), a measure of
// the work that does not depend on timing noise.
func BenchmarkCreate(b *testing.B) {
	benchCreate(b, pebblestore.Options{Dir: b.TempDir(), DefaultTTL: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
}

// benchCreate is BenchmarkCreate on a store opened with opts.
func benchCreate(b *testing.B, opts pebblestore.Options) {
	s, err := pebblestore.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(32) // 64 writers on 2 cores
	cpu0 := cpuNanos()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Create(ctx, kubeletEvent(n.Add(1)), storage.WriteOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(s.Stats().CommittedWrites)/float64(s.Stats().Commits), "writes/commit")
	b.ReportMetric(float64(s.WrittenBytes())/float64(b.N), "disk-B/op")
}

// BenchmarkListObject measures listing one object's events among many
// stored ones, the query the secondary indexes exist for: by its uid, by
// involves.uid (the union of the regarding and related indexes), and by
// name within a namespace (an index lookup plus residual filtering).
func BenchmarkListObject(b *testing.B) {
	const stored = 20_000 // 400 pods × 50 events
	s, err := pebblestore.Open(pebblestore.Options{Dir: b.TempDir(), DefaultTTL: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= stored; i = next.Add(1) {
				if _, err := s.Create(ctx, kubeletEvent(i), storage.WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	ev := kubeletEvent(stored / 2)
	for _, c := range []struct {
		name string
		sel  storage.Selector
		want int
	}{
		{"uid", storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvedUID, Value: string(ev.InvolvedObject.UID)}}}, 50},
		{"involves.uid", storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvesUID, Value: string(ev.InvolvedObject.UID)}}}, 50},
		{"namespace+kind+name", storage.Selector{Namespace: ev.Namespace, Fields: eventapi.FieldSelector{
			{Field: eventapi.FieldInvolvedKind, Value: "Pod"}, {Field: eventapi.FieldInvolvedName, Value: ev.InvolvedObject.Name}}}, 5},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := s.List(ctx, storage.ListOptions{Selector: c.sel})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Items) != c.want {
					b.Fatalf("%d items, want %d", len(res.Items), c.want)
				}
			}
		})
	}
}

// BenchmarkListPage measures a page of 500 events of a namespace holding
// 100,000: the first page, which also counts the namespace's keys for
// remainingItemCount, against a later page (the count carried in the
// continue token) and the first page across namespaces (the store's
// count, read from the snapshot).
func BenchmarkListPage(b *testing.B) {
	const stored = 100_000
	s, err := pebblestore.Open(pebblestore.Options{Dir: b.TempDir(), DefaultTTL: 24 * time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= stored; i = next.Add(1) {
				ev := kubeletEvent(i)
				ev.Namespace, ev.InvolvedObject.Namespace = "busy", "busy"
				if _, err := s.Create(ctx, ev, storage.WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	first, err := s.List(ctx, storage.ListOptions{Limit: 500, Selector: storage.Selector{Namespace: "busy"}})
	if err != nil || first.RemainingItemCount == nil || *first.RemainingItemCount != stored-500 {
		b.Fatalf("first page: %v %v", first.RemainingItemCount, err)
	}
	for _, c := range []struct {
		name string
		opts storage.ListOptions
	}{
		{"namespace/first", storage.ListOptions{Limit: 500, Selector: storage.Selector{Namespace: "busy"}}},
		{"namespace/continued", storage.ListOptions{Limit: 500, Selector: storage.Selector{Namespace: "busy"}, Continue: first.Continue}},
		{"all/first", storage.ListOptions{Limit: 500}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := s.List(ctx, c.opts)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Items) != 500 || res.RemainingItemCount == nil {
					b.Fatalf("%d items, remaining %v", len(res.Items), res.RemainingItemCount)
				}
			}
		})
	}
}
