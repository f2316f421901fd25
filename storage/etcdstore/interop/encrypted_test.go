package interop_test

import (
	"bytes"
	"crypto/aes"
	"errors"
	"github.com/kubevents/kubevents/internal/metricstest"
	"net/http"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/eventapi"
	evstorage "github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	"k8s.io/apiserver/pkg/storage/value"
	aestransformer "k8s.io/apiserver/pkg/storage/value/encrypt/aes"
)

// encPrefix is the value prefix of an EncryptionConfiguration aesgcm
// provider whose key is named key1.
const encPrefix = "k8s:enc:aesgcm:v1:key1:"

// gcmTransformer is kube-apiserver's aesgcm provider with a fixed test key,
// wrapped as the EncryptionConfiguration wraps it.
func gcmTransformer(t *testing.T) value.Transformer {
	t.Helper()
	block, err := aes.NewCipher(bytes.Repeat([]byte{0x42}, 32))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := aestransformer.NewGCMTransformer(block)
	if err != nil {
		t.Fatal(err)
	}
	return value.NewPrefixTransformers(errors.New("no matching prefix found"),
		value.PrefixTransformer{Prefix: []byte(encPrefix), Transformer: gcm})
}

// TestInteropEncrypted: kube-apiserver with encryption at rest (its real
// aesgcm transformer) writes encrypted events beside plain ones. etcdstore
// refuses to Get them with an error naming the key and the provider, and
// eventsd answers that Get as kube-apiserver answers a value it cannot
// decrypt (500 InternalError), with that message; List and Watch skip
// them, count them in eventsd_etcd_undecodable_values_total{reason=
// "encrypted"} and serve the rest.
func TestInteropEncrypted(t *testing.T) {
	e := newEnv(t)
	plainAPI := e.apiserverStore(mediaProtobuf, nil)
	encAPI := e.apiserverStore(mediaProtobuf, gcmTransformer(t))
	cs := e.serve()
	w, err := e.es.Watch(e.ctx, evstorage.WatchOptions{Revision: e.es.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	secret := e.apiCreate(encAPI, coreEvent("default", "secret-1", "pod-1"), 3600)
	e.apiCreate(encAPI, coreEvent("default", "secret-2", "pod-1"), 3600)
	plainEv := e.apiCreate(plainAPI, coreEvent("default", "plain", "pod-1"), 3600)
	if v := e.raw(etcdKey("default", "secret-1")).Kvs[0].Value; !bytes.HasPrefix(v, []byte(encPrefix)) {
		t.Fatalf("encrypted value starts with %q", v[:min(24, len(v))])
	}
	if got, err := e.apiGet(encAPI, "default", "secret-1"); err != nil {
		t.Fatalf("the encrypting apiserver store cannot read its own value: %v", err)
	} else {
		sameEvent(t, "decrypted by the apiserver store", secret, got)
	}

	// Get: an error naming the key and the provider.
	_, err = e.es.Get(e.ctx, "default", "secret-1")
	var encErr *etcdstore.EncryptedError
	if !errors.As(err, &encErr) || encErr.Key != etcdKey("default", "secret-1") || encErr.Provider != "aesgcm:v1:key1" {
		t.Fatalf("etcdstore get of an encrypted value: %v, want an EncryptedError for %s by aesgcm:v1:key1", err, etcdKey("default", "secret-1"))
	}

	// What kube-apiserver answers for a value it cannot decrypt (its
	// storage without the key, as in a misconfigured EncryptionConfiguration).
	_, apiErr := e.apiGet(plainAPI, "default", "secret-1")
	if apiErr == nil {
		t.Fatal("the apiserver store without the key read an encrypted value")
	}
	var upstream apierrors.APIStatus
	if !errors.As(storeerr.InterpretGetError(apiErr, eventsResource, "secret-1"), &upstream) {
		t.Fatalf("kube-apiserver's answer %v is not a Status", apiErr)
	}
	_, err = cs.CoreV1().Events("default").Get(e.ctx, "secret-1", metav1.GetOptions{})
	var ours apierrors.APIStatus
	if !errors.As(err, &ours) {
		t.Fatalf("eventsd's answer %v is not a Status", err)
	}
	st, up := ours.Status(), upstream.Status()
	if st.Code != up.Code || st.Reason != up.Reason || st.Code != http.StatusInternalServerError {
		t.Fatalf("eventsd answered %d %s, kube-apiserver %d %s", st.Code, st.Reason, up.Code, up.Reason)
	}
	if !strings.Contains(st.Message, etcdKey("default", "secret-1")) || !strings.Contains(st.Message, "aesgcm:v1:key1") {
		t.Fatalf("eventsd's message %q names neither the key nor the provider", st.Message)
	}

	// Writes through eventsd refuse it the same way (kube-apiserver cannot
	// read the current state either) and leave the value encrypted.
	upd := secret.DeepCopy()
	upd.ResourceVersion, upd.Count = "", 2
	_, updErr := cs.CoreV1().Events("default").Update(e.ctx, upd, metav1.UpdateOptions{})
	delErr := cs.CoreV1().Events("default").Delete(e.ctx, "secret-1", metav1.DeleteOptions{})
	for what, err := range map[string]error{"update": updErr, "delete": delErr} {
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "aesgcm:v1:key1") {
			t.Fatalf("eventsd %s of an encrypted event: %v, want 500 InternalError naming the provider", what, err)
		}
	}
	if v := e.raw(etcdKey("default", "secret-1")).Kvs[0].Value; !bytes.HasPrefix(v, []byte(encPrefix)) {
		t.Fatalf("after refused writes the value starts with %q", v[:min(24, len(v))])
	}

	// Lists, by range and through the index, serve the plain event only.
	sel, err := eventapi.ParseFieldSelector(eventapi.CoreV1, "involvedObject.uid=pod-1", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []evstorage.ListOptions{
		{Selector: evstorage.Selector{Namespace: "default"}},
		{Selector: evstorage.Selector{Fields: sel}},
	} {
		res, err := e.es.List(e.ctx, opts)
		if err != nil {
			t.Fatalf("list %+v: %v", opts.Selector, err)
		}
		if len(res.Items) != 1 {
			t.Fatalf("list %+v served %d events, want the plain one", opts.Selector, len(res.Items))
		}
		sameEvent(t, "listed plain event", plainEv, res.Items[0])
	}
	list, err := cs.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("eventsd list: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "plain" {
		t.Fatalf("eventsd listed %d events, want the plain one", len(list.Items))
	}

	// The watch skips the encrypted creates.
	ev := nextStore(t, w)
	if ev.Type != watch.Added || ev.Object.Name != "plain" {
		t.Fatalf("watch: got %s %v, want ADDED plain", ev.Type, ev.Object)
	}
	// Each encrypted value was met by the Gets, lists and the watch.
	if n := metricstest.Sum(t, e.reg, "eventsd_etcd_undecodable_values_total", "reason", "encrypted"); n < 2*3 {
		t.Fatalf("eventsd_etcd_undecodable_values_total{reason=\"encrypted\"} = %v, want at least 6", n)
	}
}
