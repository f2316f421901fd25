// Package record is a drop-in replacement for k8s.io/client-go/tools/record,
// the core/v1 Event recorder: switching is an import change. Its interfaces
// are client-go's own (aliased), its sinks accept client-go's
// typedcorev1.EventSinkImpl unchanged, and the requests it sends are the
// ones client-go sends where callers rely on them: the same aggregation of
// similar messages into a "(combined from similar events): " event, the
// same counting of repeats with byte-identical strategic-merge patches
// ({"count":N,"lastTimestamp":"...","message":"..."}), the same names
// (<object>.<UnixNano hex>, a UUID when that is not a valid name), the same
// namespace defaulting and the same PATCH, 404, POST sequence for events the
// server has expired.
//
// It differs from client-go where client-go loses events:
//
//   - The spam filter's token buckets are per source, object, type and
//     reason by default (SpamKeyByReason), so one noisy reason cannot starve
//     another and a new reason always gets a full bucket. A
//     CorrelatorOptions.SpamKeyFunc still overrides the key.
//   - Occurrences the spam filter holds back are not lost: their count is
//     carried by the next write of the event, as in client-go, and when no
//     further occurrence comes a deferred write flushes it once the bucket
//     has refilled; Shutdown flushes what is still pending. The stored count
//     therefore ends up equal to the number of emissions.
//   - Aggregation counts the distinct messages seen within a true rolling
//     window (MaxIntervalInSeconds) instead of resetting only after that
//     long an idle period, and when it must forget a message it forgets the
//     oldest, so it is deterministic.
//   - 429, 5xx and transport errors are retried with exponential backoff and
//     jitter, honouring Retry-After, for a bounded number of attempts
//     (RetryPolicy); client-go drops 429 and 5xx after one attempt.
//   - Every event or occurrence given up on is counted in a Prometheus
//     metric by cause and logged (rate-limited), where client-go drops
//     silently.
//   - Aggregated events get the same name validation as other events, and
//     events emitted in the same clock tick about objects of the same name
//     get distinct names instead of colliding.
//   - WithResume rebuilds the deduplication state from the sink at start, so
//     that a restarted component keeps counting on its existing events.
//
// Emitting never blocks and never starts a goroutine: an event is handed to
// a bounded queue per sink or watcher (WithQueueSize) and dropped, counted
// and logged when that queue is full. Each StartRecordingToSink has one
// worker goroutine that correlates and writes that sink's events in order,
// so a slow or failing sink delays only its own events and memory stays
// bounded. All timing (timestamps, windows, token buckets, retry backoff,
// deferred flushes, the shutdown deadline) comes from one injected clock
// (WithClock), so tests can drive it with a fake clock.
//
// Shutdown stops accepting events, writes what is queued and pending once
// each within WithShutdownTimeout, and ends every goroutine the broadcaster
// started.
package record
