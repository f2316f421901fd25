// Package interop holds the tests that check etcdstore against the storage
// layer kube-apiserver itself runs, k8s.io/apiserver's etcd3 store, on one
// shared etcd: events either side writes (core/v1, events.k8s.io/v1
// converted to core/v1, protobuf or JSON values, encrypted values) are read
// by the other, byte for byte in kube-apiserver's layout, with the same
// leases and resourceVersions.
//
// The tests live in a package of their own so that k8s.io/apiserver, a
// large dependency with global state (feature gates, metrics registries),
// is linked into these tests only and never into eventsd or etcdstore.
package interop
