package otlp

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubevents/kubevents/export"
)

// Attribute names. The k8s.* ones are the collector's Kubernetes events
// receiver's (and OpenTelemetry's semantic conventions where one exists);
// the kubevents.* ones are this sink's own.
const (
	AttrNodeName              = "k8s.node.name"
	AttrObjectKind            = "k8s.object.kind"
	AttrObjectName            = "k8s.object.name"
	AttrObjectUID             = "k8s.object.uid"
	AttrObjectFieldPath       = "k8s.object.fieldpath"
	AttrObjectAPIVersion      = "k8s.object.api_version"
	AttrObjectResourceVersion = "k8s.object.resource_version"

	AttrEventReason    = "k8s.event.reason"
	AttrEventAction    = "k8s.event.action"
	AttrEventStartTime = "k8s.event.start_time"
	AttrEventName      = "k8s.event.name"
	AttrEventUID       = "k8s.event.uid"
	AttrNamespaceName  = "k8s.namespace.name"
	AttrEventCount     = "k8s.event.count"

	AttrIdempotencyKey = "kubevents.idempotency_key"
	AttrChangeType     = "kubevents.change.type"
	AttrRevision       = "kubevents.revision"
)

// ScopeName is the instrumentation scope of the exported records.
const ScopeName = "github.com/kubevents/kubevents/export/otlp"

// severities maps lower-cased event types to log severities, as the
// events receiver does. Kubernetes defines Normal and Warning; the
// receiver also accepts Error and Critical, and so does this sink.
var severities = map[string]otellog.Severity{
	"normal":   otellog.SeverityInfo,
	"warning":  otellog.SeverityWarn,
	"error":    otellog.SeverityError,
	"critical": otellog.SeverityFatal,
}

// eventTimestamp is the time of the event's latest occurrence the receiver
// puts on the record: eventTime, else lastTimestamp, else firstTimestamp
// (zero if none is set).
func eventTimestamp(ev *corev1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	default:
		return ev.FirstTimestamp.Time
	}
}

// resourceOf returns the resource of ev's record: where it happened and
// the object it is about.
func resourceOf(ev *corev1.Event) *resource.Resource {
	o := &ev.InvolvedObject
	return resource.NewSchemaless(
		attribute.String(AttrNodeName, ev.Source.Host),
		attribute.String(AttrObjectKind, o.Kind),
		attribute.String(AttrObjectName, o.Name),
		attribute.String(AttrObjectUID, string(o.UID)),
		attribute.String(AttrObjectFieldPath, o.FieldPath),
		attribute.String(AttrObjectAPIVersion, o.APIVersion),
		attribute.String(AttrObjectResourceVersion, o.ResourceVersion),
	)
}

// logRecordOf returns the log record of r, without its resource.
func logRecordOf(r *export.Record) otellog.Record {
	ev := r.Event
	var lr otellog.Record
	lr.SetTimestamp(eventTimestamp(ev))
	lr.SetBody(attribute.StringValue(ev.Message))
	if sev, ok := severities[strings.ToLower(ev.Type)]; ok {
		lr.SetSeverity(sev)
		lr.SetSeverityText(ev.Type)
	}
	lr.AddAttributes(
		attribute.String(AttrEventReason, ev.Reason),
		attribute.String(AttrEventAction, ev.Action),
		// metav1.Time's String, as the receiver writes it.
		attribute.String(AttrEventStartTime, ev.CreationTimestamp.String()),
		attribute.String(AttrEventName, ev.Name),
		attribute.String(AttrEventUID, string(ev.UID)),
		attribute.String(AttrNamespaceName, ev.InvolvedObject.Namespace),
	)
	if ev.Count != 0 {
		lr.AddAttributes(attribute.Int64(AttrEventCount, int64(ev.Count)))
	}
	lr.AddAttributes(
		attribute.String(AttrIdempotencyKey, r.Key),
		attribute.String(AttrChangeType, string(r.Type)),
		attribute.Int64(AttrRevision, r.Revision),
	)
	return lr
}

// collector is a log Processor that keeps what is emitted, so that SDK
// records are built through the SDK's own LoggerProvider and handed to the
// exporter synchronously.
type collector struct {
	records []sdklog.Record
}

var _ sdklog.Processor = (*collector)(nil)

// OnEmit keeps a copy of r (the SDK may reuse r after OnEmit returns).
func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.records = append(c.records, r.Clone())
	return nil
}

// Enabled reports that every record is wanted.
func (*collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

// Shutdown does nothing: the collector holds no resources.
func (*collector) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing: records are taken by the caller.
func (*collector) ForceFlush(context.Context) error { return nil }

// unlimited lifts the SDK's attribute limits, which otherwise come from
// OTEL_LOGRECORD_* environment variables; a record has a fixed, small
// set of attributes, and event messages are bounded by the API server.
const unlimited = -1

// maxLoggers bounds the loggers a sink keeps between batches: one per
// distinct resource (node and involved object), so that the events of the
// objects that produce most of them (a crashlooping pod's count changes)
// reuse theirs. Past it the cache is emptied and refilled.
const maxLoggers = 4096

// recordBuilder turns batches into SDK log records. The SDK fixes a
// record's resource by its LoggerProvider, so there is one provider (and
// logger) per distinct resource; providers hold no goroutines or
// connections, and are kept between batches (up to maxLoggers), since
// building one costs more than the records it emits. Not safe for
// concurrent use (a sink's Send is never called concurrently).
type recordBuilder struct {
	coll    collector
	loggers map[attribute.Distinct]otellog.Logger
	version string
}

func newRecordBuilder(scopeVersion string) *recordBuilder {
	return &recordBuilder{loggers: make(map[attribute.Distinct]otellog.Logger), version: scopeVersion}
}

// build returns batch's records, in batch order, valid until the next
// call.
func (b *recordBuilder) build(batch []export.Record) []sdklog.Record {
	b.coll.records = b.coll.records[:0]
	// Records are built, not logged: no trace context belongs on them.
	ctx := context.Background()
	for i := range batch {
		res := resourceOf(batch[i].Event)
		key := res.Equivalent()
		lg, ok := b.loggers[key]
		if !ok {
			if len(b.loggers) >= maxLoggers {
				clear(b.loggers)
			}
			lp := sdklog.NewLoggerProvider(
				sdklog.WithResource(res),
				sdklog.WithProcessor(&b.coll),
				sdklog.WithAttributeCountLimit(unlimited),
				sdklog.WithAttributeValueLengthLimit(unlimited),
				// The attributes are distinct by construction: the SDK's
				// deduplication would only cost (a third of building).
				sdklog.WithAllowKeyDuplication(),
			)
			lg = lp.Logger(ScopeName, otellog.WithInstrumentationVersion(b.version))
			b.loggers[key] = lg
		}
		lg.Emit(ctx, logRecordOf(&batch[i]))
	}
	return b.coll.records
}
