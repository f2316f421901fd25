package interop_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	evstorage "github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	apistorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Storage settings of kube-apiserver for events.
const (
	// etcdPrefix is kube-apiserver's --etcd-prefix default.
	etcdPrefix = "/registry"
	// resourcePrefix is the events resource's key prefix under it.
	resourcePrefix = "/events"
	// mediaProtobuf and mediaJSON are --storage-media-type values.
	mediaProtobuf = runtime.ContentTypeProtobuf
	mediaJSON     = runtime.ContentTypeJSON
	// waitFor bounds every wait for a watch event.
	waitFor = 10 * time.Second
)

// eventsResource is the group-resource kube-apiserver stores events under
// (events.k8s.io cohabits with it).
var eventsResource = schema.GroupResource{Resource: "events"}

// env is one etcd shared by an etcdstore.Store, a raw etcd client and the
// k8s.io/apiserver etcd3 stores a test opens on it.
type env struct {
	t        *testing.T
	endpoint string
	cli      *clientv3.Client
	es       *etcdstore.Store
	reg      *prometheus.Registry
	clock    *clocktesting.FakeClock
	ctx      context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e, endpoint := etcdtest.Start(t, t.TempDir())
	t.Cleanup(e.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Now())
	es, err := etcdstore.Open(etcdstore.Options{
		Client:             cli,
		Clock:              clk,
		Registerer:         reg,
		CompactionInterval: -1, // not under test
		Logger:             slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, endpoint: endpoint, cli: cli, es: es, reg: reg, clock: clk, ctx: ctx}
}

// apiserverStore opens k8s.io/apiserver's etcd3 store for core/v1 Events
// as kube-apiserver builds it (storagebackend/factory newETCD3Storage):
// its own etcd client, kube-apiserver's storage codec for mediaType, the
// APIObjectVersioner, the default lease manager config, prefix /registry
// and resource prefix /events. A nil transformer is kube-apiserver's
// default, the identity transformer that refuses encrypted values.
func (e *env) apiserverStore(mediaType string, transformer value.Transformer) apistorage.Interface {
	e.t.Helper()
	kc, err := kubernetes.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { kc.Close() })
	codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  mediaType,
		StorageSerializer: serializer.NewCodecFactory(scheme.Scheme),
		StorageVersion:    corev1.SchemeGroupVersion,
		MemoryVersion:     corev1.SchemeGroupVersion,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := apistorage.APIObjectVersioner{}
	s, err := etcd3.New(kc, nil, codec,
		func() runtime.Object { return &corev1.Event{} },
		func() runtime.Object { return &corev1.EventList{} },
		etcdPrefix, resourcePrefix, eventsResource, transformer,
		etcd3.NewDefaultLeaseManagerConfig(), etcd3.NewDefaultDecoder(codec, versioner), versioner)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// apiKey is the key the apiserver store takes for ns/name.
func apiKey(ns, name string) string { return resourcePrefix + "/" + ns + "/" + name }

// etcdKey is the etcd key both sides keep ns/name under.
func etcdKey(ns, name string) string { return etcdPrefix + "/events/" + ns + "/" + name }

// apiCreate creates ev through the apiserver store with ttl seconds, as
// the events registry does.
func (e *env) apiCreate(s apistorage.Interface, ev *corev1.Event, ttl uint64) *corev1.Event {
	e.t.Helper()
	out := &corev1.Event{}
	if err := s.Create(e.ctx, apiKey(ev.Namespace, ev.Name), ev.DeepCopy(), out, ttl); err != nil {
		e.t.Fatalf("apiserver create %s/%s: %v", ev.Namespace, ev.Name, err)
	}
	return out
}

// apiUpdate changes ns/name through the apiserver store's
// GuaranteedUpdate with ttl seconds (the events registry's TTLFunc gives
// the TTL on every update).
func (e *env) apiUpdate(s apistorage.Interface, ns, name string, ttl uint64, mutate func(*corev1.Event)) *corev1.Event {
	e.t.Helper()
	out := &corev1.Event{}
	err := s.GuaranteedUpdate(e.ctx, apiKey(ns, name), out, false, nil,
		func(in runtime.Object, _ apistorage.ResponseMeta) (runtime.Object, *uint64, error) {
			ev := in.(*corev1.Event).DeepCopy()
			mutate(ev)
			return ev, &ttl, nil
		}, nil)
	if err != nil {
		e.t.Fatalf("apiserver update %s/%s: %v", ns, name, err)
	}
	return out
}

// apiGet reads ns/name through the apiserver store.
func (e *env) apiGet(s apistorage.Interface, ns, name string) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.Get(e.ctx, apiKey(ns, name), apistorage.GetOptions{}, out)
	return out, err
}

// raw reads key with the plain etcd client.
func (e *env) raw(key string) *clientv3.GetResponse {
	e.t.Helper()
	resp, err := e.cli.Get(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		e.t.Fatalf("etcd key %s holds %d values", key, len(resp.Kvs))
	}
	return resp
}

// grantedTTL is the TTL the lease attached to key was granted for.
func (e *env) grantedTTL(key string) int64 {
	e.t.Helper()
	kv := e.raw(key).Kvs[0]
	if kv.Lease == 0 {
		e.t.Fatalf("etcd key %s has no lease", key)
	}
	resp, err := e.cli.TimeToLive(e.ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GrantedTTL
}

// plain is ev without the fields only one side sets on objects it
// returns: TypeMeta (the apiserver codec sets it, etcdstore leaves it
// empty as storage.Interface objects are).
func plain(ev *corev1.Event) *corev1.Event {
	cp := ev.DeepCopy()
	cp.TypeMeta = metav1.TypeMeta{}
	return cp
}

// sameEvent fails unless a and b are semantically equal once plain.
func sameEvent(t *testing.T, what string, a, b *corev1.Event) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(plain(a), plain(b)) {
		t.Fatalf("%s differ (-want +got):\n%s", what, cmp.Diff(plain(a), plain(b)))
	}
}

// baseTime is a whole second in UTC: values round-trip through protobuf and
// JSON unchanged.
var baseTime = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// coreEvent is a core/v1 Event as a kubelet's recorder posts it.
func coreEvent(ns, name, podUID string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(baseTime), Labels: map[string]string{"app": "web"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + podUID,
			UID: types.UID(podUID), APIVersion: "v1", FieldPath: "spec.containers{web}"},
		Reason:         "Started",
		Message:        "Started container web",
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(baseTime),
		LastTimestamp:  metav1.NewTime(baseTime),
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

// next waits for the next event of an etcdstore watch.
func nextStore(t *testing.T, w evstorage.Watcher) evstorage.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("etcdstore watch closed")
		}
		if ev.Err != nil {
			t.Fatalf("etcdstore watch: %v", ev.Err)
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no event from the etcdstore watch")
	}
	return evstorage.Event{}
}

// nextAPI waits for the next event of an apiserver store watch.
func nextAPI(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("apiserver watch closed")
		}
		if ev.Type == watch.Error {
			t.Fatalf("apiserver watch: %v", ev.Object)
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no event from the apiserver watch")
	}
	return watch.Event{}
}

func rv(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return n
}

// must returns a function that fails t on an error and returns the value
// otherwise: must(t)(f()).
func must(t *testing.T) func(*corev1.Event, error) *corev1.Event {
	return func(ev *corev1.Event, err error) *corev1.Event {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
}
