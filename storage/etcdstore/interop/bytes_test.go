package interop_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	evstorage "github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protoMagic starts application/vnd.kubernetes.protobuf values.
var protoMagic = []byte("k8s\x00")

// envelope checks value is kube-apiserver's protobuf envelope of a v1
// Event and returns it.
func envelope(t *testing.T, who string, value []byte) runtime.Unknown {
	t.Helper()
	if !bytes.HasPrefix(value, protoMagic) {
		t.Fatalf("%s: value starts with %q, want k8s\\x00", who, value[:min(8, len(value))])
	}
	var u runtime.Unknown
	if err := u.Unmarshal(value[len(protoMagic):]); err != nil {
		t.Fatalf("%s: envelope: %v", who, err)
	}
	if u.APIVersion != "v1" || u.Kind != "Event" || u.ContentEncoding != "" || u.ContentType != "" {
		t.Fatalf("%s: envelope {apiVersion %q, kind %q, contentEncoding %q, contentType %q}, want v1 Event and empty encodings",
			who, u.APIVersion, u.Kind, u.ContentEncoding, u.ContentType)
	}
	return u
}

// TestInteropStoredBytes compares what the two sides put in etcd for the
// same Event: the same key, byte-identical values (the "k8s\x00" envelope
// naming v1 Event around the same protobuf), and leases granted for the
// same TTL, TTL + min(5% of the TTL, 60 s) as k8s.io/apiserver's
// lease_manager.go computes it, attached on create and on update.
func TestInteropStoredBytes(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaProtobuf, nil)
	key := etcdKey("default", "same")

	ev := coreEvent("default", "same", "pod-1")
	e.apiCreate(api, ev, 3600)
	byAPI := e.raw(key).Kvs[0]
	apiTTL := e.grantedTTL(key)
	uAPI := envelope(t, "apiserver", byAPI.Value)
	if _, err := e.cli.Delete(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	created := must(t)(e.es.Create(e.ctx, ev, evstorage.WriteOptions{TTL: time.Hour}))
	byStore := e.raw(key).Kvs[0]
	uStore := envelope(t, "etcdstore", byStore.Value)
	if !bytes.Equal(byAPI.Value, byStore.Value) {
		var a, b corev1.Event
		_ = a.Unmarshal(uAPI.Raw)
		_ = b.Unmarshal(uStore.Raw)
		t.Fatalf("values differ:\napiserver %q\netcdstore %q\ndecoded apiserver %+v\ndecoded etcdstore %+v", byAPI.Value, byStore.Value, a, b)
	}
	if created.ResourceVersion != strconv.FormatInt(byStore.ModRevision, 10) {
		t.Fatalf("etcdstore resourceVersion %s, mod_revision %d", created.ResourceVersion, byStore.ModRevision)
	}
	if storeTTL := e.grantedTTL(key); storeTTL != apiTTL || apiTTL != 3660 {
		t.Fatalf("1h TTL: apiserver granted %ds, etcdstore %ds, want 3660 both", apiTTL, storeTTL)
	}

	// Leases for other TTLs: each differs from the last one's, so both
	// sides grant a new lease every time.
	for _, ttl := range []int64{2, 100, 1200, 7200} {
		name := strconv.FormatInt(ttl, 10)
		e.apiCreate(api, coreEvent("default", "api-"+name, "pod-1"), uint64(ttl))
		must(t)(e.es.Create(e.ctx, coreEvent("default", "es-"+name, "pod-1"), evstorage.WriteOptions{TTL: time.Duration(ttl) * time.Second}))
		want := ttl + min(int64(0.05*float64(ttl)), 60)
		a, s := e.grantedTTL(etcdKey("default", "api-"+name)), e.grantedTTL(etcdKey("default", "es-"+name))
		if a != want || s != want {
			t.Fatalf("TTL %ds: apiserver granted %ds, etcdstore %ds, want %d", ttl, a, s, want)
		}
	}

	// Updates attach the lease of the TTL they carry.
	e.apiUpdate(api, "default", "api-1200", 100, func(ev *corev1.Event) { ev.Count = 2 })
	upd := coreEvent("default", "es-1200", "pod-1")
	upd.Count = 2
	must(t)(e.es.Update(e.ctx, upd, evstorage.WriteOptions{TTL: 100 * time.Second}))
	a, s := e.grantedTTL(etcdKey("default", "api-1200")), e.grantedTTL(etcdKey("default", "es-1200"))
	if a != 105 || s != 105 {
		t.Fatalf("update with a TTL of 100s: apiserver attached a lease of %ds, etcdstore %ds, want 105", a, s)
	}
}

// TestInteropSelfLink: kube-apiserver's storage drops metadata.selfLink
// (APIObjectVersioner.PrepareObjectForStorage) on create and update, so a
// client that sends one gets an object without it and the stored bytes
// hold none; etcdstore must store and return the same.
func TestInteropSelfLink(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaProtobuf, nil)
	key := etcdKey("default", "linked")
	ev := coreEvent("default", "linked", "pod-1")
	ev.SelfLink = "/api/v1/namespaces/default/events/linked"

	byAPI := e.apiCreate(api, ev, 3600)
	apiValue := e.raw(key).Kvs[0].Value
	if _, err := e.cli.Delete(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	created := must(t)(e.es.Create(e.ctx, ev, evstorage.WriteOptions{TTL: time.Hour}))
	if v := e.raw(key).Kvs[0].Value; !bytes.Equal(v, apiValue) {
		t.Fatalf("create: etcdstore stored %q, kube-apiserver %q", v, apiValue)
	}
	if byAPI.SelfLink != "" || created.SelfLink != "" {
		t.Fatalf("create returned selfLink %q (apiserver) and %q (etcdstore), want none", byAPI.SelfLink, created.SelfLink)
	}

	upd := ev.DeepCopy()
	upd.Count = 2
	updated := must(t)(e.es.Update(e.ctx, upd, evstorage.WriteOptions{TTL: time.Hour}))
	storeValue := e.raw(key).Kvs[0].Value
	byAPI = e.apiUpdate(api, "default", "linked", 3600, func(cur *corev1.Event) {
		cur.Count = 2
		cur.SelfLink = ev.SelfLink
	})
	if v := e.raw(key).Kvs[0].Value; !bytes.Equal(v, storeValue) {
		t.Fatalf("update: etcdstore stored %q, kube-apiserver %q", storeValue, v)
	}
	if byAPI.SelfLink != "" || updated.SelfLink != "" {
		t.Fatalf("update returned selfLink %q (apiserver) and %q (etcdstore), want none", byAPI.SelfLink, updated.SelfLink)
	}
}
