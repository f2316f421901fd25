// Package pebblestore is the embedded, durable storage.Interface backend,
// built on cockroachdb/pebble.
//
// Layout (all keys in one keyspace, distinguished by their first byte):
//
//	o <ns>/<name>                       → rev, expiry, Event protobuf
//	l <rev>                             → change log: type, object, previous object
//	x <expiry> <ns>/<name>              → rev; the TTL queue
//	i <index> <escaped value> <ns>/<name> → secondary index entry
//	m <name>                            → metadata (revision, count, oldest log rev)
//	c <name>                            → an export cursor's revision (cursor.go)
//	r <space> 0x00 <key>                → a record of RecordStore (records.go)
//
// Writes go through one committer goroutine that gathers concurrent requests
// into a group, checks their preconditions, assigns revisions and commits the
// group as one synced pebble batch (group commit). Readers use a pebble
// snapshot taken after each commit, so they only ever see durable state, and
// watchers are fed from an in-memory ring of recent changes, falling back to
// the on-disk change log when they lag behind it.
package pebblestore
