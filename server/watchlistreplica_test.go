package server_test

import (
	"testing"
	"time"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// laggingStore is a store whose Revision() lags behind its data, as an
// etcd replica's does until its shared watch delivers another replica's
// write: Revision is what the replica has observed, not what etcd has.
type laggingStore struct {
	storage.Interface
	lag int64
}

func (s laggingStore) Revision() int64 { return s.Interface.Revision() - s.lag }

// TestWatchListFromRevisionNotYetObserved: a watch-list (sendInitialEvents,
// resourceVersionMatch=NotOlderThan) from a resourceVersion another
// replica returned, beyond the Revision this replica has observed, is
// served when the store's initial state reaches it: the store decides,
// not the server's view of Revision.
func TestWatchListFromRevisionNotYetObserved(t *testing.T) {
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.Store = laggingStore{Interface: c.Store, lag: 1} })
	a := e.create("a")
	w, err := e.cs.CoreV1().Events("default").Watch(e.ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatalf("watch-list from %s, one past the observed revision: %v", a.ResourceVersion, err)
	}
	defer w.Stop()
	ev, ok := e.next(w, 0)
	if !ok || ev.Type != watch.Added || ev.Object.(*corev1.Event).Name != "a" {
		t.Fatalf("got %v %+v, want ADDED a", ev.Type, ev.Object)
	}
	ev, ok = e.next(w, 0)
	bm, _ := ev.Object.(*corev1.Event)
	if !ok || ev.Type != watch.Bookmark || bm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("got %v %+v, want the initial-events-end BOOKMARK", ev.Type, ev.Object)
	}
	if bm.ResourceVersion != a.ResourceVersion {
		t.Fatalf("initial events at %s, want %s", bm.ResourceVersion, a.ResourceVersion)
	}
}
