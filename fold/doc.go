// Package fold decides server-side folding: a create whose event is
// isomorphic to a stored event last observed within a window is folded
// into that event (its count and last observed time advanced, its note
// replaced by the latest) instead of being stored as a new object.
//
// Folding is configured by eventsd's --fold-config file, ordered rules in
// the style of the retention rules: each matches events by namespace,
// type, reason and reporting controller and gives the window within which
// a repeat is folded:
//
//	apiVersion: eventsd.kubevents.io/v1alpha1
//	kind: FoldConfiguration
//	rules:
//	- name: kubelet-backoff   # optional; names the rule in metrics
//	  reasons: [BackOff, FailedSync]
//	  window: 10m
//	- types: [Warning]
//	  window: 30m
//
// Isomorphism is the recorders': for events.k8s.io/v1 creates, the
// regarding and related objects (without their resourceVersion), action,
// reason, reporting controller and instance, and type (client-go's
// tools/events key); for core/v1 creates, client-go's aggregation key
// (source, involved object, type, reason, reporting controller and
// instance) with the involved object's fieldPath, which client-go's
// deduplication key has: two containers' events are two series.
//
// The package decides; the server's create handler looks the candidates
// up (an indexed list) and writes the fold with a revision precondition.
package fold
