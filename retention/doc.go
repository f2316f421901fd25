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
package retention
