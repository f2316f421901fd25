// Package events records Kubernetes events.k8s.io/v1 Events as client-go's
// tools/events does, with the event-series semantics of the events
// redesign, and without its losses: switching is an import change
// (NewBroadcaster, StartRecordingToSinkWithContext, NewRecorder, Shutdown
// and client-go's interfaces), and client-go's EventSinkImpl is accepted as
// the sink.
//
// The first occurrence of an event is created; the second starts a series
// (count 2); later occurrences only count in memory. An ongoing series'
// count is written as the series ages (at LiveSeriesFirstWrite, 10 s, then
// whenever its age has doubled since the last write, when it changed; see
// WithLiveSeriesCounts), every HeartbeatInterval (30 min), and a final
// time once the series has been idle for FinishAfter (6 min), timed per
// series. A singleton is forgotten FinishAfter after its occurrence.
//
// Differences from client-go, each deliberate:
//   - the isomorphism key ignores the regarding and related objects'
//     resourceVersion, so events about a changing object still form a
//     series;
//   - one worker writes, in order; a key's writes never overlap (no PATCH
//     before its POST) and there is no goroutine per event;
//   - 429, 5xx and transport errors are retried with exponential backoff,
//     jitter and the server's Retry-After, a bounded number of times;
//   - a series' stored count lags the truth by at most about half its age
//     (client-go's stays at 2 for up to 30 minutes);
//   - Shutdown writes every series' current count within a bounded time;
//   - on start, a recorder lists the events it wrote before (its reporting
//     controller and instance) and resumes their series;
//   - a series carries its state in the annotation SeriesStateAnnotation
//     ("ongoing", "finished", or "unknown" after Shutdown);
//   - a note over 1024 bytes is truncated with a visible marker and the
//     reporting instance is kept within 128 characters, instead of the
//     server refusing the event;
//   - every event or occurrence given up on is counted in a metric and
//     logged (rate-limited), and never written afterwards: emitted =
//     stored + dropped (a copy a slow StartEventWatcher handler misses is
//     counted too, though the sink still gets the event).
package events
