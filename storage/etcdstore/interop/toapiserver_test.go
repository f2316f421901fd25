package interop_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/server"
	evstorage "github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// eventsV1Event is an events.k8s.io/v1 Event as a controller's events
// recorder posts it, with every field the group has.
func eventsV1Event(ns, name string) *eventsv1.Event {
	observed := metav1.NewMicroTime(baseTime.Add(90*time.Second + 654321*time.Microsecond))
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"note": "v1"}},
		EventTime:           metav1.NewMicroTime(baseTime.Add(123456 * time.Microsecond)),
		Series:              &eventsv1.EventSeries{Count: 3, LastObservedTime: observed},
		ReportingController: "example.com/scaler",
		ReportingInstance:   "scaler-7d9f",
		Action:              "Scale",
		Reason:              "ScaledUp",
		Regarding: corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "web",
			UID: "deploy-uid", APIVersion: "apps/v1", ResourceVersion: "42"},
		Related: &corev1.ObjectReference{Kind: "ReplicaSet", Namespace: ns, Name: "web-5c6f",
			UID: "rs-uid", APIVersion: "apps/v1"},
		Note: "Scaled up replica set web-5c6f to 3",
		Type: corev1.EventTypeNormal,
	}
}

// storedForm is the core/v1 Event kube-apiserver stores for an
// events.k8s.io/v1 Event (pkg/apis/events/v1 conversion: regarding →
// involvedObject, note → message, deprecated* → source, firstTimestamp,
// lastTimestamp, count, series without state; nothing synthesised),
// written out field by field rather than with eventapi's conversion, so
// that the conversion is checked.
func storedForm(in *eventsv1.Event) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Related:             in.Related,
		Reason:              in.Reason,
		Message:             in.Note,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Series:              &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime},
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		Action:              in.Action,
	}
}

// TestInteropToAPIServer: events etcdstore creates, updates and deletes
// (one core/v1, one that came in through events.k8s.io/v1 and was
// converted with eventapi.FromEventsV1 as eventsd does) are read unchanged
// by kube-apiserver's etcd3 store: Get, GetList and Watch, with the
// resourceVersions etcdstore returned.
func TestInteropToAPIServer(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaProtobuf, nil)
	aw, err := api.Watch(e.ctx, resourcePrefix, apistorage.ListOptions{
		ResourceVersion: strconv.FormatInt(e.es.Revision(), 10), Predicate: apistorage.Everything, Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Stop()

	core := must(t)(e.es.Create(e.ctx, coreEvent("default", "core", "pod-1"), evstorage.WriteOptions{TTL: time.Hour}))
	v1ev := eventsV1Event("default", "v1")
	v1ev.UID, v1ev.CreationTimestamp = "uid-v1", metav1.NewTime(baseTime)
	fromV1 := must(t)(e.es.Create(e.ctx, eventapi.FromEventsV1(v1ev), evstorage.WriteOptions{TTL: time.Hour}))
	want := storedForm(v1ev)
	want.ResourceVersion = fromV1.ResourceVersion
	sameEvent(t, "eventsd's conversion and kube-apiserver's stored form", want, fromV1)

	// Get.
	for _, w := range []*corev1.Event{core, want} {
		got, err := e.apiGet(api, w.Namespace, w.Name)
		if err != nil {
			t.Fatalf("apiserver get %s: %v", w.Name, err)
		}
		sameEvent(t, "apiserver Get and etcdstore's Create", w, got)
	}

	// GetList, in key order.
	list := &corev1.EventList{}
	if err := api.GetList(e.ctx, resourcePrefix, apistorage.ListOptions{Predicate: apistorage.Everything, Recursive: true}, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("apiserver list has %d items, want 2", len(list.Items))
	}
	sameEvent(t, "listed core", core, &list.Items[0])
	sameEvent(t, "listed v1", want, &list.Items[1])
	if rv(t, list.ResourceVersion) < rv(t, fromV1.ResourceVersion) {
		t.Fatalf("list at %s, before the create at %s", list.ResourceVersion, fromV1.ResourceVersion)
	}

	// Watch: ADDED, MODIFIED, DELETED with etcdstore's objects.
	for _, w := range []*corev1.Event{core, want} {
		ev := nextAPI(t, aw)
		if ev.Type != watch.Added {
			t.Fatalf("apiserver watch: got %s, want ADDED %s", ev.Type, w.Name)
		}
		sameEvent(t, "apiserver watch ADDED", w, ev.Object.(*corev1.Event))
	}
	upd := core.DeepCopy()
	upd.ResourceVersion = ""
	upd.Count, upd.LastTimestamp = 2, metav1.NewTime(baseTime.Add(time.Minute))
	updated := must(t)(e.es.Update(e.ctx, upd, evstorage.WriteOptions{TTL: time.Hour}))
	ev := nextAPI(t, aw)
	if ev.Type != watch.Modified {
		t.Fatalf("apiserver watch: got %s, want MODIFIED", ev.Type)
	}
	sameEvent(t, "apiserver watch MODIFIED", updated, ev.Object.(*corev1.Event))
	deleted := must(t)(e.es.Delete(e.ctx, "default", "core", evstorage.Preconditions{}))
	ev = nextAPI(t, aw)
	if ev.Type != watch.Deleted {
		t.Fatalf("apiserver watch: got %s, want DELETED", ev.Type)
	}
	sameEvent(t, "apiserver watch DELETED", deleted, ev.Object.(*corev1.Event))
	if _, err := e.apiGet(api, "default", "core"); !apistorage.IsNotFound(err) {
		t.Fatalf("apiserver get after etcdstore's delete: %v, want not found", err)
	}
}

// serve runs eventsd's API in-process over the env's etcdstore and
// returns a client-go clientset for it.
func (e *env) serve() clientset.Interface {
	e.t.Helper()
	srv, err := server.New(server.Config{Store: e.es, EventTTL: time.Hour, Clock: e.clock,
		Logger: slog.New(slog.DiscardHandler), BookmarkInterval: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	e.t.Cleanup(func() {
		srv.BeginShutdown()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Drain(context.Background())
	})
	cs, err := clientset.NewForConfig(&rest.Config{Host: hs.URL, QPS: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// TestInteropServerEventsV1: an events.k8s.io/v1 Event POSTed with
// client-go to eventsd on etcdstore is read by kube-apiserver's etcd3
// store in the core/v1 form kube-apiserver itself would have stored, and
// agrees with eventsd's core/v1 view of it.
func TestInteropServerEventsV1(t *testing.T) {
	e := newEnv(t)
	api := e.apiserverStore(mediaProtobuf, nil)
	cs := e.serve()

	posted := eventsV1Event("default", "posted")
	// kube-apiserver drops a selfLink clients send (TestInteropSelfLink).
	posted.SelfLink = "/apis/events.k8s.io/v1/namespaces/default/events/posted"
	created, err := cs.EventsV1().Events("default").Create(e.ctx, posted, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.SelfLink != "" {
		t.Fatalf("eventsd returned selfLink %q; kube-apiserver returns none", created.SelfLink)
	}
	got, err := e.apiGet(api, "default", "posted")
	if err != nil {
		t.Fatal(err)
	}
	want := storedForm(posted)
	want.ObjectMeta = created.ObjectMeta // uid, creationTimestamp, resourceVersion set by the server
	sameEvent(t, "apiserver Get of an events.k8s.io/v1 POST", want, got)
	coreView, err := cs.CoreV1().Events("default").Get(e.ctx, "posted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameEvent(t, "eventsd's core/v1 view and the apiserver store's", got, coreView)
	if ttl := e.grantedTTL(etcdKey("default", "posted")); ttl != 3600+60 {
		t.Fatalf("lease granted for %ds, want 3660 (1h TTL + 60s reuse window)", ttl)
	}
}
