// Package facet summarizes events: how many occurrences (series and
// counts summed, not events) they report by reason, type, kind,
// namespace and reporting controller, and over time buckets of their last
// observation. eventsd's facets resource (events.kubevents.io/v1 facets)
// answers with a Counter's Result, counted over a list's pages; the
// memory a Counter holds is bounded whatever it counts (MaxValues per
// field, MaxBuckets time buckets).
package facet
