package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// nospaceQuotaBytes is the etcd quota of TestEtcdNoSpace: small enough
// that a few filler puts reach it, larger than a fresh etcd's database.
const nospaceQuotaBytes = 1 << 20

// fillTimeout bounds TestEtcdNoSpace's filling of etcd, which takes well
// under a second.
const fillTimeout = 15 * time.Second

// TestEtcdNoSpace: once etcd's database reaches its quota (the NOSPACE
// alarm raised), a create through an etcd-backed server gets 507
// Insufficient Storage, as pebble's full disk does, not 500, with a
// message naming etcd, "database space exceeded" and etcd's remedy; reads
// still work and /readyz fails with the same reason, as it does on a full
// disk. Once an operator frees space and disarms the alarm, /readyz
// passes and writes succeed again, without a restart.
func TestEtcdNoSpace(t *testing.T) {
	e, endpoint := etcdtest.StartWith(t, t.TempDir(), etcdtest.Options{QuotaBackendBytes: nospaceQuotaBytes})
	t.Cleanup(func() { e.Close() })
	log := slog.New(slog.DiscardHandler)
	storeClock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := etcdstore.Open(etcdstore.Options{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout,
		CompactionInterval: -1, Clock: storeClock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	url, cs := serveStore(t, store)
	probe := func() (int, string) {
		storeClock.Step(2 * time.Second) // past the store's health cache
		return readyz(t, url)
	}
	if code, body := probe(); code != http.StatusOK {
		t.Fatalf("/readyz before etcd is full: %d %q", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := cs.CoreV1().Events("default")
	mk := func(name string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason: "Started", Message: "message of " + name, Type: corev1.EventTypeNormal}
	}
	if _, err := events.Create(ctx, mk("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Fill etcd beside the events (another resource in a shared etcd)
	// until it refuses a put. etcd checks its quota against the size of
	// its database file, which grows when its backend commits (every
	// 100 ms): a fast writer overshoots the quota for a while.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	filler := strings.Repeat("x", 64<<10)
	fillUntil := time.Now().Add(fillTimeout)
	for i := 0; ; i++ {
		if time.Now().After(fillUntil) {
			t.Fatalf("etcd took %d puts of %d bytes in %v without refusing one", i, len(filler), fillTimeout)
		}
		_, err := cli.Put(ctx, fmt.Sprintf("/registry/fillers/%d", i), filler)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("filler put %d: %v", i, err)
		}
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil || len(alarms.Alarms) != 1 || alarms.Alarms[0].Alarm != etcdserverpb.AlarmType_NOSPACE {
		t.Fatalf("etcd's alarms once full: %v %v", alarms, err)
	}

	// A create: 507 with a Status that says why and what to do.
	body, _ := json.Marshal(mk("after"))
	resp, err := http.Post(url+"/api/v1/namespaces/default/events", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st metav1.Status
	_ = json.Unmarshal(raw, &st)
	if resp.StatusCode != http.StatusInsufficientStorage || st.Kind != "Status" || st.Code != http.StatusInsufficientStorage {
		t.Fatalf("create with etcd's NOSPACE alarm raised: %d %s", resp.StatusCode, raw)
	}
	for _, want := range []string{"etcd at " + endpoint, "database space exceeded", "NOSPACE", "etcdctl compact", "etcdctl defrag", "etcdctl alarm disarm"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("the 507's message lacks %q: %s", want, st.Message)
		}
	}
	// Through client-go's events.k8s.io/v1 too.
	newEv := `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"after-new"},"eventTime":"2026-01-01T00:00:00.000000Z",` +
		`"reportingController":"ctrl","reportingInstance":"i","action":"Start","reason":"Started","type":"Normal","regarding":{"kind":"Pod","name":"web","namespace":"default"}}`
	var code int
	err = cs.EventsV1().RESTClient().Post().Namespace("default").Resource("events").
		SetHeader("Content-Type", "application/json").Body([]byte(newEv)).Do(ctx).StatusCode(&code).Error()
	if code != http.StatusInsufficientStorage || !strings.Contains(fmt.Sprint(err), "database space exceeded") {
		t.Errorf("events.k8s.io/v1 create with the NOSPACE alarm raised: %d %v, want 507", code, err)
	}

	// Reads still work; nothing of the refused creates was written.
	got, err := events.Get(ctx, "before", metav1.GetOptions{})
	if err != nil || got.Message != "message of before" {
		t.Fatalf("get with the NOSPACE alarm raised: %+v %v", got, err)
	}
	l, err := events.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "before" {
		t.Fatalf("list with the NOSPACE alarm raised: %+v %v", l, err)
	}

	// Not ready while the alarm is raised, saying why, as the writes do.
	code, readyBody := probe()
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the NOSPACE alarm raised: %d %q, want 503", code, readyBody)
	}
	for _, want := range []string{"etcd at " + endpoint, "database space exceeded", "NOSPACE", "etcdctl alarm disarm"} {
		if !strings.Contains(readyBody, want) {
			t.Errorf("/readyz's answer lacks %q: %s", want, readyBody)
		}
	}

	// The operator's remedy: delete, compact, defragment, disarm. Freeing
	// space alone is not enough: etcd refuses writes until the alarm is
	// disarmed, and so /readyz still fails.
	if _, err := cli.Delete(ctx, "/registry/fillers/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	cur, err := cli.Get(ctx, "/registry/fillers/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, cur.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Defragment(ctx, endpoint); err != nil {
		t.Fatal(err)
	}
	if code, body := probe(); code != http.StatusServiceUnavailable || !strings.Contains(body, "NOSPACE") {
		t.Fatalf("/readyz after freeing space, the alarm still raised: %d %q, want 503", code, body)
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: alarms.Alarms[0].MemberID, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if code, body := probe(); code != http.StatusOK {
		t.Fatalf("/readyz once the alarm is disarmed: %d %q, want 200", code, body)
	}
	if _, err := events.Create(ctx, mk("after"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create once the alarm is disarmed: %v", err)
	}
}
