package server_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchFromFutureResourceVersion: a watch from a resourceVersion the
// server has not reached (up to the largest int64) waits for it, as an
// etcd watch does, instead of answering 410; it gets the changes after it
// and nothing before.
func TestWatchFromFutureResourceVersion(t *testing.T) {
	e := newEnv(t, time.Hour)
	first := e.create("a")
	rev, _ := strconv.ParseInt(first.ResourceVersion, 10, 64)
	events := e.cs.CoreV1().Events("default")
	timeout := int64(60)

	w, err := events.Watch(e.ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(math.MaxInt64, 10), TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.create("b")
	if ev, ok := e.next(w, 10*time.Second); ok {
		t.Fatalf("watch from the largest resourceVersion: got %v %+v, want nothing until its timeout", ev.Type, ev.Object)
	}

	// From two revisions ahead: "c" (rev+2) is not after it, "d" is.
	w, err = events.Watch(e.ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rev+2, 10), TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.create("c")
	e.create("d")
	ev, ok := e.next(w, 0)
	if !ok || ev.Type != watch.Added || ev.Object.(*corev1.Event).Name != "d" {
		t.Fatalf("got %v %+v, want ADDED d", ev.Type, ev.Object)
	}

	// With sendInitialEvents the initial state cannot be served at a
	// revision not reached: kube-apiserver's 504 Too large resource version
	// (client-go would retry it after its Retry-After; ask once).
	code, body := e.do(http.MethodGet, "/api/v1/namespaces/default/events?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"+
		"&resourceVersionMatch=NotOlderThan&resourceVersion="+strconv.FormatInt(math.MaxInt64, 10), "", "", "")
	if code != http.StatusGatewayTimeout || !strings.Contains(body, `"reason":"Timeout"`) || !strings.Contains(body, string(metav1.CauseTypeResourceVersionTooLarge)) {
		t.Fatalf("sendInitialEvents from a future resourceVersion: %d %s, want 504 with cause ResourceVersionTooLarge", code, body)
	}
}
