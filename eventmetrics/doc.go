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
// (--event-metrics-config): which labels to keep (the regarding object's
// name too, when asked), which namespaces and
// reasons keep their own values (others become OtherValue), and at most
// MaxLabelSets label sets; occurrences of a label set past the maximum
// are counted in the overflow series (every label OverflowValue), so sums
// stay exact, and the refusals are counted.
package eventmetrics
