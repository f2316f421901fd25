// Package retention chooses how long each event is kept: eventsd's
// --retention-config file holds ordered rules matching an event's
// namespace, type, reason and reporting controller (or core/v1 source
// component), each with a TTL; the first rule that matches an event gives
// the TTL of its write, and an event no rule matches keeps the default
// (--event-ttl). As with --event-ttl, the TTL is taken at every write, so
// every create, update and patch restarts it.
//
// The file is a versioned, Kubernetes-style YAML or JSON document:
//
//	apiVersion: eventsd.kubevents.io/v1alpha1
//	kind: RetentionConfiguration
//	rules:
//	- name: warnings        # optional; names the rule in metrics
//	  types: [Warning]
//	  ttl: 168h             # Warning events kept 7 days
//	- namespaces: [prod]
//	  ttl: 24h
//
// An empty or missing list matches any value; a rule matches an event when
// every list it has contains the event's value.
//
// An eventsd serving a fleet (--sources-config) keeps each cluster's
// events apart, and a rule's clusters list names the clusters whose
// events it matches ("" naming the root cluster: the events written to
// eventsd itself, or mirrored from its only source); its other lists
// match the events' namespaces as their cluster has them:
//
//	rules:
//	- clusters: [prod-east, prod-west]
//	  types: [Warning]
//	  ttl: 720h             # production warnings kept 30 days
//	- clusters: [""]        # the root cluster's own events
//	  ttl: 24h
//
// Whoever writes an event knows its cluster and asks Policy.ClusterTTL
// (the server: the cluster of the request's path; a mirror: its
// source's); Policy.TTL is the root cluster's; Policy.StoredTTL reads the
// cluster from a stored event's storage namespace.
package retention
