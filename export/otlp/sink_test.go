package otlp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// protocols are the two transports every delivery test runs over.
var protocols = []string{otlp.ProtocolGRPC, otlp.ProtocolHTTP}

// testTimeout bounds each wait of a test.
const testTimeout = 20 * time.Second

// newSink returns a sink for cfg, closed when t ends.
// sendTestBatch sends testBatch through s and returns the records r
// received, failing unless they are its three.
func sendTestBatch(t *testing.T, s *otlp.Sink, r *otlptest.Receiver) []otlptest.Record {
	t.Helper()
	if err := s.Send(context.Background(), testBatch()); err != nil {
		t.Fatalf("Send: %v", err)
	}
	recs := r.Records()
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	return recs
}

func newSink(t *testing.T, cfg otlp.Config) *otlp.Sink {
	t.Helper()
	s, err := otlp.New(cfg, otlp.Options{Version: "v0.0.0-test"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// plainConfig is a sink configuration for r over protocol without TLS.
func plainConfig(r *otlptest.Receiver, protocol string) otlp.Config {
	return otlp.Config{
		Protocol: protocol,
		Endpoint: r.Endpoint(protocol),
		Insecure: protocol == otlp.ProtocolGRPC,
		Headers:  map[string]string{"Authorization": "Bearer t0ken", "X-Tenant": "team-a"},
		Timeout:  metav1.Duration{Duration: testTimeout},
	}
}

var (
	created  = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	first    = time.Date(2026, 11, 24, 10, 0, 1, 0, time.UTC)
	last     = time.Date(2026, 11, 24, 10, 5, 0, 0, time.UTC)
	evtMicro = time.Date(2026, 11, 24, 10, 6, 0, 123456000, time.UTC)
)

// testBatch is three changes covering each severity rule, timestamp
// choice and change type.
func testBatch() []export.Record {
	normal := &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-1.abc", Namespace: "ns1", UID: "uid-1", ResourceVersion: "11", CreationTimestamp: metav1.NewTime(created)},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: "ns1", Name: "web-1", UID: "pod-uid", APIVersion: "v1",
			ResourceVersion: "42", FieldPath: "spec.containers{app}",
		},
		Reason: "Pulled", Message: "Successfully pulled image", Type: corev1.EventTypeNormal,
		Source:              corev1.EventSource{Component: "kubelet", Host: "node-a"},
		EventTime:           metav1.NewMicroTime(evtMicro),
		Action:              "Pulling",
		ReportingController: "kubelet", ReportingInstance: "node-a",
	}
	warning := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "web-1.def", Namespace: "ns1", UID: "uid-2", ResourceVersion: "12", CreationTimestamp: metav1.NewTime(created)},
		InvolvedObject: normal.InvolvedObject,
		Reason:         "BackOff", Message: "Back-off restarting failed container", Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-a"},
		FirstTimestamp: metav1.NewTime(first), LastTimestamp: metav1.NewTime(last), Count: 7,
	}
	custom := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "n.ghi", Namespace: "default", UID: "uid-3", ResourceVersion: "13", CreationTimestamp: metav1.NewTime(created)},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-b", UID: types.UID("node-uid")},
		Reason:         "Odd", Message: "an unusual type", Type: "Custom",
		FirstTimestamp: metav1.NewTime(first),
	}
	return []export.Record{
		{Key: export.KeyOf(normal, 11), Type: watch.Added, Revision: 11, Event: normal},
		{Key: export.KeyOf(warning, 12), Type: watch.Modified, Revision: 12, Event: warning},
		{Key: export.KeyOf(custom, 13), Type: watch.Deleted, Revision: 13, Event: custom},
	}
}

// want is what the collector must receive for testBatch, by idempotency key.
func want(protocol string) map[string]otlptest.Record {
	podRes := map[string]any{
		"k8s.node.name": "node-a", "k8s.object.kind": "Pod", "k8s.object.name": "web-1",
		"k8s.object.uid": "pod-uid", "k8s.object.fieldpath": "spec.containers{app}",
		"k8s.object.api_version": "v1", "k8s.object.resource_version": "42",
	}
	startTime := metav1.NewTime(created).String()
	return map[string]otlptest.Record{
		"uid-1/11": {
			Resource: podRes,
			Attributes: map[string]any{
				"k8s.event.reason": "Pulled", "k8s.event.action": "Pulling", "k8s.event.start_time": startTime,
				"k8s.event.name": "web-1.abc", "k8s.event.uid": "uid-1", "k8s.namespace.name": "ns1",
				"kubevents.idempotency_key": "uid-1/11", "kubevents.change.type": "ADDED", "kubevents.revision": int64(11),
			},
			Body: "Successfully pulled image", SeverityNumber: 9, SeverityText: "Normal", Timestamp: evtMicro,
		},
		"uid-2/12": {
			Resource: podRes,
			Attributes: map[string]any{
				"k8s.event.reason": "BackOff", "k8s.event.action": "", "k8s.event.start_time": startTime,
				"k8s.event.name": "web-1.def", "k8s.event.uid": "uid-2", "k8s.namespace.name": "ns1",
				"k8s.event.count":           int64(7),
				"kubevents.idempotency_key": "uid-2/12", "kubevents.change.type": "MODIFIED", "kubevents.revision": int64(12),
			},
			Body: "Back-off restarting failed container", SeverityNumber: 13, SeverityText: "Warning", Timestamp: last,
		},
		"uid-3/13": {
			Resource: map[string]any{
				"k8s.node.name": "", "k8s.object.kind": "Node", "k8s.object.name": "node-b",
				"k8s.object.uid": "node-uid", "k8s.object.fieldpath": "",
				"k8s.object.api_version": "", "k8s.object.resource_version": "",
			},
			Attributes: map[string]any{
				"k8s.event.reason": "Odd", "k8s.event.action": "", "k8s.event.start_time": startTime,
				"k8s.event.name": "n.ghi", "k8s.event.uid": "uid-3", "k8s.namespace.name": "",
				"kubevents.idempotency_key": "uid-3/13", "kubevents.change.type": "DELETED", "kubevents.revision": int64(13),
			},
			Body: "an unusual type", SeverityNumber: 0, SeverityText: "", Timestamp: first,
		},
	}
}

// byKey indexes received records by idempotency key, failing on a
// duplicate.
func byKey(t *testing.T, recs []otlptest.Record) map[string]otlptest.Record {
	t.Helper()
	m := make(map[string]otlptest.Record, len(recs))
	for _, r := range recs {
		k, _ := r.Attributes["kubevents.idempotency_key"].(string)
		if _, dup := m[k]; dup {
			t.Errorf("record %q received twice", k)
		}
		m[k] = r
	}
	return m
}

func TestSendRoundTrip(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			before := time.Now()
			if err := s.Send(ctx, testBatch()); err != nil {
				t.Fatalf("Send: %v", err)
			}
			// A nil error means the collector has the records: no wait.
			got := byKey(t, r.Records())
			if len(got) != 3 || r.Requests() != 1 {
				t.Fatalf("got %d records in %d requests, want 3 in 1", len(got), r.Requests())
			}
			for k, w := range want(proto) {
				g := got[k]
				if g.Scope != otlp.ScopeName || g.ScopeVersion != "v0.0.0-test" || g.Protocol != proto {
					t.Errorf("%s: scope %q %q protocol %q", k, g.Scope, g.ScopeVersion, g.Protocol)
				}
				if g.ObservedTimestamp.Before(before) {
					t.Errorf("%s: observed timestamp %v before the send", k, g.ObservedTimestamp)
				}
				if h := g.Headers["authorization"]; len(h) != 1 || h[0] != "Bearer t0ken" {
					t.Errorf("%s: authorization header %q", k, h)
				}
				if h := g.Headers["x-tenant"]; len(h) != 1 || h[0] != "team-a" {
					t.Errorf("%s: x-tenant header %q", k, h)
				}
				if g.Request != 1 {
					t.Errorf("%s: in request %d, want 1 (one batch, one request)", k, g.Request)
				}
				g.Scope, g.ScopeVersion, g.Protocol, g.ObservedTimestamp, g.Headers, g.Request = "", "", "", time.Time{}, nil, 0
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("%s: received record (-want +got):\n%s", k, diff)
				}
			}
		})
	}
}

func TestSendEmptyBatchSendsNothing(t *testing.T) {
	r := otlptest.Start(t, otlptest.Options{})
	s := newSink(t, plainConfig(r, otlp.ProtocolGRPC))
	if err := s.Send(context.Background(), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := r.Requests(); n != 0 {
		t.Fatalf("%d requests for an empty batch", n)
	}
}

// sendErr sends testBatch and returns the error, which must be non-nil.
func sendErr(t *testing.T, s *otlp.Sink) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := s.Send(ctx, testBatch())
	if err == nil {
		t.Fatal("Send succeeded, want an error")
	}
	return err
}

func TestSendUnavailableIsRetryable(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			r.SetMode(otlptest.Unavailable)
			if err := sendErr(t, s); errors.Is(err, export.ErrRejected) {
				t.Fatalf("Unavailable: %v wraps ErrRejected", err)
			}
			if n := r.Requests(); n != 1 {
				t.Fatalf("%d requests, want 1: the exporter must not retry by itself", n)
			}
			r.SetMode(otlptest.Accept)
			if err := s.Send(context.Background(), testBatch()); err != nil {
				t.Fatalf("Send once the collector is back: %v", err)
			}
			if n := len(r.Records()); n != 3 {
				t.Fatalf("%d records, want 3", n)
			}
		})
	}
}

func TestSendCollectorDownIsRetryable(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			if err := s.Send(context.Background(), testBatch()); err != nil {
				t.Fatalf("Send: %v", err)
			}
			r.Down()
			if err := sendErr(t, s); errors.Is(err, export.ErrRejected) {
				t.Fatalf("collector down: %v wraps ErrRejected", err)
			}
			if err := r.Up(); err != nil {
				t.Fatal(err)
			}
			// gRPC reconnects with backoff: the first sends after Up may
			// still fail, retryably, as the exporter's caller would see.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			for {
				err := s.Send(ctx, testBatch())
				if err == nil {
					break
				}
				if errors.Is(err, export.ErrRejected) || ctx.Err() != nil {
					t.Fatalf("Send after Up: %v", err)
				}
			}
			if n := len(byKey(t, r.Records()[3:])); n != 3 {
				t.Fatalf("%d records after the restart, want 3", n)
			}
		})
	}
}

func TestSendRejected(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			r.SetMode(otlptest.Reject)
			if err := sendErr(t, s); !errors.Is(err, export.ErrRejected) {
				t.Fatalf("InvalidArgument/400: %v does not wrap ErrRejected", err)
			}
		})
	}
}

func TestSendPartialSuccessRejected(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			r.SetMode(otlptest.PartialReject)
			if err := sendErr(t, s); !errors.Is(err, export.ErrRejected) {
				t.Fatalf("partial success: %v does not wrap ErrRejected", err)
			}
		})
	}
}

func TestSendPartialSuccessWarningIsSuccess(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			r.SetMode(otlptest.Warn)
			if err := s.Send(context.Background(), testBatch()); err != nil {
				t.Fatalf("Send answered with a warning: %v, want success", err)
			}
			if n := len(r.Records()); n != 3 {
				t.Fatalf("%d records, want 3", n)
			}
		})
	}
}

func TestSendHonoursContext(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			cfg := plainConfig(r, proto)
			cfg.Timeout = metav1.Duration{Duration: time.Hour} // only ctx can end the send
			s := newSink(t, cfg)
			r.SetMode(otlptest.Hang)

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Send(ctx, testBatch()) }()
			wctx, wcancel := context.WithTimeout(context.Background(), testTimeout)
			defer wcancel()
			if err := r.WaitRequests(wctx, 1); err != nil {
				t.Fatal(err)
			}
			cancel()
			select {
			case err := <-done:
				if err == nil || errors.Is(err, export.ErrRejected) {
					t.Fatalf("Send after cancel: %v, want a retryable error", err)
				}
			case <-wctx.Done():
				t.Fatal("Send did not return after its context was canceled")
			}

			// Already canceled: no request at all.
			if err := s.Send(ctx, testBatch()); !errors.Is(err, context.Canceled) {
				t.Fatalf("Send with a canceled context: %v", err)
			}
			if n := r.Requests(); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

func TestSendTimeout(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			cfg := plainConfig(r, proto)
			cfg.Timeout = metav1.Duration{Duration: 50 * time.Millisecond}
			s := newSink(t, cfg)
			r.SetMode(otlptest.Hang)
			// sendErr's context allows testTimeout: only cfg.Timeout ends
			// the send.
			if err := sendErr(t, s); errors.Is(err, export.ErrRejected) {
				t.Fatalf("timeout: %v wraps ErrRejected", err)
			}
		})
	}
}

// The exporters read OTEL_EXPORTER_OTLP_* variables for options they are
// not given; the configuration must decide alone.
func TestSendIgnoresOTLPEnvironment(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-from-env=leak")
			t.Setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-from-env=leak")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://127.0.0.1:1/v1/logs")
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
			t.Setenv("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "1")
			r := otlptest.Start(t, otlptest.Options{})
			cfg := plainConfig(r, proto)
			cfg.Headers = nil
			s := newSink(t, cfg)
			recs := sendTestBatch(t, s, r)
			for _, rec := range recs {
				if _, ok := rec.Headers["x-from-env"]; ok {
					t.Errorf("header from the environment sent")
				}
				if len(rec.Attributes) < 9 {
					t.Errorf("attributes limited by the environment: %v", rec.Attributes)
				}
			}
		})
	}
}

// BenchmarkSend measures sending batches of 500 changes to a loopback
// collector, one acknowledged request per batch.
func BenchmarkSend(b *testing.B) {
	const batchSize = 500
	tmpl := testBatch()
	batch := make([]export.Record, batchSize)
	for i := range batch {
		batch[i] = tmpl[i%len(tmpl)]
	}
	for _, proto := range protocols {
		b.Run(proto, func(b *testing.B) {
			r := otlptest.Start(b, otlptest.Options{})
			cfg := plainConfig(r, proto)
			s, err := otlp.New(cfg, otlp.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := s.Send(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// The records' observed timestamp is the sink's clock's time of the send.
func TestObservedTimestampFromClock(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			at := time.Date(2026, 11, 24, 12, 0, 0, 42, time.UTC)
			s, err := otlp.New(plainConfig(r, proto), otlp.Options{Clock: clocktesting.NewFakePassiveClock(at)})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			recs := sendTestBatch(t, s, r)
			for _, rec := range recs {
				if !rec.ObservedTimestamp.Equal(at) {
					t.Errorf("observed timestamp %v, want the clock's %v", rec.ObservedTimestamp, at)
				}
			}
		})
	}
}

// TestSendCarriesTheCluster: a fleet cluster's record has the resource
// attribute k8s.cluster.name, on a resource of its own even when the
// root cluster's same event shares everything else; the root cluster's
// has none, as before fleets. The namespace attribute is the real one.
func TestSendCarriesTheCluster(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t, otlptest.Options{})
			s := newSink(t, plainConfig(r, proto))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			ev := testBatch()[1].Event
			root := export.Record{Key: "root/21", Type: watch.Added, Revision: 21, Event: ev}
			east := export.Record{Key: "east/22", Type: watch.Added, Revision: 22, Cluster: "east", Event: ev}
			if err := s.Send(ctx, []export.Record{root, east}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := byKey(t, r.Records())
			if len(got) != 2 {
				t.Fatalf("got %d records, want 2", len(got))
			}
			podRes := want(proto)["uid-2/12"].Resource
			eastRes := map[string]any{"k8s.cluster.name": "east"}
			for k, v := range podRes {
				eastRes[k] = v
			}
			for key, res := range map[string]map[string]any{"root/21": podRes, "east/22": eastRes} {
				g := got[key]
				if diff := cmp.Diff(res, g.Resource); diff != "" {
					t.Errorf("%s: resource (-want +got):\n%s", key, diff)
				}
				if ns := g.Attributes[otlp.AttrNamespaceName]; ns != "ns1" {
					t.Errorf("%s: %s = %v, want ns1", key, otlp.AttrNamespaceName, ns)
				}
			}
		})
	}
}
