// Package lineage keeps who owns what among the objects events are
// about, for as long as their events are kept: the ownership lineage that
// lets eventsd answer "everything that happened to my Deployment",
// including ReplicaSets and Pods that were deleted long ago.
//
// A Graph holds, per object uid, its kind, apiVersion, namespace, name,
// owners, a Pod's node, when it was first and last seen and whether it was
// deleted. It learns from two sources:
//   - the metadata of the objects themselves (metadata-only list and
//     watch of a source cluster, as kube-controller-manager's garbage
//     collector reads them), through Observe, MarkDeleted and Replace;
//   - the events eventsd stores (ObserveEvent): the node a Pod ran on
//     from the kubelet's source host and the scheduler's Scheduled event,
//     and the children controllers announce in their own events (a
//     ReplicaSet's "Created pod: NAME", a Deployment's "Scaled up replica
//     set NAME"), which keep a family whole when the objects were created
//     and deleted while nothing was watching them.
//
// A Follower is the first source: it lists and watches a source
// cluster's Pods, their controllers and Nodes metadata-only (client-go
// Reflectors over the metadata client, feeding the Graph and keeping no
// copy), follows any other kind once an event names it (NoteKind), and
// tells the Graph why ownership is not learned while the source refuses
// a list.
//
// Family resolves a family.* field selector into a storage.ObjectSet: the
// named object and everything it owns, transitively, at any time. The set
// is live: objects learned after it was made are in it, so a watch sees a
// new Pod's events once its ownership is known.
//
// The graph is held in memory and written through to a storage
// RecordStore, once a second and at Close, so that it survives restarts;
// Collect drops what no kept event needs any more.
package lineage
