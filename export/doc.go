// Package export tees event changes to sinks (webhooks, OpenTelemetry
// collectors, files) without loss or duplicates beyond a batch: every
// matching change reaches every sink in revision order, at least once,
// each record carrying an idempotency key (the event's UID and the
// change's resourceVersion).
//
// Each sink has a cursor, the last revision it acknowledged, saved durably
// in the store (storage.CursorStore). The exporter watches the store from
// that cursor, filters, batches and sends; only after the sink
// acknowledges a batch is the cursor moved. A restart, even after kill -9,
// resumes from the saved cursor, so at most the unacknowledged batch is
// sent again. The store keeps its change history back to the slowest
// cursor (storage.HistoryHolder), up to a bound; changes lost beyond it
// are counted and logged.
//
// The sinks live in subpackages (webhook, otlp, file); this package holds
// what they share: Record, its JSON form and the Sink interface.
package export
