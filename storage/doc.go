// Package storage defines the seam between the events API server and the
// stores that hold Events: a small interface whose revision, TTL, history
// and pagination semantics are stated on it, so that an embedded store and
// an etcd store behave alike to clients. Package storagetest holds the
// conformance suite every backend must pass.
//
// Revisions: every successful write (create, update, delete, expiry) gets the
// next revision of one store-wide, strictly increasing counter, starting at
// 1. An object's revision is the revision of its last write; it is exposed to
// clients as metadata.resourceVersion. A list is served at one revision, the
// store's revision when the list started.
//
// Durability: a write method returns only once the write is durable, and a
// write is visible to readers and watchers only once it is durable, so
// nothing a client saw can be lost in a crash and revisions are never reused.
//
// History: the store keeps the events of recent revisions for watches and
// paginated lists to resume from. How much it keeps is the backend's
// configuration; asking for a revision older than that gives ErrCompacted,
// which the API reports as 410 Gone (Expired).
//
// TTL: every write carries a TTL. The object is deleted, and watchers get a
// DELETED event, once the TTL has passed since its last write. Backends
// on etcd count the TTL on etcd's wall clock (leases), not on an injected
// clock, and may keep an object up to 5% of its TTL longer (lease reuse,
// as kube-apiserver does).
package storage
