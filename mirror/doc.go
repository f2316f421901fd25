// Package mirror follows a Kubernetes cluster's Events through its
// kube-apiserver and keeps them in eventsd's store: a source that writes
// into storage, as package export is a consumer that reads from it.
//
// The mirror lists the source's core/v1 Events of every namespace (a
// WatchList stream, sendInitialEvents, where the source serves one;
// paginated lists otherwise), then watches them from the list's
// resourceVersion with bookmarks. Each change is applied to the store as
// eventsd's own write, with eventsd's own revision, so every reader of
// the store (both API groups, watches, retention, export) sees mirrored
// events as any other. An event the source deletes (its TTL) stays until
// eventsd's own retention expires it, unless deletions are propagated.
//
// Nothing is lost or applied twice. The source resourceVersion of each
// change is kept on the stored event (the annotation
// SourceResourceVersionAnnotation), so a change applied again (after a
// restart, or a relist) is recognised and skipped: it makes no revision
// and no watch event. The cursor, the source resourceVersion up to which
// every change is applied, is saved in the store (storage.CursorStore)
// after the changes it covers, so a restart, even after kill -9, resumes
// the watch where it stopped and re-applies at most what came after the
// last save. When the source has compacted past the cursor (410 Gone),
// the mirror lists again and reconciles; what the source deleted
// meanwhile and had not been mirrored cannot come back, and the time
// window in which that can have happened (time away beyond the source's
// event TTL) is counted and logged as a gap.
//
// Before it writes, the mirror checks what it writes into and what it
// reads: CheckStore refuses a store holding events it did not write (no
// cursor: events written through eventsd's API; or another source's
// cursor) unless Options.AllowExistingEvents, and Options.CheckSource,
// asked before the first read, can refuse a source (eventsd refuses
// itself): Run then returns an error wrapping ErrRefused.
//
// Changes are applied by several workers, each key always by the same
// one (in the source's order); the cursor advances only past changes
// every worker has applied.
package mirror
