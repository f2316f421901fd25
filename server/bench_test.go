package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufEvent is a legacy-recorder-shaped create body as client-go's
// typed client sends it: the protobuf envelope.
func protobufEvent(b *testing.B, name string) []byte {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-7d4b9c-x2x9k", UID: "6c1d2f0e-3b7a-4c55-9f1e-2a8d4b6c9e01", APIVersion: "v1", ResourceVersion: "1234", FieldPath: "spec.containers{web}"},
		Reason:         "Pulled", Message: "Successfully pulled image \"nginx:1.27\" in 1.2s (1.2s including waiting). Image size: 72 MB.",
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: now, LastTimestamp: now, Count: 1, Type: "Normal",
	}
	raw, err := ev.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Event"}, Raw: raw}
	env, _ := u.Marshal()
	return append([]byte("k8s\x00"), env...)
}

// BenchmarkServerCreate measures the whole create path in process: HTTP,
// protobuf decode, validation, a synced group commit, encoding the answer.
func BenchmarkServerCreate(b *testing.B) {
	benchmarkServerCreate(b, server.Config{})
}

// BenchmarkServerCreateRateLimited is BenchmarkServerCreate with event
// rate limits of every type, generous enough that nothing is refused: the
// cost of the limiter on the create path.
func BenchmarkServerCreateRateLimited(b *testing.B) {
	const generous = 1 << 30
	var limits []eventratelimit.Limit
	for _, t := range []eventratelimit.LimitType{eventratelimit.ServerLimitType, eventratelimit.NamespaceLimitType,
		eventratelimit.UserLimitType, eventratelimit.SourceAndObjectLimitType} {
		limits = append(limits, eventratelimit.Limit{Type: t, QPS: generous, Burst: generous})
	}
	l, err := eventratelimit.New(&eventratelimit.Configuration{Limits: limits}, eventratelimit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkServerCreate(b, server.Config{EventRateLimit: l})
}

func benchmarkServerCreate(b *testing.B, cfg server.Config) {
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg.Store, cfg.Logger = store, log
	srv, err := server.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	url := hs.URL + "/api/v1/namespaces/default/events"
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() {
		// CPU of the whole process (server and clients) per create: what a
		// change to the server's path costs, less sensitive than ns/op to
		// the disk's fsync latency.
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		for pb.Next() {
			body := protobufEvent(b, fmt.Sprintf("web.%x", n.Add(1)))
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/vnd.kubernetes.protobuf")
			req.Header.Set("Accept", "application/vnd.kubernetes.protobuf,application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
