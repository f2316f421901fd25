// Package eventmetrics counts event occurrences as Prometheus metrics
// (issue 33): eventsd_event_occurrences_total, labelled by namespace,
// type, reason, kind (of the regarding object) and reporting controller,
// grows by every occurrence an event write adds (a create of count N adds
// N, a count or series increase adds the increase), whoever wrote it.
//
// It is fed by the store (storage.WriteObserver, Counter.Observe), the one
// place every writer reaches, with the state each write replaced, so no
// writer is missed and nothing is read again. Each process counts the
// writes it made, from zero when it starts (a counter reset to
// Prometheus); replicas sharing an etcd each count their own writes, and
// their sum is the cluster's. Deletions and expiries change nothing.
//
// Cardinality is bounded by the EventMetricsConfiguration file
// (--event-metrics-config): which labels to keep, which events keep the
// regarding object's name (by default Warning events and the shipped
// alerts' reasons, DefaultNameFor, so that alerts name the object),
// which namespaces and reasons keep their own values (others become
// OtherValue), and at most MaxLabelSets label sets, MaxNamedLabelSets of
// them with a name; an object's occurrences past the named maximum are
// counted without the name, and those of a label set past the maximum
// in the overflow series (every label OverflowValue), so sums stay
// exact, and the refusals are counted. A label set that has not grown
// for the idle expiry (an hour by default, on an injected clock) is
// deleted, so the places of objects gone free up; if it grows again it
// starts from zero, a counter reset to Prometheus.
//
// LiveSeries, fed by the same observer, is the gauge
// eventsd_event_series_live{reason,kind}: the events whose series is not
// yet finished, that is last observed less than SeriesFinishWindow (the
// 6 minutes after which client-go's events recorder finishes a series)
// ago, kept from the writes with their deadlines and dropped when
// finished, without reading the store.
package eventmetrics
