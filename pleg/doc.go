// Package pleg is a Pod Lifecycle Event Generator over a CRI runtime, as
// the kubelet's: a generic PLEG that relists the runtime and diffs what it
// sees, and an evented PLEG (KEP-3386) that follows the runtime's
// GetContainerEvents stream and keeps relisting, less often, because every
// runtime can lose events or replay stale ones.
//
// It fixes what sent upstream's evented PLEG back to alpha: one time base
// (the runtime's nanoseconds), far-future stamps clamped; a pod status
// cache where newer wins and deletions are timestamped, so a late event
// cannot resurrect a pod; a freshness watermark advanced only by evidence
// (a complete relist, or a live stream); no transient CREATED snapshot
// handed to waiters; nil statuses tolerated; reconnection with backoff
// instead of a permanent fallback after five failures; a slow consumer
// never blocks the runtime stream; and missed events (transitions a relist
// finds that no event reported) are counted.
package pleg
