package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// readyTimeout bounds how long the test waits for eventsd to serve.
const readyTimeout = 30 * time.Second

// TestEtcdBackend runs eventsd with --storage-backend=etcd against an etcd
// on loopback: an event created through client-go is stored under
// --etcd-prefix in kube-apiserver's layout, with a lease, and reads back
// through the other API group.
func TestEtcdBackend(t *testing.T) {
	e, endpoint := etcdtest.Start(t, t.TempDir())
	defer e.Close()
	addr, stop := runEventsd(t, "--storage-backend", "etcd", "--etcd-servers", endpoint,
		"--etcd-prefix", "/kubevents", "--etcd-compaction-interval", "0", "--lease-reuse-duration-seconds", "30")
	ctx := context.Background()

	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	created, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "on-etcd"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Reason:         "Started", Message: "stored in etcd", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: readyTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/kubevents/events/default/on-etcd")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatal("the event is not under /kubevents/events/default/on-etcd")
	}
	kv := resp.Kvs[0]
	if !bytes.HasPrefix(kv.Value, []byte("k8s\x00")) || kv.Lease == 0 || created.ResourceVersion != strconv.FormatInt(kv.ModRevision, 10) {
		t.Fatalf("stored value %q..., lease %d, mod_revision %d, resourceVersion %s", kv.Value[:min(8, len(kv.Value))], kv.Lease, kv.ModRevision, created.ResourceVersion)
	}
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != 3600+30 { // --event-ttl 1h plus --lease-reuse-duration-seconds
		t.Fatalf("lease granted for %ds, want 3630", ttl.GrantedTTL)
	}
	got, err := cs.EventsV1().Events("default").Get(ctx, "on-etcd", metav1.GetOptions{})
	if err != nil || got.Note != "stored in etcd" {
		t.Fatalf("read back through events.k8s.io/v1: %+v, %v", got, err)
	}

	// The store's metrics are served with the server's.
	mresp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !bytes.Contains(body, []byte("eventsd_etcd_lease_grants_total 1")) {
		t.Fatalf("/metrics lacks eventsd_etcd_lease_grants_total 1:\n%s", body)
	}
	// eventsd's own metrics, the etcd backend's included, are all
	// eventsd_...; the rest are the Go runtime's, the process's and the
	// Prometheus handler's.
	for _, line := range strings.Split(string(body), "\n") {
		name, ok := strings.CutPrefix(line, "# TYPE ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		if !strings.HasPrefix(name, "eventsd_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("/metrics has %s: want eventsd's metrics named eventsd_...", name)
		}
	}

	stop()
}

// runEventsd runs eventsd in-process on a free loopback port with args
// and a data directory of its own (args may name another: on etcd it
// holds the on-disk index, which two processes cannot share) until stop,
// which fails the test unless eventsd exits cleanly.
func runEventsd(t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	return startEventsd(t, append([]string{"--data-dir", t.TempDir()}, args...)...)
}

// startEventsd is runEventsd without a data directory of its own: args
// give it, or eventsd's default applies.
func startEventsd(t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	return startEventsdReady(t, "/readyz", args...)
}

// startEventsdReady is startEventsd waiting for readyPath (a /readyz
// excluding some checks) to answer 200.
func startEventsdReady(t *testing.T, readyPath string, args ...string) (addr string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	cmd := newCommand()
	cmd.SetArgs(append([]string{"--listen", addr, "--log-level", "error"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()
	stop = func() {
		t.Helper()
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("eventsd exited with %v", err)
			}
		case <-time.After(readyTimeout):
			t.Fatal("eventsd did not stop")
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := http.Get("http://" + addr + readyPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, stop
			}
		}
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("eventsd exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("eventsd not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEtcdBackendTLS: --etcd-cafile, --etcd-certfile and --etcd-keyfile
// reach an etcd that serves TLS and requires client certificates.
func TestEtcdBackendTLS(t *testing.T) {
	dir := t.TempDir()
	e, endpoint, files := etcdtest.StartTLS(t, dir)
	defer e.Close()
	if !strings.HasPrefix(endpoint, "https://") {
		t.Fatalf("endpoint %s is not https", endpoint)
	}
	addr, stop := runEventsd(t, "--storage-backend", "etcd", "--etcd-servers", endpoint,
		"--etcd-cafile", files.CAFile, "--etcd-certfile", files.CertFile, "--etcd-keyfile", files.KeyFile)
	defer stop()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	ctx := context.Background()
	if _, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "over-tls"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Reason:         "Started", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := (transport.TLSInfo{CertFile: files.CertFile, KeyFile: files.KeyFile, TrustedCAFile: files.CAFile}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsConfig, DialTimeout: readyTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/registry/events/default/over-tls")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the event is not under /registry/events/default/over-tls: %v", err)
	}
}

// TestEtcdIndexFlag: an --etcd-index other than disk or memory is refused
// with an error naming the flag and its values, before etcd is reached.
func TestEtcdIndexFlag(t *testing.T) {
	cmd := newCommand()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "error",
		"--storage-backend", "etcd", "--etcd-servers", "http://127.0.0.1:1", "--etcd-index", "ssd"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), `--etcd-index: "ssd" is neither disk nor memory`) {
		t.Fatalf("--etcd-index=ssd: %v", err)
	}
}

// TestStorageBackendFlags: a backend eventsd does not know, or etcd
// without servers, is refused before anything is served.
func TestStorageBackendFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--storage-backend", "mysql"},
		{"--storage-backend", "etcd"},
		{"--storage-backend", "etcd", "--etcd-servers", "http://127.0.0.1:1", "--lease-reuse-duration-seconds", "0"},
		{"--storage-backend", "etcd", "--etcd-servers", "https://127.0.0.1:1", "--etcd-certfile", "/nonexistent"},
	} {
		cmd := newCommand()
		cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "error"}, args...))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%v: eventsd accepted it", args)
		}
	}
}

// TestDurationFlagHint: a duration flag given in days is refused with the
// same length in hours, naming the flag, before anything starts.
func TestDurationFlagHint(t *testing.T) {
	cmd := newCommand()
	dir := t.TempDir()
	cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--event-ttl", "7d"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	want := `invalid argument "7d" for "--event-ttl" flag: "7d": use hours, e.g. 168h`
	if err == nil || err.Error() != want {
		t.Fatalf("--event-ttl 7d: %v; want %s", err, want)
	}
}
