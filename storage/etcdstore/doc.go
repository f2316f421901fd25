// Package etcdstore is a storage.Interface backend on etcd, in
// kube-apiserver's layout, so that eventsd replicas and a kube-apiserver can
// share an events etcd:
//
//   - Key: <prefix>/events/<namespace>/<name>, prefix /registry by default;
//     both API groups are stored as core/v1 Events.
//   - Value: application/vnd.kubernetes.protobuf, the bytes "k8s\x00" and a
//     runtime.Unknown envelope {apiVersion v1, kind Event, raw = the Event's
//     protobuf}, written with apimachinery's protobuf serializer. Protobuf
//     and JSON values are read; a value encrypted at rest ("k8s:enc:...")
//     is an *EncryptedError naming the key and the provider, counted
//     (UndecodableValues) and logged, and lists and watches skip it.
//   - resourceVersion is the etcd revision: mod_revision for objects, the
//     header revision for lists.
//   - Writes are kube-apiserver's transactions through
//     go.etcd.io/etcd/client/v3/kubernetes: create If(ModRevision=0)
//     Then(Put); update and delete If(ModRevision=rev) Then(Put|Delete)
//     Else(Get), retried on a concurrent change unless a revision
//     precondition forbids it.
//   - TTL: kube-apiserver's lease manager. A lease granted for TTL + reuse
//     window (min(5% of the TTL, LeaseReuseDuration)) serves the writes of
//     that window, up to LeaseMaxObjects; every create and update attaches
//     the current lease, so every write restarts the TTL. etcd deletes the
//     keys when the lease expires, and watchers get DELETED with the last
//     state.
//   - Compaction: every CompactionInterval, coordinated with other writers
//     (other eventsd replicas, kube-apiservers) through compact_rev_key, to
//     the revision seen one interval earlier, or less far while a history
//     hold (HoldHistory) asks for older changes, up to MaxHistoryHold.
//   - Export: cursors (CursorStore), history holds and leader elections
//     (Lead) are keys under <prefix>/kubevents.io/, outside the events.
//   - Records (RecordStore) are <prefix>/kubevents.io/records/<space>/<key>,
//     saved in transactions of at most 128 writes, read in pages at one
//     revision (records.go).
//
// Watches: the store keeps one etcd watch on the prefix (WithRev(rev+1),
// WithPrevKV, WithPrefix, WithProgressNotify) and fans its changes out to
// its watchers through a ring of recent changes, decoded once; a watcher
// behind the ring reads etcd with a watch of its own until it is back
// within it. A watch from a revision checks it against etcd first, so it
// gets ErrCompacted once etcd has compacted past it, whoever compacted,
// even while the ring still holds the changes. The same watch feeds a
// keys-only index of index.All(): an index.Memory built from a list of
// the prefix when the store opens (and again when the watch breaks), or,
// with Options.IndexDir, a storage/diskindex kept on local disk across
// restarts, resumed from its revision or reconciled with etcd (keys and
// mod revisions compared, only new or changed keys fetched): a list whose selector the planner serves by lookups waits
// for the index to reach etcd's current revision (asking etcd for
// progress notifications meanwhile, since writes outside the prefix move
// that revision too), fetches only the
// candidate keys at the list's revision and filters them, O(matches);
// other lists read the namespace's range and filter, O(events in the
// namespace).
package etcdstore
