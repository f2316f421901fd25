package etcdstore_test

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdStartTimeout bounds how long a test waits for its etcd.
const etcdStartTimeout = 30 * time.Second

// ports remembers the client and peer ports of each data directory, so
// that an etcd restarted over a directory keeps its member's URLs.
var ports = struct {
	sync.Mutex
	m map[string][2]int
}{m: map[string][2]int{}}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd runs a single-member etcd in-process on loopback with its data
// under dir (fsync off: durability is not under test here), with short
// heartbeats so that its minimum lease TTL is one second.
func startEtcd(t *testing.T, dir string) (*embed.Etcd, string) {
	t.Helper()
	ports.Lock()
	p, ok := ports.m[dir]
	if !ok {
		p = [2]int{freePort(t), freePort(t)}
		ports.m[dir] = p
	}
	ports.Unlock()
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p[0])}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p[1])}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(etcdStartTimeout):
		e.Close()
		t.Fatal("etcd not ready in time")
	}
	return e, cu.String()
}
