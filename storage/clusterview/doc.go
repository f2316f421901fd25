// Package clusterview serves one cluster of a fleet, or every named
// cluster at once, from a store that holds many (see storage.ClusterNamespace:
// cluster C's namespace ns is stored as "~C~ns").
//
// A View is a storage.Interface whose namespaces are the cluster's own:
// it composes them into storage namespaces on the way in (namespaces,
// metadata.namespace field selectors) and splits them on the way out
// (every event returned or watched is a copy carrying its real namespace),
// and it restricts every list and watch to its clusters' key range
// (storage.Selector.Clusters). Everything built on a storage.Interface (the
// server's handlers, folding, the mirror, the lineage) then serves one
// cluster unchanged. Its records, cursors and elections are the cluster's
// own too (names prefixed with the cluster's), so each cluster's mirror
// and lineage keep their state apart.
//
// A fleet View (Fleet) reads every named cluster's events: each event it
// returns carries its cluster in the annotation ClusterAnnotation, and a
// namespace selects that namespace in every cluster, and a Selector whose
// Clusters names one cluster (storage.OneCluster) selects that cluster's
// events only. It cannot write.
package clusterview
