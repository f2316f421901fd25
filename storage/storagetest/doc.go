// Package storagetest is the conformance suite for storage.Interface
// backends. A backend's tests call Run with a Harness that opens the
// backend; every backend must pass every case, so the API server can rely on
// the semantics documented in package storage whichever backend it runs on.
package storagetest
