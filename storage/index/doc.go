// Package index holds what every storage backend needs to know about the
// secondary indexes of Events, once: which fields are indexed (under the
// stable one-byte IDs pebblestore writes in its on-disk keys), which
// values an event contributes to each index, and how a storage.Selector
// becomes index lookups (Set.Plan). A backend reads the lookups' keys,
// fetches those objects and filters them with Selector.Matches: the plan
// only narrows the candidates, it never decides a match.
//
// Memory is a keys-only, in-memory secondary index for backends that
// cannot index in their store (etcd): one writer (the watch feed) puts and
// deletes events, many readers look up the keys of a plan in key order,
// with pagination. It keeps keys and interned values, never objects.
package index
