// Package index holds what every storage backend needs to know about the
// secondary indexes of Events, once: which fields are indexed (under the
// stable one-byte IDs pebblestore writes in its on-disk keys), which
// values an event contributes to each index, and how a storage.Selector
// becomes index lookups (Set.Plan). A backend reads the lookups' keys,
// fetches those objects and filters them with Selector.Matches: the plan
// only narrows the candidates, it never decides a match.
//
// A selector's time range (Since/Until) is served by the LastObserved
// index, whose values are minute buckets of the last-observed time
// (Bucket) in fixed-width, time-ordered form: a plan's Range is one
// contiguous range of entries for a backend that reads entries in byte
// order (pebblestore), or a lookup per bucket present (RangeLookups) for
// one that keeps a list per value (Memory, the etcd backend's diskindex).
//
// Memory is a keys-only, in-memory secondary index for backends that
// cannot index in their store (etcd): one writer (the watch feed) puts and
// deletes events, many readers look up the keys of a plan in key order,
// with pagination. It keeps keys and interned values, never objects.
//
// A backend over etcd uses it so: build a Memory of All() from a list of
// the events prefix at revision R (Put each event with R), and feed it
// from one watch of the prefix from R+1, with progress notifications: Put
// for a PUT, Delete(namespace, name) for a DELETE, SetRevision for a
// progress notification, and Forget with the revision etcd is compacted
// to. A list plans with Memory.Set().Plan. A plan with Name set is a get
// of that key; one without lookups is a range read of etcd, as without an
// index. Otherwise, for a first page, the backend calls Wait for etcd's
// current revision, takes Keys(plan, 0, "", limit) and serves the list at
// the revision Keys returned: it gets those keys from etcd at that
// revision (one transaction of gets) and keeps the objects
// Selector.Matches accepts, asking for more keys after the last while the
// page is short. A later page passes the list's revision as Keys' at, so
// that keys deleted or changed since are still among the candidates. If
// the watch is compacted away, the backend builds a new Memory and swaps
// it in.
package index
