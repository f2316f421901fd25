package otlp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/google/go-cmp/cmp"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
)

// This file keeps the sink's former encoding, through the OpenTelemetry
// SDK's log records and its OTLP gRPC exporter, as the reference the
// sink's own encoding must equal on the wire.

// sdkSeverities is the former sink's severity table.
var sdkSeverities = map[string]otellog.Severity{
	"normal":   otellog.SeverityInfo,
	"warning":  otellog.SeverityWarn,
	"error":    otellog.SeverityError,
	"critical": otellog.SeverityFatal,
}

func sdkResourceOf(ev *corev1.Event) *resource.Resource {
	o := &ev.InvolvedObject
	return resource.NewSchemaless(
		attribute.String(otlp.AttrNodeName, ev.Source.Host),
		attribute.String(otlp.AttrObjectKind, o.Kind),
		attribute.String(otlp.AttrObjectName, o.Name),
		attribute.String(otlp.AttrObjectUID, string(o.UID)),
		attribute.String(otlp.AttrObjectFieldPath, o.FieldPath),
		attribute.String(otlp.AttrObjectAPIVersion, o.APIVersion),
		attribute.String(otlp.AttrObjectResourceVersion, o.ResourceVersion),
	)
}

func sdkLogRecordOf(r *export.Record) otellog.Record {
	ev := r.Event
	var lr otellog.Record
	switch {
	case !ev.EventTime.IsZero():
		lr.SetTimestamp(ev.EventTime.Time)
	case !ev.LastTimestamp.IsZero():
		lr.SetTimestamp(ev.LastTimestamp.Time)
	default:
		lr.SetTimestamp(ev.FirstTimestamp.Time)
	}
	lr.SetBody(attribute.StringValue(ev.Message))
	if sev, ok := sdkSeverities[strings.ToLower(ev.Type)]; ok {
		lr.SetSeverity(sev)
		lr.SetSeverityText(ev.Type)
	}
	lr.AddAttributes(
		attribute.String(otlp.AttrEventReason, ev.Reason),
		attribute.String(otlp.AttrEventAction, ev.Action),
		attribute.String(otlp.AttrEventStartTime, ev.CreationTimestamp.String()),
		attribute.String(otlp.AttrEventName, ev.Name),
		attribute.String(otlp.AttrEventUID, string(ev.UID)),
		attribute.String(otlp.AttrNamespaceName, ev.InvolvedObject.Namespace),
	)
	if ev.Count != 0 {
		lr.AddAttributes(attribute.Int64(otlp.AttrEventCount, int64(ev.Count)))
	}
	lr.AddAttributes(
		attribute.String(otlp.AttrIdempotencyKey, r.Key),
		attribute.String(otlp.AttrChangeType, string(r.Type)),
		attribute.Int64(otlp.AttrRevision, r.Revision),
	)
	return lr
}

// sdkCollector is a log processor keeping what is emitted.
type sdkCollector struct{ records []sdklog.Record }

func (c *sdkCollector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.records = append(c.records, r.Clone())
	return nil
}
func (*sdkCollector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (*sdkCollector) Shutdown(context.Context) error                         { return nil }
func (*sdkCollector) ForceFlush(context.Context) error                       { return nil }

// sdkExport sends batch to endpoint as the former sink did: SDK records
// built through a LoggerProvider per resource, exported synchronously by
// the SDK's OTLP gRPC exporter.
func sdkExport(t *testing.T, endpoint, version string, batch []export.Record) {
	t.Helper()
	ctx := context.Background()
	exp, err := otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(endpoint), otlploggrpc.WithInsecure(),
		otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := exp.Shutdown(ctx); err != nil {
			t.Errorf("SDK exporter shutdown: %v", err)
		}
	}()
	var coll sdkCollector
	loggers := map[attribute.Distinct]otellog.Logger{}
	for i := range batch {
		res := sdkResourceOf(batch[i].Event)
		lg, ok := loggers[res.Equivalent()]
		if !ok {
			lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(&coll),
				sdklog.WithAttributeCountLimit(-1), sdklog.WithAttributeValueLengthLimit(-1), sdklog.WithAllowKeyDuplication())
			lg = lp.Logger(otlp.ScopeName, otellog.WithInstrumentationVersion(version))
			loggers[res.Equivalent()] = lg
		}
		lg.Emit(ctx, sdkLogRecordOf(&batch[i]))
	}
	if err := exp.Export(ctx, coll.records); err != nil {
		t.Fatalf("SDK export: %v", err)
	}
}

// variedBatch returns n changes of events drawn from rng: shared and
// distinct resources, every field empty or not, each event type's
// spellings, each timestamp choice (also before 1970), counts, long and
// non-ASCII messages.
func variedBatch(rng *rand.Rand, n int) []export.Record {
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	ts := func() metav1.Time {
		switch rng.IntN(4) {
		case 0:
			return metav1.Time{}
		case 1:
			return metav1.NewTime(time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC))
		default:
			return metav1.NewTime(time.Unix(1_700_000_000+rng.Int64N(1e8), 0).UTC())
		}
	}
	out := make([]export.Record, n)
	for i := range out {
		ev := &corev1.Event{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("pod-%d.%x", rng.IntN(5), rng.Uint32()), Namespace: pick("", "default", "ns-ä"),
				UID: types.UID(fmt.Sprintf("uid-%d", i)), CreationTimestamp: ts(),
			},
			InvolvedObject: corev1.ObjectReference{
				Kind: pick("Pod", "Node", ""), Namespace: pick("", "default", "ns-ä"), Name: fmt.Sprintf("obj-%d", rng.IntN(4)),
				UID: types.UID(pick("", "u1", "u2")), APIVersion: pick("", "v1", "apps/v1"),
				ResourceVersion: pick("", "42"), FieldPath: pick("", "spec.containers{app}"),
			},
			Reason: pick("", "BackOff", "Pulled"), Action: pick("", "Pulling"),
			Message:        pick("", "short", "ünïcødé ✓ message", strings.Repeat("long message ", 200)),
			Type:           pick("Normal", "Warning", "normal", "WARNING", "Error", "CRITICAL", "Custom", ""),
			Source:         corev1.EventSource{Component: "kubelet", Host: pick("", "node-a", "node-b")},
			Count:          int32(pick2(rng, 0, 1, 600, 1<<31-1)),
			FirstTimestamp: ts(), LastTimestamp: ts(),
		}
		if rng.IntN(3) == 0 {
			ev.EventTime = metav1.NewMicroTime(time.Unix(1_700_000_000+rng.Int64N(1e8), rng.Int64N(1e9)).Truncate(time.Microsecond))
		}
		rev := int64(100 + i)
		typ := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}[rng.IntN(3)]
		out[i] = export.Record{Key: export.KeyOf(ev, rev), Type: typ, Revision: rev, Event: ev}
	}
	return out
}

func pick2(rng *rand.Rand, vs ...int) int { return vs[rng.IntN(len(vs))] }

// normalized returns req's resource logs sorted by their resources (the
// SDK's exporter orders them by map iteration), with the observed
// timestamps, which are the time of sending, cleared after checking they
// are set.
func normalized(t *testing.T, req *collogpb.ExportLogsServiceRequest) *collogpb.ExportLogsServiceRequest {
	t.Helper()
	req = proto.Clone(req).(*collogpb.ExportLogsServiceRequest)
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				if lr.ObservedTimeUnixNano == 0 {
					t.Errorf("record %v without an observed timestamp", lr.Attributes)
				}
				lr.ObservedTimeUnixNano = 0
			}
		}
	}
	key := func(rl any) string {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rl.(proto.Message))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	slices.SortFunc(req.ResourceLogs, func(a, b *logspb.ResourceLogs) int {
		return strings.Compare(key(a.GetResource()), key(b.GetResource()))
	})
	return req
}

// The sink encodes each batch itself; what a collector receives must be
// exactly what the former SDK-based encoding sent, field for field and in
// the same order within each resource.
func TestEncodingEqualsSDK(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	batches := [][]export.Record{testBatch(), variedBatch(rng, 1), variedBatch(rng, 50), variedBatch(rng, 500)}
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			ref := otlptest.Start(t, otlptest.Options{KeepRequests: true})
			got := otlptest.Start(t, otlptest.Options{KeepRequests: true})
			cfg := plainConfig(got, protocol)
			cfg.Headers = nil
			s := newSink(t, cfg)
			for i, batch := range batches {
				sdkExport(t, ref.GRPCEndpoint(), "v0.0.0-test", batch)
				if err := s.Send(context.Background(), batch); err != nil {
					t.Fatalf("batch %d: Send: %v", i, err)
				}
			}
			want, have := ref.ExportRequests(), got.ExportRequests()
			if len(want) != len(batches) || len(have) != len(batches) {
				t.Fatalf("%d requests from the SDK, %d from the sink, want %d each", len(want), len(have), len(batches))
			}
			for i := range batches {
				w, h := normalized(t, want[i]), normalized(t, have[i])
				if proto.Equal(w, h) {
					continue
				}
				if len(w.ResourceLogs) != len(h.ResourceLogs) {
					t.Errorf("batch %d: %d resources from the SDK, %d from the sink", i, len(w.ResourceLogs), len(h.ResourceLogs))
					continue
				}
				// Show the first resource that differs (a diff of the
				// whole request takes minutes).
				for j := range w.ResourceLogs {
					if !proto.Equal(w.ResourceLogs[j], h.ResourceLogs[j]) {
						t.Errorf("batch %d of %d records, resource %d (-SDK +sink):\n%s", i, len(batches[i]), j,
							cmp.Diff(w.ResourceLogs[j], h.ResourceLogs[j], protocmp.Transform()))
						break
					}
				}
			}
		})
	}
}
