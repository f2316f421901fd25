package storage

import "strings"

// A store may hold the events of several clusters (a fleet: eventsd
// mirroring many sources). Each cluster's events are kept under their own
// *storage namespaces*, so that a cluster's events are one key range of
// either backend, and revisions stay one store-wide sequence:
//
//   - the root cluster (named ""): the events written to eventsd itself, or
//     mirrored from its only source, keep their namespace as it is, so
//     stores written before fleets existed need no migration;
//   - cluster C: namespace ns is stored as ClusterMark + C + ClusterMark +
//     ns ("~east~shop").
//
// A namespace written through the API is a DNS-1123 subdomain, which
// cannot hold ClusterMark, so no write of one cluster can land among
// another's keys; readers that take a namespace from a request must refuse
// one holding it (ValidRequestNamespace). Everything above the store sees
// real namespaces: a cluster's view of the store (package clusterview)
// composes them on the way in and splits them on the way out.

// ClusterMark starts and ends the cluster part of a storage namespace. It
// sorts after every byte of a DNS-1123 name, so the root cluster's keys
// come first and the named clusters' after them, each cluster's in one
// range.
const ClusterMark = '~'

// ClusterNamespace returns the storage namespace of namespace ns of
// cluster c ("" the root cluster).
func ClusterNamespace(c, ns string) string {
	if c == "" {
		return ns
	}
	return string(ClusterMark) + c + string(ClusterMark) + ns
}

// clusterPrefix is the prefix of cluster c's storage namespaces (c not
// empty).
func clusterPrefix(c string) string {
	return string(ClusterMark) + c + string(ClusterMark)
}

// SplitClusterNamespace returns the cluster and the namespace of storage
// namespace sns: ("", sns) for the root cluster's.
func SplitClusterNamespace(sns string) (cluster, ns string) {
	if len(sns) == 0 || sns[0] != ClusterMark {
		return "", sns
	}
	c, ns, ok := strings.Cut(sns[1:], string(ClusterMark))
	if !ok {
		return "", sns
	}
	return c, ns
}

// ValidRequestNamespace reports whether a namespace taken from a request
// (a path or a field selector) can be a namespace of some cluster: not
// one holding ClusterMark, which would name another cluster's storage.
func ValidRequestNamespace(ns string) bool {
	return !strings.ContainsRune(ns, ClusterMark)
}

// Clusters selects the clusters whose events a Selector may return. The
// zero value selects every cluster's: what a store's own maintenance
// (retention, export, counts) reads. A server serving one cluster selects
// it with OneCluster, and a fleet-wide view with NamedClusters.
type Clusters struct {
	kind clusterScope
	name string
}

type clusterScope uint8

const (
	anyCluster clusterScope = iota
	oneCluster
	namedClusters
)

// AnyCluster selects every cluster's events, the root cluster's included
// (the zero Clusters).
func AnyCluster() Clusters { return Clusters{} }

// OneCluster selects cluster c's events ("" the root cluster's).
func OneCluster(c string) Clusters { return Clusters{kind: oneCluster, name: c} }

// NamedClusters selects the events of every named cluster, not the root
// cluster's.
func NamedClusters() Clusters { return Clusters{kind: namedClusters} }

// One returns the cluster c selects when it selects one.
func (c Clusters) One() (string, bool) { return c.name, c.kind == oneCluster }

// IsAny reports whether c selects every cluster.
func (c Clusters) IsAny() bool { return c.kind == anyCluster }

// String names the selection, for messages and cache keys.
func (c Clusters) String() string {
	switch c.kind {
	case oneCluster:
		if c.name == "" {
			return "cluster (root)"
		}
		return "cluster " + c.name
	case namedClusters:
		return "every named cluster"
	}
	return "every cluster"
}

// Contains reports whether storage namespace sns is of a selected cluster.
func (c Clusters) Contains(sns string) bool {
	switch c.kind {
	case oneCluster:
		if c.name == "" {
			return len(sns) == 0 || sns[0] != ClusterMark
		}
		return strings.HasPrefix(sns, clusterPrefix(c.name))
	case namedClusters:
		return len(sns) > 0 && sns[0] == ClusterMark
	}
	return true
}

// KeyRange returns the range [from, to) of "<storage namespace>/<name>"
// keys that hold the selected clusters' events; an empty to means no upper
// bound. Backends bound the scans of lists without a namespace with it, so
// that one cluster's list reads only its keys.
func (c Clusters) KeyRange() (from, to string) {
	switch c.kind {
	case oneCluster:
		if c.name == "" {
			return "", string(ClusterMark)
		}
		p := clusterPrefix(c.name)
		return p, p[:len(p)-1] + string(ClusterMark+1)
	case namedClusters:
		return string(ClusterMark), string(ClusterMark + 1)
	}
	return "", ""
}
