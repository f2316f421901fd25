package interop_test

import (
	"bytes"
	"testing"
	"time"

	evstorage "github.com/kubevents/kubevents/storage"
)

// TestInteropJSON: a cluster with --storage-media-type=application/json
// stores plain JSON; etcdstore reads what kube-apiserver's store wrote
// with its JSON codec (Get and List), and that store reads etcdstore's
// protobuf values.
func TestInteropJSON(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaJSON, nil)

	j := e.apiCreate(api, coreEvent("default", "json", "pod-1"), 3600)
	if v := e.raw(etcdKey("default", "json")).Kvs[0].Value; !bytes.HasPrefix(v, []byte(`{"kind":"Event","apiVersion":"v1"`)) {
		t.Fatalf("apiserver JSON store wrote %q", v[:min(40, len(v))])
	}
	got, err := e.es.Get(e.ctx, "default", "json")
	if err != nil {
		t.Fatal(err)
	}
	sameEvent(t, "etcdstore Get of a JSON value", j, got)

	pb := must(t)(e.es.Create(e.ctx, coreEvent("default", "proto", "pod-2"), evstorage.WriteOptions{TTL: time.Hour}))
	res, err := e.es.List(e.ctx, evstorage.ListOptions{Selector: evstorage.Selector{Namespace: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 2 {
		t.Fatalf("etcdstore listed %d events, want the JSON one and the protobuf one", len(res.Items))
	}
	sameEvent(t, "listed JSON value", j, res.Items[0])
	sameEvent(t, "listed protobuf value", pb, res.Items[1])

	fromStore, err := e.apiGet(api, "default", "proto")
	if err != nil {
		t.Fatal(err)
	}
	sameEvent(t, "apiserver JSON store's Get of etcdstore's protobuf value", pb, fromStore)
}
