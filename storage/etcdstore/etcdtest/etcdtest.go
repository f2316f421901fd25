// Package etcdtest runs etcd in-process for tests: a single member on
// loopback with fsync off and short heartbeats.
package etcdtest

import (
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds how long a test waits for its etcd.
const StartTimeout = 30 * time.Second

// ports remembers the client and peer ports of each data directory, so
// that an etcd restarted over a directory keeps its member's URLs.
var ports = struct {
	sync.Mutex
	m map[string][2]int
}{m: map[string][2]int{}}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a single-member etcd in-process on loopback with its data
// under dir (fsync off: durability is not under test here), with short
// heartbeats so that its minimum lease TTL is one second, and returns it
// with its client URL. Started again over the same dir, it keeps its
// ports and data. The caller closes it.
func Start(t testing.TB, dir string) (*embed.Etcd, string) {
	t.Helper()
	return start(t, dir, nil, Options{})
}

// Options are settings of StartWith beyond Start's.
type Options struct {
	// QuotaBackendBytes is etcd's --quota-backend-bytes: the size of its
	// database past which it refuses writes with "database space
	// exceeded" and raises the NOSPACE alarm. 0 is etcd's default, 2 GiB.
	QuotaBackendBytes int64
}

// StartWith is Start with opts.
func StartWith(t testing.TB, dir string, opts Options) (*embed.Etcd, string) {
	t.Helper()
	return start(t, dir, nil, opts)
}

// TLSFiles are the PEM files of an etcd started with StartTLS: the CA that
// signed its serving certificate, and a client certificate and key it
// accepts.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// StartTLS is Start with TLS on the client URL (https) and client
// certificates required, signed by a CA generated under dir.
func StartTLS(t testing.TB, dir string) (*embed.Etcd, string, TLSFiles) {
	t.Helper()
	files, server := writeCerts(t, dir)
	e, u := start(t, dir, &transport.TLSInfo{CertFile: server.CertFile, KeyFile: server.KeyFile,
		TrustedCAFile: files.CAFile, ClientCertAuth: true}, Options{})
	return e, u, files
}

func start(t testing.TB, dir string, tlsInfo *transport.TLSInfo, opts Options) (*embed.Etcd, string) {
	t.Helper()
	ports.Lock()
	p, ok := ports.m[dir]
	if !ok {
		p = [2]int{freePort(t), freePort(t)}
		ports.m[dir] = p
	}
	ports.Unlock()
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p[0])}
	if tlsInfo != nil {
		cu.Scheme = "https"
	}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p[1])}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if tlsInfo != nil {
		cfg.ClientTLSInfo = *tlsInfo
	}
	cfg.UnsafeNoFsync = true
	cfg.QuotaBackendBytes = opts.QuotaBackendBytes
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(StartTimeout):
		e.Close()
		t.Fatal("etcd not ready in time")
	}
	return e, cu.String()
}

// Watchers is etcd's own count of its open watchers
// (etcd_debugging_mvcc_watcher_total), which the etcds this package starts
// in the test process register with Prometheus' default registry: summed
// over every such etcd, so tests comparing it must not run in parallel
// with other etcd tests.
func Watchers(t testing.TB) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_debugging_mvcc_watcher_total" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("etcd_debugging_mvcc_watcher_total not registered")
	return 0
}
