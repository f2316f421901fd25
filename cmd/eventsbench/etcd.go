package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
)

// Settings of the benchmark's etcd. Everything else is etcd's default
// (fsync on, --snapshot-count 10000, --max-txn-ops 128,
// --max-request-bytes 1.5 MiB, no auto-compaction: eventsd, as
// kube-apiserver, compacts every 5 minutes).
const (
	// defaultEtcdQuotaBytes is --quota-backend-bytes: etcd's largest
	// suggested quota (8 GiB). One million events with their revision
	// history take 1–2 GB of bbolt database; etcd's 2 GiB default could
	// raise the NOSPACE alarm mid-fill.
	defaultEtcdQuotaBytes = 8 << 30
	// etcdStartTimeout bounds how long the etcd subcommand waits for its
	// member to be ready (replaying a large WAL takes a while).
	etcdStartTimeout = 2 * time.Minute
	// etcdStopTimeout bounds a graceful stop.
	etcdStopTimeout = 30 * time.Second
)

// etcdURLRE matches the line the etcd subcommand prints once it serves.
var etcdURLRE = regexp.MustCompile(`^etcd serving at (http://\S+)`)

// etcdConfig configures the etcd subcommand.
type etcdConfig struct {
	// DataDir is etcd's --data-dir.
	DataDir string
	// ListenClient and ListenPeer are loopback URLs; port 0 picks a free
	// port.
	ListenClient, ListenPeer string
	// QuotaBackendBytes is etcd's --quota-backend-bytes
	// (defaultEtcdQuotaBytes).
	QuotaBackendBytes int64
	// UnsafeNoFsync is etcd's --unsafe-no-fsync: for tests only, never
	// for reported figures.
	UnsafeNoFsync bool
	// LogLevel is etcd's --log-level (warn).
	LogLevel string
}

func newEtcdCommand() *cobra.Command {
	cfg := etcdConfig{ListenClient: "http://127.0.0.1:0", ListenPeer: "http://127.0.0.1:0", QuotaBackendBytes: defaultEtcdQuotaBytes, LogLevel: "warn"}
	cmd := &cobra.Command{
		Use:    "etcd",
		Short:  "Run a single-member etcd (go.etcd.io/etcd/server/v3/embed) until signalled",
		Hidden: true,
		Long: `etcd runs a single-member etcd on loopback in this process, so that run can
start it as a child and measure its CPU time and memory apart from eventsd's.
It prints "etcd serving at URL" once the member is ready, and stops on SIGTERM
or SIGINT. Settings are etcd's defaults (fsync on, snapshot count 10000) but
--quota-backend-bytes (8 GiB, room for 1M events and their history).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEtcd(cmd.Context(), cfg, func(u string) { fmt.Fprintf(cmd.OutOrStdout(), "etcd serving at %s\n", u) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "", "etcd's data directory.")
	f.StringVar(&cfg.ListenClient, "listen-client", cfg.ListenClient, "Client URL (loopback); port 0 picks a free one.")
	f.StringVar(&cfg.ListenPeer, "listen-peer", cfg.ListenPeer, "Peer URL (loopback); port 0 picks a free one.")
	f.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", cfg.QuotaBackendBytes, "etcd's --quota-backend-bytes.")
	f.BoolVar(&cfg.UnsafeNoFsync, "unsafe-no-fsync", false, "etcd's --unsafe-no-fsync (tests only: figures without fsync are not etcd's).")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "etcd's --log-level.")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

// resolvePort returns raw as a URL, with port 0 replaced by a free
// loopback port.
func resolvePort(raw string) (url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return url.URL{}, err
	}
	if u.Port() != "0" {
		return *u, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	if err != nil {
		return url.URL{}, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return url.URL{}, err
	}
	u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	return *u, nil
}

// runEtcd runs the member until ctx ends, calling serving with its client
// URL once it is ready.
func runEtcd(ctx context.Context, cfg etcdConfig, serving func(clientURL string)) error {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	cu, err := resolvePort(cfg.ListenClient)
	if err != nil {
		return fmt.Errorf("--listen-client: %w", err)
	}
	pu, err := resolvePort(cfg.ListenPeer)
	if err != nil {
		return fmt.Errorf("--listen-peer: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = "bench"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.LogLevel = cfg.LogLevel
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			e.Close()
		}
	}()
	timer := time.NewTimer(etcdStartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-timer.C:
		return fmt.Errorf("etcd not ready within %s", etcdStartTimeout)
	case <-ctx.Done():
		return nil
	}
	serving(cu.String())
	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-ctx.Done():
	}
	closed = true
	stopped := make(chan struct{})
	go func() { e.Close(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(etcdStopTimeout):
		return fmt.Errorf("etcd did not stop within %s", etcdStopTimeout)
	}
	return nil
}

// etcdProc says how the benchmark runs etcd: this program's "etcd"
// subcommand (embedded etcd) or an etcd binary, with the same settings.
type etcdProc struct {
	// Self is this program, run as "Self etcd" when Binary is empty.
	Self, Binary string
	Quota        int64
	NoFsync      bool
	// StartTimeout bounds the wait for it to serve and be healthy
	// (childStartTimeout when 0): etcd over a large existing database
	// replays and indexes it first.
	StartTimeout time.Duration
}

func (cfg *runConfig) etcdProc(self string) etcdProc {
	return etcdProc{Self: self, Binary: cfg.EtcdBinary, Quota: cfg.EtcdQuotaBytes, NoFsync: cfg.EtcdUnsafeNoFsync}
}

// etcdBinaryURLRE matches the line an etcd binary logs (at info level)
// once it serves clients; its group is host:port.
var etcdBinaryURLRE = regexp.MustCompile(`"msg":"serving client traffic insecurely; this is strongly discouraged!".*"address":"([^"]+)"`)

// describe says how etcd runs, for reports.
func (p etcdProc) describe() string {
	what := "go.etcd.io/etcd/server/v3/embed in eventsbench"
	if p.Binary != "" {
		what = homeRelative(p.Binary)
		if out, err := exec.Command(p.Binary, "--version").Output(); err == nil {
			what += " (" + strings.Join(strings.Fields(strings.SplitN(string(out), "\n", 2)[0]), " ") + ")"
		}
	}
	s := fmt.Sprintf("single member on loopback in its own process (%s), --quota-backend-bytes=%d, otherwise etcd's defaults (--snapshot-count=10000, fsync on)", what, p.Quota)
	if p.NoFsync {
		s += "; --unsafe-no-fsync (not for reported figures)"
	}
	return s
}

// start starts etcd over dataDir as a child.
func (p etcdProc) start(ctx context.Context, dataDir string) (*child, error) {
	if p.Binary == "" {
		args := []string{"etcd", "--data-dir", dataDir, "--quota-backend-bytes", strconv.FormatInt(p.Quota, 10)}
		if p.NoFsync {
			args = append(args, "--unsafe-no-fsync")
		}
		return startChild(ctx, "etcd", p.Self, args, etcdURLRE, "/health")
	}
	cu, err := resolvePort("http://127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	pu, err := resolvePort("http://127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	args := []string{"--name", "bench", "--data-dir", dataDir,
		"--listen-client-urls", cu.String(), "--advertise-client-urls", cu.String(),
		"--listen-peer-urls", pu.String(), "--initial-advertise-peer-urls", pu.String(),
		"--initial-cluster", "bench=" + pu.String(), "--initial-cluster-state", "new",
		"--quota-backend-bytes", strconv.FormatInt(p.Quota, 10), "--log-level", "info"}
	if p.NoFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	timeout := p.StartTimeout
	if timeout <= 0 {
		timeout = childStartTimeout
	}
	return startChildWithin(ctx, timeout, "etcd", p.Binary, args, etcdBinaryURLRE, "http", "/health")
}
