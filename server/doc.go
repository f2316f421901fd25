// Package server is eventsd's HTTP API: the Kubernetes REST API for core/v1
// and events.k8s.io/v1 Events over one storage.Interface, with the
// discovery, OpenAPI, Table and watch behaviour kubectl and client-go rely
// on, plus health, metrics and bearer-token authentication.
//
// Requests are decoded and validated in the handler goroutine; only the
// final write goes through the store, so concurrent requests do their CPU
// work in parallel and share the store's group commits.
package server
