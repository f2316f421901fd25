package otlp

import (
	"strings"
	"time"

	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	cpb "go.opentelemetry.io/proto/otlp/common/v1"
	lpb "go.opentelemetry.io/proto/otlp/logs/v1"
	rpb "go.opentelemetry.io/proto/otlp/resource/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubevents/kubevents/export"
)

// Attribute names. The k8s.* ones are the collector's Kubernetes events
// receiver's (and OpenTelemetry's semantic conventions where one exists);
// the kubevents.* ones are this sink's own.
const (
	// AttrClusterName is the resource attribute of a fleet's cluster
	// (OpenTelemetry's k8s.cluster.name), left out for the root
	// cluster's events.
	AttrClusterName           = "k8s.cluster.name"
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
var severities = map[string]lpb.SeverityNumber{
	"normal":   lpb.SeverityNumber_SEVERITY_NUMBER_INFO,
	"warning":  lpb.SeverityNumber_SEVERITY_NUMBER_WARN,
	"error":    lpb.SeverityNumber_SEVERITY_NUMBER_ERROR,
	"critical": lpb.SeverityNumber_SEVERITY_NUMBER_FATAL,
}

// severityOf returns the severity of an event of type t; ok is false for
// a type that has none.
func severityOf(t string) (lpb.SeverityNumber, bool) {
	// The usual spellings first: they need no lower-casing (which
	// allocates for Normal and Warning).
	switch t {
	case corev1.EventTypeNormal:
		return lpb.SeverityNumber_SEVERITY_NUMBER_INFO, true
	case corev1.EventTypeWarning:
		return lpb.SeverityNumber_SEVERITY_NUMBER_WARN, true
	}
	n, ok := severities[strings.ToLower(t)]
	return n, ok
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

// unixNano is t in OTLP's nanoseconds since the epoch; 0 (unset) for the
// zero time and times before the epoch, as the OpenTelemetry SDK sends
// them.
func unixNano(t time.Time) uint64 {
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// Attributes per record and resource: their number fixes the size of the
// encoder's blocks.
const (
	// resourceAttrs is the most resource attributes (k8s.cluster.name
	// is only there for a fleet's cluster).
	resourceAttrs = 8
	// recordAttrs is the most record attributes (k8s.event.count is
	// only there when non-zero).
	recordAttrs = 10
	// recordStrings is the most string values of a record: its string
	// attributes and its body.
	recordStrings = 10
	// recordInts is the most integer attributes of a record.
	recordInts = 2
)

// resourceKey identifies a record's resource: its attributes' values, in
// the order of resourceAttrs' keys; an empty cluster (the first) is left
// out.
type resourceKey [resourceAttrs]string

// resourceAttrKeys are the resource attributes' keys in the order the
// OpenTelemetry SDK sends them (sorted, as its attribute sets are).
var resourceAttrKeys = [resourceAttrs]string{
	AttrClusterName,
	AttrNodeName,
	AttrObjectAPIVersion,
	AttrObjectFieldPath,
	AttrObjectKind,
	AttrObjectName,
	AttrObjectResourceVersion,
	AttrObjectUID,
}

// resourceKeyOf returns the key of r's resource: where it happened (the
// cluster, the node) and the object it is about, in resourceAttrKeys'
// order.
func resourceKeyOf(r *export.Record) resourceKey {
	ev := r.Event
	o := &ev.InvolvedObject
	return resourceKey{r.Cluster, ev.Source.Host, o.APIVersion, o.FieldPath, o.Kind, o.Name, o.ResourceVersion, string(o.UID)}
}

// encoder writes batches of records straight into OTLP's generated types
// (go.opentelemetry.io/proto/otlp): one ExportLogsServiceRequest per
// batch, a ResourceLogs per distinct resource in the order of their first
// record, each with one ScopeLogs holding its records in batch order.
//
// It allocates the messages of a batch in a few blocks rather than one by
// one: a record is some 30 small messages, and a batch up to 500 records.
// Not safe for concurrent use (a sink's Send is never called
// concurrently).
type encoder struct {
	scope *cpb.InstrumentationScope
	// index maps a resource to its ResourceLogs in the request being
	// built; emptied for each batch.
	index map[resourceKey]*lpb.ResourceLogs
	// now reads the time for the records' observed timestamps.
	now func() time.Time
}

// newEncoder returns an encoder whose records carry the scope ScopeName
// with version scopeVersion (unset when empty).
func newEncoder(scopeVersion string, now func() time.Time) *encoder {
	return &encoder{
		scope: &cpb.InstrumentationScope{Name: ScopeName, Version: scopeVersion},
		index: make(map[resourceKey]*lpb.ResourceLogs),
		now:   now,
	}
}

// blocks hold a batch's messages, handed out in order.
type blocks struct {
	records []lpb.LogRecord
	kvs     []cpb.KeyValue
	kvPtrs  []*cpb.KeyValue
	values  []cpb.AnyValue
	strs    []cpb.AnyValue_StringValue
	ints    []cpb.AnyValue_IntValue
}

// newBlocks returns blocks for records records and resources resources.
func newBlocks(records, resources int) *blocks {
	kvs := records*recordAttrs + resources*resourceAttrs
	return &blocks{
		records: make([]lpb.LogRecord, records),
		kvs:     make([]cpb.KeyValue, kvs),
		kvPtrs:  make([]*cpb.KeyValue, kvs),
		values:  make([]cpb.AnyValue, kvs+records),
		strs:    make([]cpb.AnyValue_StringValue, records*recordStrings+resources*resourceAttrs),
		ints:    make([]cpb.AnyValue_IntValue, records*recordInts),
	}
}

// attrs returns an empty slice of key-values with room for n.
func (b *blocks) attrs(n int) []*cpb.KeyValue {
	a := b.kvPtrs[:0:n]
	b.kvPtrs = b.kvPtrs[n:]
	return a
}

// take returns the first element of the block *s and moves *s past it.
func take[T any](s *[]T) *T {
	x := &(*s)[0]
	*s = (*s)[1:]
	return x
}

// str returns the string value v.
func (b *blocks) str(v string) *cpb.AnyValue {
	s := take(&b.strs)
	s.StringValue = v
	val := take(&b.values)
	val.Value = s
	return val
}

// int returns the integer value v.
func (b *blocks) int(v int64) *cpb.AnyValue {
	i := take(&b.ints)
	i.IntValue = v
	val := take(&b.values)
	val.Value = i
	return val
}

// kv returns the key-value key=v.
func (b *blocks) kv(key string, v *cpb.AnyValue) *cpb.KeyValue {
	kv := take(&b.kvs)
	kv.Key, kv.Value = key, v
	return kv
}

// record returns a new, empty log record.
func (b *blocks) record() *lpb.LogRecord { return take(&b.records) }

// encode returns the export request of batch, whose records are observed
// now. The request shares strings with batch's events.
func (e *encoder) encode(batch []export.Record) *collogpb.ExportLogsServiceRequest {
	clear(e.index)
	keys := make([]resourceKey, len(batch))
	for i := range batch {
		keys[i] = resourceKeyOf(&batch[i])
		e.index[keys[i]] = nil
	}
	b := newBlocks(len(batch), len(e.index))
	rls := make([]lpb.ResourceLogs, len(e.index))
	sls := make([]lpb.ScopeLogs, len(e.index))
	res := make([]rpb.Resource, len(e.index))
	req := &collogpb.ExportLogsServiceRequest{ResourceLogs: make([]*lpb.ResourceLogs, 0, len(e.index))}
	observed := unixNano(e.now())
	for i := range batch {
		rl := e.index[keys[i]]
		if rl == nil {
			n := len(req.ResourceLogs)
			r := &res[n]
			r.Attributes = b.attrs(resourceAttrs)
			for j, k := range resourceAttrKeys {
				if k == AttrClusterName && keys[i][j] == "" {
					continue
				}
				r.Attributes = append(r.Attributes, b.kv(k, b.str(keys[i][j])))
			}
			sl := &sls[n]
			sl.Scope = e.scope
			rl = &rls[n]
			rl.Resource = r
			rl.ScopeLogs = []*lpb.ScopeLogs{sl}
			e.index[keys[i]] = rl
			req.ResourceLogs = append(req.ResourceLogs, rl)
		}
		sl := rl.ScopeLogs[0]
		sl.LogRecords = append(sl.LogRecords, e.logRecord(b, &batch[i], observed))
	}
	return req
}

// logRecord returns the log record of r, without its resource: the
// events receiver's fields and attributes, then kubevents' own.
func (e *encoder) logRecord(b *blocks, r *export.Record, observed uint64) *lpb.LogRecord {
	ev := r.Event
	lr := b.record()
	lr.TimeUnixNano = unixNano(eventTimestamp(ev))
	lr.ObservedTimeUnixNano = observed
	if sev, ok := severityOf(ev.Type); ok {
		lr.SeverityNumber = sev
		lr.SeverityText = ev.Type
	}
	lr.Body = b.str(ev.Message)
	a := b.attrs(recordAttrs)
	a = append(a,
		b.kv(AttrEventReason, b.str(ev.Reason)),
		b.kv(AttrEventAction, b.str(ev.Action)),
		// metav1.Time's String, as the receiver writes it.
		b.kv(AttrEventStartTime, b.str(ev.CreationTimestamp.String())),
		b.kv(AttrEventName, b.str(ev.Name)),
		b.kv(AttrEventUID, b.str(string(ev.UID))),
		b.kv(AttrNamespaceName, b.str(ev.InvolvedObject.Namespace)),
	)
	if ev.Count != 0 {
		a = append(a, b.kv(AttrEventCount, b.int(int64(ev.Count))))
	}
	a = append(a,
		b.kv(AttrIdempotencyKey, b.str(r.Key)),
		b.kv(AttrChangeType, b.str(string(r.Type))),
		b.kv(AttrRevision, b.int(r.Revision)),
	)
	lr.Attributes = a
	return lr
}
