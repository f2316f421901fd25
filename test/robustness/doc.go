// Package robustness checks whole histories that eventsd produces under
// random concurrent traffic and injected faults, as etcd's
// tests/robustness checks etcd's: a traffic generator (traffic.go) drives
// concurrent client-go clients through eventsd's HTTP API and records
// every operation with its call and return times and its result, and
// every watch with each event it delivered; checkers then judge the
// whole record:
//
//   - Linearizability (linearizability.go): a porcupine model of the
//     event store, one partition per key (its state and revision) plus
//     one for the store-wide revision order that lists, gets and writes
//     must agree on.
//   - The change log (changelog.go): every change, at its revision, from
//     acknowledged writes and from the watches that saw it; two
//     different changes at one revision are a violation. Lists are
//     checked against the state it gives at their revision.
//   - Watches (watch.go): each watch, from the revision it started at,
//     delivers exactly the changes its selector matches, in revision
//     order, once each; bookmarks are never ahead of what was
//     delivered; a watch-list's initial events are the state at its
//     initial-events-end bookmark; 410 Gone only for revisions older
//     than the store keeps.
//   - Export (export.go): what an export sink was sent, against the
//     change log: every change delivered at least once, in revision
//     order per key but for exact redeliveries, each record the change
//     at its revision, idempotency keys stable across restarts.
//
// The scenarios (robustness_test.go) run this against real eventsd
// processes over pebble and over real etcd clusters, with kills, pauses,
// a full disk, a cut network, TTL clock jumps, and an export sink whose
// receiver fails while eventsd is killed.
package robustness
