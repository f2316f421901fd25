package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestEtcdUnavailable: with the etcd under an etcd-backed server
// stopped, requests get a 503 Status saying the storage is unavailable,
// with Retry-After, within the store's request timeout (long before the
// server's own); /readyz fails. Once etcd is back, /readyz passes again
// and writes succeed without restarting anything; a client-go create
// made during the outage succeeds by itself, retrying after Retry-After.
func TestEtcdUnavailable(t *testing.T) {
	dir := t.TempDir()
	e, endpoint := etcdtest.Start(t, dir)
	t.Cleanup(func() { e.Close() })
	log := slog.New(slog.DiscardHandler)
	storeClock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const requestTimeout = 500 * time.Millisecond
	store, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout,
		RequestTimeout: requestTimeout, ReadycheckTimeout: requestTimeout, CompactionInterval: -1, Clock: storeClock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	url, cs := serveStore(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := cs.CoreV1().Events("default")
	mk := func(name string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason: "Started", Message: "started", Type: corev1.EventTypeNormal}
	}
	probe := func() (int, string) {
		storeClock.Step(2 * time.Second) // past the store's health cache
		return readyz(t, url)
	}

	if _, err := events.Create(ctx, mk("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, body := probe(); code != http.StatusOK {
		t.Fatalf("/readyz with etcd up: %d %q", code, body)
	}

	closed := etcdtest.Kill(e)

	// The raw answers: 503, Retry-After, a Status that says why.
	body, _ := json.Marshal(mk("b"))
	for _, req := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/namespaces/default/events"},
		{http.MethodGet, "/api/v1/namespaces/default/events"},
		{http.MethodGet, "/api/v1/namespaces/default/events/a"},
		{http.MethodGet, "/apis/events.k8s.io/v1/events?watch=1"},
	} {
		start := time.Now()
		r, _ := http.NewRequestWithContext(ctx, req.method, url+req.path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var st metav1.Status
		_ = json.Unmarshal(b, &st)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" ||
			st.Kind != "Status" || st.Reason != metav1.StatusReasonServiceUnavailable || st.Details == nil || st.Details.RetryAfterSeconds != 2 ||
			!strings.Contains(st.Message, "storage is unavailable") || !strings.Contains(st.Message, "etcd at "+endpoint) {
			t.Fatalf("%s %s with etcd down: %d, Retry-After %q, %s", req.method, req.path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		if took := time.Since(start); took > requestTimeout+2*time.Second {
			t.Fatalf("%s %s took %v with etcd down", req.method, req.path, took)
		}
	}
	// client-go sees a ServiceUnavailable error suggesting a delay.
	_, err = cs.CoreV1().RESTClient().Get().Namespace("default").Resource("events").MaxRetries(0).Do(ctx).Get()
	if delay, ok := apierrors.SuggestsClientDelay(err); !apierrors.IsServiceUnavailable(err) || !ok || delay != 2 {
		t.Fatalf("client-go list with etcd down: %v (delay %d, %v)", err, delay, ok)
	}
	if code, body := probe(); code != http.StatusServiceUnavailable || !strings.Contains(body, "etcd at "+endpoint) {
		t.Fatalf("/readyz with etcd down: %d %q", code, body)
	}

	// A create made now is retried by client-go after Retry-After, and
	// succeeds once etcd is back.
	created := make(chan error, 1)
	go func() {
		_, err := events.Create(ctx, mk("during"), metav1.CreateOptions{})
		created <- err
	}()
	time.Sleep(requestTimeout) // its first attempt fails

	<-closed
	e, _ = etcdtest.Start(t, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := probe()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after etcd returned: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := events.Create(ctx, mk("after"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after etcd returned: %v", err)
	}
	if err := <-created; err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create retried over the outage: %v", err)
	}
	l, err := events.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range l.Items {
		names = append(names, ev.Name)
	}
	if strings.Join(names, ",") != "a,after,during" {
		t.Fatalf("events after the outage: %v", names)
	}
}
