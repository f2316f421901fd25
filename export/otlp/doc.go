// Package otlp is the export sink that sends event changes to an
// OpenTelemetry collector as OTLP logs, over gRPC or HTTP (protobuf).
//
// The sink builds each batch straight from the events into the protocol's
// generated types (an ExportLogsServiceRequest), and sends it with the logs
// service's generated gRPC client (go.opentelemetry.io/proto/otlp) or as
// an OTLP/HTTP protobuf POST. It used to build the OpenTelemetry Go SDK's
// log records and export them with the SDK's OTLP log exporters; what a
// collector receives is the same (TestEncodingEqualsSDK keeps that path
// as the reference), at a fraction of the CPU.
//
// # Records
//
// Each export.Record becomes one log record shaped as the collector's
// Kubernetes events receiver (k8seventsreceiver) shapes a core/v1 Event, so
// that pipelines built for that receiver work unchanged:
//
//   - resource attributes: k8s.node.name (source.host) and, from the
//     involved object, k8s.object.kind, k8s.object.name, k8s.object.uid,
//     k8s.object.fieldpath, k8s.object.api_version and
//     k8s.object.resource_version; for the events of a fleet's cluster
//     (export.Record.Cluster), k8s.cluster.name too (OpenTelemetry's
//     semantic convention), left out for the root cluster's, so that an
//     eventsd without a fleet sends what it always sent;
//   - record attributes: k8s.event.reason, k8s.event.action,
//     k8s.event.start_time (the event's creationTimestamp, formatted as the
//     receiver formats it), k8s.event.name, k8s.event.uid,
//     k8s.namespace.name (the involved object's namespace, the
//     cluster's own, never a storage namespace) and, when
//     non-zero, k8s.event.count;
//   - body: the event's message;
//   - severity: type Normal is INFO, Warning WARN, Error ERROR, Critical
//     FATAL (case-insensitive), with the type as severity text; any other
//     type leaves the severity unset;
//   - timestamp: eventTime, else lastTimestamp, else firstTimestamp.
//
// kubevents adds three record attributes of its own:
// kubevents.idempotency_key (export.Record.Key, the same on every resend),
// kubevents.change.type (ADDED, MODIFIED or DELETED) and kubevents.revision
// (the change's resourceVersion as an integer). The receiver's records carry
// no change type because it only sees additions and updates; a deletion
// here is the event's last state with change type DELETED.
//
// Records of one batch travel in one export request. OTLP groups them by
// resource (involved object), so the collector does not see them in
// revision order; kubevents.revision restores it where it matters.
//
// # Delivery
//
// Send exports the whole batch synchronously, one request, and returns
// only after the collector answered: nil means the collector acknowledged
// every record. The sink does not retry by itself: the export package
// retries with its backoff and moves the sink's cursor only on success, so
// a second retry loop here would only hide failures and outlive ctx. Each
// request carries the configured headers (gRPC metadata, lower-cased, or
// HTTP headers), a User-Agent of kubevents-export/<version>, and is bounded
// by the configured timeout; nothing is read from OTEL_* environment
// variables.
//
// The collector's answer is classified as OTLP specifies:
//
//   - gRPC InvalidArgument, gRPC ResourceExhausted without RetryInfo (the
//     request is too large), HTTP 400 and HTTP 413, and a partial success
//     that rejected records: the error wraps export.ErrRejected;
//   - anything else (unreachable, Unavailable, 503, 429, authentication
//     failures, timeouts): a plain, retryable error. Authentication and
//     permission failures are retryable on purpose: they refuse every
//     batch, not this one, and dropping batches until an operator fixes a
//     credential would lose them;
//   - a partial success that rejected nothing (a warning) is success.
//
// The records a partial success accepted are delivered all the same; the
// export package's resends of that batch deliver them again, with the same
// idempotency keys, until it drops the batch.
package otlp
