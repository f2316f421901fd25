package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// env is an in-process eventsd on a fake clock, over an in-memory store.
type env struct {
	t     *testing.T
	srv   *server.Server
	clock *clocktesting.FakeClock
	url   string
	cs    kubernetes.Interface
	ctx   context.Context
	store storage.Interface
}

func newEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	return newEnvWith(t, ttl, nil)
}

// newEnvWith is newEnv with configure applied to the server's Config
// (which holds the store) before the server is built.
func newEnvWith(t *testing.T, ttl time.Duration, configure func(*server.Config)) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, DefaultTTL: ttl, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Store: store, EventTTL: ttl, Clock: clk, Logger: log, BookmarkInterval: time.Minute}
	if configure != nil {
		configure(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		srv.BeginShutdown()
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Drain(context.Background())
		if err := store.Close(); err != nil {
			t.Error(err)
		}
	})
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, clock: clk, url: hs.URL, cs: cs, ctx: ctx, store: store}
}

func (e *env) create(name string) *corev1.Event {
	e.t.Helper()
	ev, err := e.cs.CoreV1().Events("default").Create(e.ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
		Reason:         "Started", Message: "started", Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: metav1.NewTime(e.clock.Now().Add(-5 * time.Minute)),
		LastTimestamp:  metav1.NewTime(e.clock.Now().Add(-5 * time.Minute)),
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// next waits for a watch event, nudging the fake clock so that timers the
// server armed after the last step still fire.
func (e *env) next(w watch.Interface, nudge time.Duration) (watch.Event, bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case ev, ok := <-w.ResultChan():
			return ev, ok
		case <-time.After(20 * time.Millisecond):
			if nudge > 0 {
				e.clock.Step(nudge)
			}
		}
	}
	e.t.Fatal("no watch event within 10s")
	return watch.Event{}, false
}

// TestTTLExpiryOnFakeClock: an event expires exactly when its TTL since
// its last write has passed, and watchers get DELETED.
func TestTTLExpiryOnFakeClock(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	// The default watch timeout (30-60 min) runs on the same fake clock.
	long := int64(3 * 3600)
	w, err := e.cs.CoreV1().Events("default").Watch(e.ctx, metav1.ListOptions{ResourceVersion: "1", TimeoutSeconds: &long})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.clock.Step(59 * time.Minute)
	if _, err := e.cs.CoreV1().Events("default").Get(e.ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("expired before its TTL: %v", err)
	}
	e.clock.Step(time.Minute + time.Second)
	ev, ok := e.next(w, time.Second)
	if !ok || ev.Type != watch.Deleted || ev.Object.(*corev1.Event).Name != "a" {
		t.Fatalf("got %v %v, want DELETED a", ev.Type, ev.Object)
	}
	if _, err := e.cs.CoreV1().Events("default").Get(e.ctx, "a", metav1.GetOptions{}); err == nil {
		t.Fatal("expired event still readable")
	}
}

// TestBookmarksOnFakeClock: a watch that allows bookmarks gets one with the
// current resourceVersion after the bookmark interval without events.
func TestBookmarksOnFakeClock(t *testing.T) {
	e := newEnv(t, time.Hour)
	created := e.create("a")
	w, err := e.cs.CoreV1().Events("default").Watch(e.ctx, metav1.ListOptions{
		ResourceVersion: created.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev, ok := e.next(w, 30*time.Second)
	if !ok || ev.Type != watch.Bookmark {
		t.Fatalf("got %v, want BOOKMARK", ev.Type)
	}
	if rv := ev.Object.(*corev1.Event).ResourceVersion; rv != created.ResourceVersion {
		t.Fatalf("bookmark at %s, want %s", rv, created.ResourceVersion)
	}
}

// TestWatchTimeoutOnFakeClock: timeoutSeconds ends the stream.
func TestWatchTimeoutOnFakeClock(t *testing.T) {
	e := newEnv(t, time.Hour)
	timeout := int64(60)
	w, err := e.cs.CoreV1().Events("default").Watch(e.ctx, metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev, ok := e.next(w, 10*time.Second); ok {
		t.Fatalf("got %v, want the stream to end", ev.Type)
	}
	if e.clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) < time.Minute {
		t.Fatal("stream ended before its timeout")
	}
}

// TestTableAgesUseTheClock: Table cells are ages on the server's clock.
func TestTableAgesUseTheClock(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/namespaces/default/events", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatal(err)
	}
	if len(tbl.Rows) != 1 || len(tbl.ColumnDefinitions) != 10 {
		t.Fatalf("table: %s", body)
	}
	cells := tbl.Rows[0].Cells
	if cells[0] != "5m" || cells[3] != "pod/web" || cells[8] != float64(1) {
		t.Fatalf("cells %v, want last seen 5m, object pod/web, count 1", cells)
	}
	if !strings.Contains(string(tbl.Rows[0].Object.Raw), `"kind":"PartialObjectMetadata"`) {
		t.Fatalf("row object %s", tbl.Rows[0].Object.Raw)
	}
}

// TestProtobufResponses: clients that prefer protobuf (client-go's typed
// clients since v0.35) get the Kubernetes protobuf envelope back.
func TestProtobufResponses(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	for _, path := range []string{"/api/v1/namespaces/default/events/a", "/api/v1/namespaces/default/events", "/apis/events.k8s.io/v1/events"} {
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		req.Header.Set("Accept", "application/vnd.kubernetes.protobuf,application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf" || !strings.HasPrefix(string(body), "k8s\x00") {
			t.Fatalf("%s: content type %q, body %q", path, ct, body[:min(len(body), 20)])
		}
		var u runtime.Unknown
		if err := u.Unmarshal(body[4:]); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"/api/v1/namespaces/default/events/a": "v1/Event",
			"/api/v1/namespaces/default/events":   "v1/EventList",
			"/apis/events.k8s.io/v1/events":       "events.k8s.io/v1/EventList",
		}[path]
		if got := u.APIVersion + "/" + u.Kind; got != want {
			t.Fatalf("%s: envelope type %s, want %s", path, got, want)
		}
	}
}
