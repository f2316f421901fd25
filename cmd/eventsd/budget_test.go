package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestMaxStorageBytesFlag: --max-storage-bytes takes integers and
// Kubernetes quantities, and refuses the rest.
func TestMaxStorageBytesFlag(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "65536": 65536, "64Ki": 64 << 10, "10Gi": 10 << 30, "1M": 1_000_000} {
		var q quantityBytes
		if err := q.Set(in); err != nil || int64(q) != want {
			t.Errorf("%q: %d, %v; want %d", in, q, err, want)
		}
	}
	for _, in := range []string{"-1", "1.5", "ten", "100m", ""} {
		var q quantityBytes
		if err := q.Set(in); err == nil {
			t.Errorf("%q accepted as %d bytes", in, q)
		}
	}
}

// metricValue reads one sample of /metrics (name with its labels, as
// printed); ok is false when it is absent.
func metricValue(t *testing.T, addr, sample string) (v float64, ok bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), sample+" "); found {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v, true
		}
	}
	return 0, false
}

// TestMaxStorageBytes: eventsd with a budget far smaller than what is
// written accepts every create (never 507), expires the events closest to
// their expiry early, telling watchers (DELETED), and counts them by
// retention rule in /metrics; on either backend.
func TestMaxStorageBytes(t *testing.T) {
	t.Run("pebble", func(t *testing.T) {
		testMaxStorageBytes(t, "--data-dir", t.TempDir())
	})
	t.Run("etcd", func(t *testing.T) {
		e, endpoint := etcdtest.Start(t, t.TempDir())
		defer e.Close()
		testMaxStorageBytes(t, "--storage-backend", "etcd", "--etcd-servers", endpoint)
	})
}

func testMaxStorageBytes(t *testing.T, backend ...string) {
	const budget = 64 << 10
	addr, stop := runEventsd(t, append(backend, "--max-storage-bytes", "64Ki",
		"--retention-config", writeFile(t, "retention.yaml", exampleRetention))...)
	defer stop()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr, QPS: -1})
	w, err := cs.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 1000 // about 400 bytes each: six times the budget
	for i := range n {
		if _, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%04d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", UID: "u"},
			Reason:         "Started", Message: strings.Repeat("m", 200), Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %d under the budget: %v", i, err)
		}
	}
	// Once every write is measured, the bytes are within the budget and
	// the events left and those counted add up. (A round of early expiry
	// ends at the low-water mark, 90% of the budget, but writes that land
	// after it add up to the budget again without starting another: the
	// rounds run beside the writes, and storage/budget/budgettest checks
	// the mark itself, one write at a time.)
	var list *corev1.EventList
	var expired int
	deadline := time.Now().Add(readyTimeout)
	for {
		b, _ := metricValue(t, addr, "eventsd_storage_budget_bytes")
		var err error
		if list, err = cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		counted, _ := metricValue(t, addr, `eventsd_storage_budget_expirations_total{rule="default"}`)
		expired = n - len(list.Items)
		if b > 0 && b <= budget && int(counted) == expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("eventsd_storage_budget_bytes %v (budget %d), %d events left, %v expirations counted of %d written",
				b, budget, len(list.Items), counted, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if expired <= 0 || len(list.Items) == 0 {
		t.Fatalf("%d of %d events left", len(list.Items), n)
	}
	// All have --event-ttl (no rule matched): the earliest written expire
	// first (on etcd: they share leases, the earliest granted first), so
	// the ones left are the last written.
	for i, ev := range list.Items {
		if want := fmt.Sprintf("e%04d", expired+i); ev.Name != want {
			t.Fatalf("event %d left is %s, want %s: not the latest written", i, ev.Name, want)
		}
	}
	if got, _ := metricValue(t, addr, "eventsd_storage_budget_limit_bytes"); got != budget {
		t.Errorf("eventsd_storage_budget_limit_bytes = %v, want %d", got, budget)
	}
	deleted := 0
	timeout := time.After(readyTimeout)
	for deleted < expired {
		select {
		case e := <-w.ResultChan():
			if e.Type == watch.Deleted {
				if ev := e.Object.(*corev1.Event); ev.Name != fmt.Sprintf("e%04d", deleted) {
					t.Fatalf("DELETED %s, want e%04d", ev.Name, deleted)
				}
				deleted++
			}
		case <-timeout:
			t.Fatalf("%d DELETED, want %d", deleted, expired)
		}
	}
}
