package etcdstore_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/kubevents/kubevents/internal/metricstest"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// env is an etcd on loopback, a raw client to it and a store over it.
type env struct {
	t     testing.TB
	cli   *clientv3.Client
	s     *etcdstore.Store
	clock *clocktesting.FakeClock
	ctx   context.Context
}

func newEnv(t testing.TB, mod func(*etcdstore.Options)) *env {
	t.Helper()
	e, endpoint := etcdtest.Start(t, t.TempDir())
	t.Cleanup(e.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := etcdstore.Options{Client: cli, Clock: clk, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&opts)
	}
	s, err := etcdstore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, cli: cli, s: s, clock: clk, ctx: ctx}
}

func event(ns, name string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-" + "name"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + name},
		Reason:         "Started",
		Message:        "started " + name,
		Type:           corev1.EventTypeNormal,
		Count:          1,
	}
}

func (e *env) get(key string) *clientv3.GetResponse {
	e.t.Helper()
	resp, err := e.cli.Get(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// TestStoredBytes reads what the store wrote with the plain etcd client:
// kube-apiserver's key, the "k8s\x00" envelope around a runtime.Unknown
// naming v1 Event, and a lease of TTL plus the reuse window attached.
func TestStoredBytes(t *testing.T) {
	e := newEnv(t, nil)
	created, err := e.s.Create(e.ctx, event("default", "a"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp := e.get("/registry/events/default/a")
	if len(resp.Kvs) != 1 {
		t.Fatalf("key /registry/events/default/a holds %d values", len(resp.Kvs))
	}
	kv := resp.Kvs[0]
	if created.ResourceVersion != strconv.FormatInt(kv.ModRevision, 10) {
		t.Fatalf("resourceVersion %s, mod_revision %d", created.ResourceVersion, kv.ModRevision)
	}
	if !bytes.HasPrefix(kv.Value, []byte("k8s\x00")) {
		t.Fatalf("value starts with %q, want k8s\\x00", kv.Value[:min(8, len(kv.Value))])
	}
	var u runtime.Unknown
	if err := u.Unmarshal(kv.Value[4:]); err != nil {
		t.Fatalf("envelope: %v", err)
	}
	if u.APIVersion != "v1" || u.Kind != "Event" || u.ContentType != "" || u.ContentEncoding != "" {
		t.Fatalf("envelope %+v", u.TypeMeta)
	}
	var stored corev1.Event
	if err := stored.Unmarshal(u.Raw); err != nil {
		t.Fatalf("raw Event: %v", err)
	}
	if stored.Name != "a" || stored.Message != "started a" || stored.ResourceVersion != "" {
		t.Fatalf("stored event %+v (resourceVersion must not be stored)", stored.ObjectMeta)
	}
	if kv.Lease == 0 {
		t.Fatal("no lease attached")
	}
	ttl, err := e.cli.TimeToLive(e.ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		t.Fatal(err)
	}
	// 1h TTL: reuse window min(5% = 180s, 60s) = 60s.
	if want := int64(3660); ttl.GrantedTTL != want {
		t.Fatalf("lease granted for %ds, want %d", ttl.GrantedTTL, want)
	}
	// An update attaches the current lease too.
	upd := event("default", "a")
	upd.Count = 2
	if _, err := e.s.Update(e.ctx, upd, storage.WriteOptions{TTL: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	kv = e.get("/registry/events/default/a").Kvs[0]
	ttl, err = e.cli.TimeToLive(e.ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(7200 + 60); ttl.GrantedTTL != want {
		t.Fatalf("update: lease granted for %ds, want %d", ttl.GrantedTTL, want)
	}
}

// TestPrefix keeps events under a custom --etcd-prefix.
func TestPrefix(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.Prefix = "/custom/" })
	if _, err := e.s.Create(e.ctx, event("ns", "x"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.get("/custom/events/ns/x").Kvs); n != 1 {
		t.Fatalf("found %d values under /custom/events/ns/x", n)
	}
}

// TestForeignValues: JSON values (a cluster with JSON storage) are read;
// a value encrypted at rest is a clear error naming the key and the
// provider, counted, and lists and watches serve the rest.
func TestForeignValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *etcdstore.Options) { o.Registerer = reg })
	w, err := e.s.Watch(e.ctx, storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	js := `{"kind":"Event","apiVersion":"v1","metadata":{"name":"j","namespace":"default","uid":"u1"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"FromJSON","type":"Normal"}`
	for key, val := range map[string]string{
		"/registry/events/default/enc": "k8s:enc:aescbc:v1:key1:\x8f\x01binary",
		"/registry/events/default/j":   js,
	} {
		if _, err := e.cli.Put(e.ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.Create(e.ctx, event("default", "p"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.Get(e.ctx, "default", "j")
	if err != nil || got.Reason != "FromJSON" || got.ResourceVersion == "" {
		t.Fatalf("JSON value: %+v, %v", got, err)
	}
	_, err = e.s.Get(e.ctx, "default", "enc")
	var encErr *etcdstore.EncryptedError
	if !errors.As(err, &encErr) || !errors.Is(err, etcdstore.ErrEncrypted) {
		t.Fatalf("encrypted value: got %v, want an EncryptedError", err)
	}
	if encErr.Key != "/registry/events/default/enc" || encErr.Provider != "aescbc:v1:key1" ||
		!strings.Contains(err.Error(), "aescbc:v1:key1") || !strings.Contains(err.Error(), "/registry/events/default/enc") {
		t.Fatalf("error %q (key %q, provider %q) should name the key and the provider", err, encErr.Key, encErr.Provider)
	}
	res, err := e.s.List(e.ctx, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 2 || res.Items[0].Name != "j" || res.Items[1].Name != "p" {
		t.Fatalf("list served %d items, want j and p", len(res.Items))
	}
	if n := e.s.UndecodableValues(); n < 2 {
		t.Fatalf("undecodable values counted %d, want at least 2", n)
	}
	if n := metricstest.Sum(t, reg, "eventsd_etcd_undecodable_values_total", "reason", "encrypted"); n < 2 {
		t.Fatalf("eventsd_etcd_undecodable_values_total{reason=encrypted} = %v, want at least 2", n)
	}
	// The watch skipped the encrypted value and delivered the others.
	for _, want := range []string{"j", "p"} {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added || ev.Object.Name != want {
				t.Fatalf("got %s %v, want ADDED %s", ev.Type, ev.Object, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no ADDED %s", want)
		}
	}
}

// TestWatchFanOut: watchers share the store's one etcd watch; one that
// starts before the ring of recent changes catches up with a watch of its
// own and then delivers the same changes in order.
func TestWatchFanOut(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.RingSize = 8 })
	first, err := e.s.Create(e.ctx, event("default", "e00"), storage.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const watchers, n = 20, 30
	var ws []storage.Watcher
	for i := 0; i < watchers; i++ {
		w, err := e.s.Watch(e.ctx, storage.WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	for i := 1; i <= n; i++ {
		if _, err := e.s.Create(e.ctx, event("default", "e"+strconv.Itoa(100+i)), storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	late, err := e.s.Watch(e.ctx, storage.WatchOptions{Revision: rev(t, first.ResourceVersion)})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Stop()
	for _, w := range append(ws, late) {
		for i := 1; i <= n; i++ {
			select {
			case ev := <-w.ResultChan():
				if want := "e" + strconv.Itoa(100+i); ev.Type != watch.Added || ev.Object.Name != want {
					t.Fatalf("got %s %v, want ADDED %s", ev.Type, ev.Object, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("event %d missing", i)
			}
		}
	}
	if n := e.s.CatchUpWatches(); n != 1 {
		t.Fatalf("%d catch-up watches, want 1 (the watcher that started before the ring)", n)
	}
	// Back within the ring, the late watcher follows the shared watch.
	if _, err := e.s.Create(e.ctx, event("default", "after"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-late.ResultChan():
		if ev.Object == nil || ev.Object.Name != "after" {
			t.Fatalf("got %+v, want ADDED after", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after the catch-up")
	}
	if n := e.s.CatchUpWatches(); n != 1 {
		t.Fatalf("%d catch-up watches after it caught up, want 1", n)
	}
}
