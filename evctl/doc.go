// Package evctl is the events CLI for the questions kubectl can't answer:
// everything that happened to an object, including where it is the related
// object, in time order (timeline); events filtered by action, reporting
// controller and instance, and age (get); a live, sorted stream that
// survives reconnects and server restarts without duplicates or gaps
// (watch); and series shown as ranges with their state.
//
// It works against any Kubernetes API server. It uses eventsd's extensions
// (the involves.*, action and reportingInstance field selectors) when the
// server accepts them, detected by trying; otherwise it asks for what the
// server supports and does the rest on the client.
package evctl
