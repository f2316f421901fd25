package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/server"
)

// clusterClient is a clientset whose server URL ends in /clusters/NAME,
// as a kubeconfig for one cluster of a fleet has it.
func clusterClient(t *testing.T, base, name string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: base + server.ClustersPathPrefix + name, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func fleetEvent(name, msg string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "shop", UID: types.UID("uid-" + msg)},
		Reason:         "Started", Message: msg, Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "kubelet"},
	}
}

// TestFleetServing: a server with a fleet serves each cluster at
// /clusters/NAME/ to client-go (writes, gets, lists, watches, discovery),
// keeps same-named events of clusters and of the root apart, serves
// every named cluster at /clusters/*/ read-only with each event's
// cluster annotated and a cluster field selector narrowing it, lists the
// clusters at /clusters/, and answers 404 for a cluster it does not serve.
func TestFleetServing(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Clusters = []server.Cluster{{Name: "east"}, {Name: "west"}, {Name: "mirrored", ReadOnly: "mirrored from its cluster"}}
	})
	ctx := e.ctx
	east, west := clusterClient(t, e.url, "east"), clusterClient(t, e.url, "west")
	for cs, msg := range map[kubernetes.Interface]string{east: "east", west: "west", e.cs: "root"} {
		if _, err := cs.CoreV1().Events("shop").Create(ctx, fleetEvent("same", msg), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create in %s: %v", msg, err)
		}
	}
	onlyEast := fleetEvent("only-east", "east")
	onlyEast.InvolvedObject.Namespace = "other"
	if _, err := east.CoreV1().Events("other").Create(ctx, onlyEast, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for cs, msg := range map[kubernetes.Interface]string{east: "east", west: "west", e.cs: "root"} {
		got, err := cs.CoreV1().Events("shop").Get(ctx, "same", metav1.GetOptions{})
		if err != nil || got.Message != msg || got.Namespace != "shop" {
			t.Errorf("get shop/same from %s: %v %v", msg, got, err)
		}
		l, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if it.Note != msg || strings.Contains(it.Namespace, "~") {
				t.Errorf("%s's events.k8s.io list holds %s/%s %q", msg, it.Namespace, it.Name, it.Note)
			}
		}
	}
	if _, err := west.CoreV1().Events("other").Get(ctx, "only-east", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("west sees east's event: %v", err)
	}
	// A protobuf list over several index lookups (the store's encodings
	// hold storage namespaces: the view's copies must be what is sent).
	pbEast, err := kubernetes.NewForConfig(&rest.Config{Host: e.url + server.ClustersPathPrefix + "east", QPS: -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf", AcceptContentTypes: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pbEast.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involves.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range pl.Items {
		if it.Namespace != "shop" && it.Namespace != "other" || it.Message != "east" {
			t.Errorf("east's protobuf list over index lookups holds %s/%s %q", it.Namespace, it.Name, it.Message)
		}
	}
	if len(pl.Items) != 2 {
		t.Errorf("east's protobuf list over index lookups: %d events, want 2", len(pl.Items))
	}
	// Discovery works under a cluster's path (kubectl needs it).
	if _, err := east.Discovery().ServerResourcesForGroupVersion("v1"); err != nil {
		t.Errorf("discovery at /clusters/east: %v", err)
	}

	// The fleet: every named cluster's events, annotated, read-only.
	fleet := clusterClient(t, e.url, server.FleetCluster)
	l, err := fleet.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range l.Items {
		got = append(got, it.Annotations[eventapi.ClusterAnnotation]+":"+it.Namespace+"/"+it.Name)
	}
	if want := []string{"east:other/only-east", "east:shop/same", "west:shop/same"}; !slices.Equal(got, want) {
		t.Errorf("fleet list: %q, want %q", got, want)
	}
	for sel, want := range map[string]int{"cluster=west": 1, "cluster!=west": 2, "cluster=east,metadata.name=same": 1, "cluster=nowhere": 0} {
		l, err := fleet.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("fleet list %s: %v", sel, err)
		}
		if len(l.Items) != want {
			t.Errorf("fleet list %s: %d events, want %d", sel, len(l.Items), want)
		}
	}
	if _, err := fleet.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "cluster=east,cluster=west"}); !apierrors.IsBadRequest(err) {
		t.Errorf("fleet list of two clusters' equalities: %v, want 400", err)
	}
	if _, err := fleet.CoreV1().Events("shop").Create(ctx, fleetEvent("x", "fleet"), metav1.CreateOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("create at /clusters/*: %v, want 405", err)
	}
	if _, err := clusterClient(t, e.url, "mirrored").CoreV1().Events("shop").Create(ctx, fleetEvent("x", "m"), metav1.CreateOptions{}); !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "mirrored from its cluster") {
		t.Errorf("create in a read-only cluster: %v, want 405 with its message", err)
	}
	if _, err := fleet.CoreV1().Events("shop").Get(ctx, "same", metav1.GetOptions{}); !apierrors.IsConflict(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("fleet get of a name two clusters hold: %v, want a refusal naming them", err)
	}
	if got, err := fleet.CoreV1().Events("other").Get(ctx, "only-east", metav1.GetOptions{}); err != nil || got.Annotations[eventapi.ClusterAnnotation] != "east" {
		t.Errorf("fleet get of a name one cluster holds: %v %v", got, err)
	}
	// A storage namespace in a path reads nothing of another cluster.
	if _, err := e.cs.CoreV1().Events("~east~shop").Get(ctx, "same", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get through a cluster's storage namespace: %v, want 404", err)
	}

	// A fleet watch sees the changes of every cluster, annotated.
	w, err := fleet.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := west.CoreV1().Events("shop").Create(ctx, fleetEvent("later", "west"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Events("shop").Create(ctx, fleetEvent("root-later", "root"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.CoreV1().Events("shop").Create(ctx, fleetEvent("later", "east"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"west", "east"} {
		select {
		case ev := <-w.ResultChan():
			got := ev.Object.(*corev1.Event)
			if ev.Type != watch.Added || got.Name != "later" || got.Annotations[eventapi.ClusterAnnotation] != want || got.Namespace != "shop" {
				t.Errorf("fleet watch: %s %s/%s in %q, want ADDED shop/later in %s", ev.Type, got.Namespace, got.Name, got.Annotations[eventapi.ClusterAnnotation], want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("fleet watch: no event of %s", want)
		}
	}

	// The clusters, and a cluster not served.
	var list eventapi.ClusterList
	getJSON(t, e.url+"/clusters/", &list)
	var names []string
	for _, c := range list.Items {
		names = append(names, fmt.Sprintf("%s:%v", c.Name, c.ReadOnly))
	}
	if want := []string{"east:false", "mirrored:true", "west:false"}; !slices.Equal(names, want) {
		t.Errorf("GET /clusters/: %q, want %q", names, want)
	}
	resp, err := http.Get(e.url + "/clusters/nowhere/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `cluster \"nowhere\" is not served here`) {
		t.Errorf("a cluster not served: %d %s", resp.StatusCode, body)
	}
	// Families are one cluster's.
	if _, err := fleet.CoreV1().Events("shop").List(ctx, metav1.ListOptions{FieldSelector: "family.kind=Deployment,family.name=web"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a family across the fleet: %v, want 400", err)
	}
}

// TestFleetOfOne: the root serves the only cluster of a fleet of one, the
// same events as its /clusters/NAME/ path.
func TestFleetOfOne(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Clusters = []server.Cluster{{Name: "prod"}}
		c.RootCluster = "prod"
	})
	if _, err := e.cs.CoreV1().Events("shop").Create(e.ctx, fleetEvent("a", "prod"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := clusterClient(t, e.url, "prod").CoreV1().Events("shop").Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil || got.Message != "prod" {
		t.Fatalf("the root's event at /clusters/prod: %v %v", got, err)
	}
	for _, bad := range []server.Config{
		{Clusters: []server.Cluster{{Name: "prod"}}, RootCluster: "nope"},
		{RootCluster: "prod"},
		{Clusters: []server.Cluster{{Name: "Prod"}}},
		{Clusters: []server.Cluster{{Name: "a"}, {Name: "a"}}},
		{Clusters: []server.Cluster{{Name: "*"}}},
	} {
		bad.Store = e.store
		if _, err := server.New(bad); err == nil {
			t.Errorf("server.New accepted clusters %+v with root %q", bad.Clusters, bad.RootCluster)
		}
	}
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}
