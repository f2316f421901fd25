// Package evctl is the events CLI for the questions kubectl can't answer:
// everything that happened to an object and to everything it owns,
// deleted objects included, as a tree of objects with their events in
// time order (timeline, from eventsd's ownership lineage; the object
// alone, including where it is the related object, elsewhere); events
// filtered by action, reporting controller and instance, and age (get); a
// live, sorted stream that survives reconnects and server restarts
// without duplicates or gaps (watch); and series shown as ranges with
// their state.
//
// It works against any Kubernetes API server. It uses eventsd's
// extensions (the family.*, involves.*, action and reportingInstance
// field selectors, and the lineages resource) when the server accepts
// them, detected by trying; otherwise it asks for what the server
// supports and does the rest on the client.
package evctl
