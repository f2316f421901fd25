package server_test

import (
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/metricstest"
	"testing"
	"time"

	"github.com/kubevents/kubevents/retention"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// retentionRules are the example: Warning events kept 7 days,
// namespace prod 24 hours, everything else the default --event-ttl.
var retentionRules = &retention.Configuration{
	TypeMeta: metav1.TypeMeta{APIVersion: retention.ConfigurationAPIVersion, Kind: retention.ConfigurationKind},
	Rules: []retention.Rule{
		{Name: "warnings", Criteria: eventapi.Criteria{Types: []string{corev1.EventTypeWarning}}, TTL: "168h"},
		{Criteria: eventapi.Criteria{Namespaces: []string{"prod"}}, TTL: "24h"},
	},
}

// TestRetentionRulesOnFakeClock: each write's TTL is its event's first
// matching retention rule's (or the default), taken again at every write;
// the rule choosing it is counted.
func TestRetentionRulesOnFakeClock(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Retention = retentionRules
		c.Registry = reg
	})
	create := func(ns, name, typ string) *corev1.Event {
		t.Helper()
		ev, err := e.cs.CoreV1().Events(ns).Create(e.ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: ns},
			Reason:         "Started", Message: "started", Type: typ,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	// nextDeleted is the name of the next event the watch sees expire.
	long := int64(10 * 24 * 3600) // the watch timeout runs on the same fake clock
	w, err := e.cs.CoreV1().Events("").Watch(e.ctx, metav1.ListOptions{ResourceVersion: "0", TimeoutSeconds: &long})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	nextDeleted := func() string {
		t.Helper()
		for {
			ev, ok := e.next(w, 0)
			if !ok {
				t.Fatal("watch closed")
			}
			if ev.Type == watch.Deleted {
				return ev.Object.(*corev1.Event).Name
			}
		}
	}
	exists := func(ns, name string) {
		t.Helper()
		if _, err := e.cs.CoreV1().Events(ns).Get(e.ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s/%s expired early: %v", ns, name, err)
		}
	}

	create("default", "normal", corev1.EventTypeNormal)   // default: 1h
	create("default", "warning", corev1.EventTypeWarning) // warnings: 168h
	create("prod", "warning", corev1.EventTypeWarning)    // warnings first: 168h
	create("prod", "normal", corev1.EventTypeNormal)      // rule 1: 24h

	e.clock.Step(time.Hour + time.Second)
	if got := nextDeleted(); got != "normal" {
		t.Fatalf("%s expired first, want default/normal at the default TTL", got)
	}
	exists("prod", "normal")
	exists("default", "warning")

	// A write restarts the TTL its rule gives: prod/normal now lives
	// until 25h+1s.
	if _, err := e.cs.CoreV1().Events("prod").Patch(e.ctx, "normal", types.MergePatchType,
		[]byte(`{"message":"again"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(22*time.Hour + 500*time.Millisecond)
	// The sentinel expires at 24h+1.5s, after prod/normal's first TTL
	// would have: it being the next to expire shows that one was restarted.
	create("default", "sentinel", corev1.EventTypeNormal)
	e.clock.Step(time.Hour)
	if got := nextDeleted(); got != "sentinel" {
		t.Fatalf("%s expired at 24h+1.5s, want only the sentinel", got)
	}
	exists("prod", "normal")
	e.clock.Step(time.Hour)
	if got := nextDeleted(); got != "normal" {
		t.Fatalf("%s expired at 25h+1.5s, want prod/normal", got)
	}
	exists("default", "warning")
	exists("prod", "warning")

	e.clock.Step(167*time.Hour - 25*time.Hour - 2*time.Second) // 167h - 0.5s: a Warning's 7 days not yet passed
	exists("default", "warning")
	e.clock.Step(time.Hour + time.Second)
	got := map[string]bool{nextDeleted(): true, nextDeleted(): true}
	if !got["warning"] || len(got) != 1 {
		t.Fatalf("expired %v after 7 days, want the two Warning events", got)
	}

	for rule, want := range map[string]float64{"warnings": 2, "1": 2, retention.DefaultRuleName: 2} {
		if n := metricstest.Sum(t, reg, "eventsd_retention_rule_writes_total", "rule", rule); n != want {
			t.Errorf("eventsd_retention_rule_writes_total{rule=%q} = %v, want %v", rule, n, want)
		}
	}
}

// TestRetentionReportingController: a rule's reportingControllers match
// events.k8s.io/v1 writes by reportingController and core/v1 writes by
// source.component.
func TestRetentionReportingController(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Retention = &retention.Configuration{Rules: []retention.Rule{
			{Name: "controllers", Criteria: eventapi.Criteria{ReportingControllers: []string{"example.com/ctl", "kubelet"}}, TTL: "10m"},
		}}
		c.Registry = reg
	})
	now := metav1.NewMicroTime(e.clock.Now())
	if _, err := e.cs.EventsV1().Events("default").Create(e.ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "v1"}, EventTime: now,
		Regarding:           corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
		ReportingController: "example.com/ctl", ReportingInstance: "ctl-1",
		Action: "Sync", Reason: "Synced", Note: "n", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, component := range map[string]string{"core": "kubelet", "other": "scheduler"} {
		if _, err := e.cs.CoreV1().Events("default").Create(e.ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason:         "Started", Message: "m", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: component},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := metricstest.Sum(t, reg, "eventsd_retention_rule_writes_total", "rule", "controllers"); n != 2 {
		t.Errorf("writes by rule controllers: %v, want 2 (events.k8s.io reportingController, core/v1 source.component)", n)
	}
	if n := metricstest.Sum(t, reg, "eventsd_retention_rule_writes_total", "rule", retention.DefaultRuleName); n != 1 {
		t.Errorf("writes by the default: %v, want 1 (source scheduler)", n)
	}
}

// TestRetentionRuleNamingCluster: with a fleet, a rule naming cluster
// east gives east's events its TTL and not west's, whose events keep the
// default, nor the root cluster's, which a rule naming "" gives its own;
// writes are counted by the rule chosen in their cluster, the mirror's
// (CountClusterRetentionWrite) as the API's.
func TestRetentionRuleNamingCluster(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Clusters = []server.Cluster{{Name: "east"}, {Name: "west"}}
		c.Retention = &retention.Configuration{
			TypeMeta: metav1.TypeMeta{APIVersion: retention.ConfigurationAPIVersion, Kind: retention.ConfigurationKind},
			Rules: []retention.Rule{
				{Name: "east", Clusters: []string{"east"}, TTL: "24h"},
				{Name: "root", Clusters: []string{""}, TTL: "3h"},
			},
		}
		c.Registry = reg
	})
	w, err := e.store.Watch(e.ctx, storage.WatchOptions{Revision: e.store.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for cs, msg := range map[kubernetes.Interface]string{clusterClient(t, e.url, "east"): "east", clusterClient(t, e.url, "west"): "west", e.cs: "root"} {
		if _, err := cs.CoreV1().Events("shop").Create(e.ctx, fleetEvent("same", msg), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create in %s: %v", msg, err)
		}
	}
	// nextExpired is the storage namespace of the next event to expire.
	nextExpired := func() string {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok || ev.Err != nil {
					t.Fatalf("store watch ended: %v", ev.Err)
				}
				if ev.Type == watch.Deleted {
					return ev.Object.Namespace
				}
			case <-deadline:
				t.Fatal("nothing expired within 10s")
			}
		}
	}
	e.clock.Step(time.Hour + time.Second)
	if got := nextExpired(); got != "~west~shop" {
		t.Fatalf("%s expired at the default TTL, want west's event only", got)
	}
	e.clock.Step(2 * time.Hour)
	if got := nextExpired(); got != "shop" {
		t.Fatalf("%s expired at 3h, want the root cluster's event (rule root)", got)
	}
	e.clock.Step(21 * time.Hour)
	if got := nextExpired(); got != "~east~shop" {
		t.Fatalf("%s expired at 24h, want east's event (rule east)", got)
	}

	e.srv.CountClusterRetentionWrite("east", fleetEvent("mirrored", "east"))
	e.srv.CountClusterRetentionWrite("west", fleetEvent("mirrored", "west"))
	e.srv.CountRetentionWrite(fleetEvent("mirrored", "root"))
	for rule, want := range map[string]float64{"east": 2, "root": 2, retention.DefaultRuleName: 2} {
		if n := metricstest.Sum(t, reg, "eventsd_retention_rule_writes_total", "rule", rule); n != want {
			t.Errorf("eventsd_retention_rule_writes_total{rule=%q} = %v, want %v", rule, n, want)
		}
	}
}
