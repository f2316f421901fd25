package otlptest_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/export/otlp/otlptest"
	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestDiscardObservesKeys: a discarding receiver keeps no records but
// reports each record's idempotency key, as a keeping one does.
func TestDiscardObservesKeys(t *testing.T) {
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	rec := func(key string) *logspb.LogRecord {
		lr := &logspb.LogRecord{Attributes: []*commonpb.KeyValue{{Key: "k8s.event.reason", Value: str("Pulled")}}}
		if key != "" {
			lr.Attributes = append(lr.Attributes, &commonpb.KeyValue{Key: "kubevents.idempotency_key", Value: str(key)})
		}
		return lr
	}
	req := &collogpb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{rec("a"), rec(""), rec("b")}}}},
		{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: []*logspb.LogRecord{rec("c")}}}},
	}}
	for _, discard := range []bool{false, true} {
		var mu sync.Mutex
		var got []string
		r := otlptest.Start(t, otlptest.Options{Discard: discard, Observe: func(keys []string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, keys...)
		}})
		conn, err := grpc.NewClient(r.GRPCEndpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := collogpb.NewLogsServiceClient(conn).Export(ctx, req); err != nil {
			t.Fatalf("discard=%v: export: %v", discard, err)
		}
		cancel()
		_ = conn.Close()
		mu.Lock()
		if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("discard=%v: observed keys %q, want %q", discard, got, want)
		}
		mu.Unlock()
		if n := len(r.Records()); discard && n != 0 || !discard && n != 4 {
			t.Errorf("discard=%v: %d records kept", discard, n)
		}
		if n := r.Requests(); n != 1 {
			t.Errorf("discard=%v: %d requests counted, want 1", discard, n)
		}
	}
}
