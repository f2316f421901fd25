package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// exampleRetention is README's example: Warning events kept 7 days,
// namespace prod 24 hours, the rest --event-ttl.
const exampleRetention = `apiVersion: eventsd.kubevents.io/v1alpha1
kind: RetentionConfiguration
rules:
- name: warnings
  types: [Warning]
  ttl: 168h
- namespaces: [prod]
  ttl: 24h
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRetentionConfigFlag: a bad or missing --retention-config keeps
// eventsd from starting, with an error naming the flag, the file, and the
// rule and field at fault.
func TestRetentionConfigFlag(t *testing.T) {
	bad := writeFile(t, "retention.yaml", strings.Replace(exampleRetention, "ttl: 24h", "ttl: 1d", 1))
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		file string
		want []string
	}{
		{bad, []string{"--retention-config", bad, "rules[1].ttl", `"1d"`}},
		{missing, []string{"--retention-config", missing}},
	} {
		cmd := newCommand()
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "error", "--retention-config", tc.file})
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%s: eventsd accepted it", tc.file)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %s", err, w)
			}
		}
	}
}

// TestEtcdRetention: on etcd, the lease an event is attached to is granted
// for its retention rule's TTL (plus --lease-reuse-duration-seconds).
// etcd expires leases on its own wall clock, so the granted TTL is what is
// checked.
func TestEtcdRetention(t *testing.T) {
	e, endpoint := etcdtest.Start(t, t.TempDir())
	defer e.Close()
	addr, stop := runEventsd(t, "--storage-backend", "etcd", "--etcd-servers", endpoint,
		"--etcd-prefix", "/kubevents", "--etcd-compaction-interval", "0", "--lease-reuse-duration-seconds", "30",
		"--retention-config", writeFile(t, "retention.yaml", exampleRetention))
	defer stop()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: readyTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, tc := range []struct {
		ns, name, typ string
		granted       int64
	}{
		{"default", "warning", corev1.EventTypeWarning, 7*24*3600 + 30},
		{"prod", "normal", corev1.EventTypeNormal, 24*3600 + 30},
		{"default", "normal", corev1.EventTypeNormal, 3600 + 30}, // --event-ttl's default
		{"prod", "warning", corev1.EventTypeWarning, 7*24*3600 + 30},
	} {
		if _, err := cs.CoreV1().Events(tc.ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: tc.name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: tc.ns, Name: "p"},
			Reason:         "Started", Message: "m", Type: tc.typ,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(ctx, "/kubevents/events/"+tc.ns+"/"+tc.name)
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
			t.Fatalf("%s/%s in etcd: %v %v", tc.ns, tc.name, resp, err)
		}
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		if ttl.GrantedTTL != tc.granted {
			t.Errorf("%s/%s: lease granted for %ds, want %d", tc.ns, tc.name, ttl.GrantedTTL, tc.granted)
		}
	}
	// Each TTL keeps its current lease: the second Warning, after writes
	// with other TTLs, reused the first's.
	mresp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{
		"eventsd_etcd_lease_grants_total 3",
		`eventsd_retention_rule_writes_total{rule="warnings"} 2`,
		`eventsd_retention_rule_writes_total{rule="1"} 1`,
		`eventsd_retention_rule_writes_total{rule="default"} 1`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
