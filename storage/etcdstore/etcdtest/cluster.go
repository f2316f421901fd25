package etcdtest

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// clusterElectionMs is the election timeout of a Cluster's members:
// short, so that a lost leader is replaced quickly, yet ten heartbeats,
// so that a busy test machine does not make members start elections for
// nothing.
const (
	clusterTickMs     = 10
	clusterElectionMs = 200
)

// Cluster is an etcd cluster of several in-process members on loopback,
// each with its own data directory and ports, which tests can stop hard
// and restart. Writes are not fsynced: a member stopped in-process keeps
// what it wrote in the page cache, which is what a restart reads back.
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	members []*clusterMember
}

type clusterMember struct {
	cfg    *embed.Config
	e      *embed.Etcd     // nil while stopped
	closed <-chan struct{} // closed once the last stopped e has closed
}

// StartCluster starts an n-member cluster with its data under dir and
// waits until every member is ready. It is closed when the test ends.
func StartCluster(t testing.TB, dir string, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var initial []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("m%d", i)
		cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
		cfg := embed.NewConfig()
		cfg.Name = name
		cfg.Dir = filepath.Join(dir, name)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.UnsafeNoFsync = true
		cfg.TickMs, cfg.ElectionMs = clusterTickMs, clusterElectionMs
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		c.members = append(c.members, &clusterMember{cfg: cfg})
		initial = append(initial, name+"="+pu.String())
	}
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
		m.cfg.InitialClusterToken = "etcdtest-cluster"
	}
	t.Cleanup(c.Close)
	// Each member waits for a quorum before it is ready: start them all,
	// then wait.
	for i := range c.members {
		c.launch(i)
	}
	for i := range c.members {
		c.waitReady(i)
	}
	return c
}

func (c *Cluster) launch(i int) {
	c.t.Helper()
	e, err := embed.StartEtcd(c.members[i].cfg)
	if err != nil {
		c.t.Fatalf("start etcd member %d: %v", i, err)
	}
	c.mu.Lock()
	c.members[i].e = e
	c.mu.Unlock()
}

func (c *Cluster) waitReady(i int) {
	c.t.Helper()
	e := c.member(i)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(StartTimeout):
		c.t.Fatalf("etcd member %d not ready in time", i)
	}
}

func (c *Cluster) member(i int) *embed.Etcd {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].e
}

// Endpoints are the client URLs of all members, running or not.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.cfg.AdvertiseClientUrls[0].String()
	}
	return out
}

// Endpoint is member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.members[i].cfg.AdvertiseClientUrls[0].String() }

// Leader is the index of the member a running member knows as leader, or
// -1 when none knows one.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.e == nil {
			continue
		}
		lead := m.e.Server.Leader()
		for j, o := range c.members {
			if o.e != nil && uint64(o.e.Server.MemberID()) == uint64(lead) {
				return j
			}
		}
	}
	return -1
}

// Kill stops e as a crash would: its raft loop stops at once
// (HardStop), without handing leadership over, and from then on it
// answers nothing. Its listeners close in the background (etcd waits up
// to its request timeout, over 5 s, for open streams such as watches to
// end); the returned channel is closed once they have, after which e's
// ports can be used again.
func Kill(e *embed.Etcd) <-chan struct{} {
	e.Server.HardStop()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.Close()
	}()
	return closed
}

// Stop kills member i (see Kill).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if m.e == nil {
		return
	}
	m.closed = Kill(m.e)
	m.e = nil
}

// Restart starts member i again over its data directory and ports, once
// its last stop has finished closing. With wait, it returns once the
// member is ready, which needs a quorum of the cluster running.
func (c *Cluster) Restart(i int, wait bool) {
	c.t.Helper()
	c.mu.Lock()
	m := c.members[i]
	running, closed := m.e != nil, m.closed
	c.mu.Unlock()
	if running {
		c.t.Fatalf("etcd member %d is running", i)
	}
	if closed != nil {
		<-closed
	}
	c.launch(i)
	if wait {
		c.waitReady(i)
	}
}

// Close stops every running member and waits for stopped ones to have
// closed.
func (c *Cluster) Close() {
	for i := range c.members {
		c.mu.Lock()
		m := c.members[i]
		e, closed := m.e, m.closed
		m.e = nil
		c.mu.Unlock()
		if e != nil {
			e.Close()
		}
		if closed != nil {
			<-closed
		}
	}
}
