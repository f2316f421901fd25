// Package etcdproc runs clusters of real etcd server processes on
// loopback for tests, which a test can kill with SIGKILL (a crash, not an
// in-process stop) and restart over the same data and ports. The etcd
// binary is built from the go.etcd.io/etcd/server/v3 that go.mod
// requires, once per test binary, and cached in the user's cache
// directory.
package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	// HeartbeatMs and ElectionMs are the members' --heartbeat-interval
	// and --election-timeout: half of etcd's defaults (100 and 1000), so
	// that a killed leader is replaced within a second or two, with
	// etcd's recommended ten heartbeats per election timeout, so that a
	// busy test machine does not start elections for nothing.
	HeartbeatMs = 50
	ElectionMs  = 500

	// StartTimeout bounds how long Start and Restart wait for members to
	// be healthy, and Kill for a process to end.
	StartTimeout = 30 * time.Second

	// statusTimeout bounds each member status request.
	statusTimeout = time.Second

	// logTailLines is how much of each member's log a failed test prints.
	logTailLines = 200
)

// Cluster is a cluster of real etcd processes on loopback, each with its
// own data directory, ports and log file.
type Cluster struct {
	t       testing.TB
	bin     string
	members []*member
}

// member is one etcd process's settings and state.
type member struct {
	name      string
	clientURL string
	args      []string
	logPath   string

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil until started
	done chan struct{} // closed when cmd has ended
}

// Start builds (or finds) the etcd binary and starts an n-member cluster
// of etcd processes with their data under t.TempDir(), waiting until each
// is healthy and a leader is elected. The test is skipped, saying why,
// when the etcd server module is neither in the module cache nor
// downloadable (ErrNoModule), and fails when
// etcd cannot be built or started otherwise. Every member is killed when
// the test ends; if it failed, the tails of their logs are printed.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin, err := Binary()
	if errors.Is(err, ErrNoModule) {
		t.Skipf("etcdproc: cannot build a real etcd: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Cluster{t: t, bin: bin}
	var initial []string
	peers := make([]string, n)
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		cu := "http://" + freeAddr(t)
		peers[i] = "http://" + freeAddr(t)
		c.members = append(c.members, &member{
			name:      name,
			clientURL: cu,
			logPath:   filepath.Join(dir, name+".log"),
			args: []string{
				"--name", name,
				"--data-dir", filepath.Join(dir, name),
				"--listen-client-urls", cu, "--advertise-client-urls", cu,
				"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
				"--initial-cluster-state", "new",
				"--initial-cluster-token", "etcdproc",
				"--heartbeat-interval", strconv.Itoa(HeartbeatMs),
				"--election-timeout", strconv.Itoa(ElectionMs),
			},
		})
		initial = append(initial, name+"="+peers[i])
	}
	for _, m := range c.members {
		// Ignored by etcd when it restarts over its data.
		m.args = append(m.args, "--initial-cluster", strings.Join(initial, ","))
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.Kill(i)
		}
		if t.Failed() {
			for _, m := range c.members {
				t.Logf("etcd %s log (last %d lines, %s):\n%s", m.name, logTailLines, m.logPath, tail(m.logPath, logTailLines))
			}
		}
	})
	// Each member waits for a quorum before it serves: start them all,
	// then wait.
	for i := range c.members {
		c.launch(i)
	}
	c.WaitHealthy(c.all()...)
	return c
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (c *Cluster) all() []int {
	out := make([]int, len(c.members))
	for i := range out {
		out[i] = i
	}
	return out
}

// launch starts member i's process, its output appended to its log file.
func (c *Cluster) launch(i int) {
	c.t.Helper()
	m := c.members[i]
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("start etcd %s: %v", m.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
}

// Endpoints are the client URLs of all members, running or not.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.clientURL
	}
	return out
}

// Endpoint is member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.members[i].clientURL }

// PID is the process id of member i's current process.
func (c *Cluster) PID(i int) int {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd.Process.Pid
}

// Running reports whether member i's process is running.
func (c *Cluster) Running(i int) bool {
	m := c.members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// status asks member i alone for its status.
func (c *Cluster) status(ctx context.Context, i int) (*clientv3.StatusResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.members[i].clientURL}, DialTimeout: statusTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return cli.Status(sctx, c.members[i].clientURL)
}

// Leader is the index of the member that the running members answering
// a status request agree is the leader (a clientv3 Status on each), or an
// error when none answers or they do not agree on a running leader.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	ids := map[uint64]int{}
	leaders := map[uint64]bool{}
	var errs []error
	for i := range c.members {
		if !c.Running(i) {
			continue
		}
		st, err := c.status(ctx, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.members[i].name, err))
			continue
		}
		ids[st.Header.MemberId] = i
		leaders[st.Leader] = true
	}
	if len(leaders) != 1 {
		return -1, fmt.Errorf("etcdproc: members see leaders %v: %w", leaders, errors.Join(errs...))
	}
	for lead := range leaders {
		if i, ok := ids[lead]; ok && lead != 0 {
			return i, nil
		}
	}
	return -1, fmt.Errorf("etcdproc: no running member is the leader: %w", errors.Join(errs...))
}

// WaitHealthy waits until each of members answers a linearizable read
// (which needs a leader and a quorum), failing the test after
// StartTimeout.
func (c *Cluster) WaitHealthy(members ...int) {
	c.t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for _, i := range members {
		m := c.members[i]
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL}, DialTimeout: statusTimeout, Logger: zap.NewNop()})
		if err != nil {
			c.t.Fatal(err)
		}
		for {
			ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(context.Background()), statusTimeout)
			_, err = cli.Get(ctx, "health")
			cancel()
			if err == nil {
				break
			}
			if !c.Running(i) || time.Now().After(deadline) {
				cli.Close()
				c.t.Fatalf("etcd %s at %s not healthy (running: %v): %v\n%s", m.name, m.clientURL, c.Running(i), err, tail(m.logPath, logTailLines))
			}
			time.Sleep(20 * time.Millisecond)
		}
		cli.Close()
	}
}

// Kill sends member i's process SIGKILL, as a crash would, and waits for
// it to end. A member not running is left alone.
func (c *Cluster) Kill(i int) {
	m := c.members[i]
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(StartTimeout):
		c.t.Errorf("etcd %s (pid %d) did not end within %v of SIGKILL", m.name, cmd.Process.Pid, StartTimeout)
	}
}

// Restart starts killed member i again over its data directory and
// ports, and waits until it is healthy (which needs a quorum running).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Running(i) {
		c.t.Fatalf("etcd %s is running", c.members[i].name)
	}
	c.launch(i)
	c.WaitHealthy(i)
}

// tail is the last n lines of the file at path, or why it cannot be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
