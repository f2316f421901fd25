// Package kubeapiserver runs a real kube-apiserver (upstream's, built by
// the Go toolchain from tools/kube-apiserver and cached in the user cache
// directory) over its own real etcd, on loopback, for tests, benchmarks
// and cmd/devcluster: HTTPS with a CA made here, token authentication
// (an admin in system:masters and any other users), RBAC (or another
// authorization mode), the service-account keys kube-apiserver requires,
// and optionally events in an etcd of their own
// (--etcd-servers-overrides=/events#...), as big clusters keep them. A
// test can stop, kill (SIGKILL) and restart kube-apiserver over the same
// data and port, and compact the events etcd.
//
// The first build takes about 22 CPU-minutes and 2.3 GiB of memory (11
// minutes on two idle cores, an hour on two cores loaded tenfold), ~2.7
// GiB of Go build cache and ~1 GiB of modules; the binary (119 MB) is then
// kept in the user cache directory, one build at a time across test
// binaries (buildcache's lock). A cached start (two etcds and
// kube-apiserver to /readyz) takes 5-15 s; kube-apiserver's RSS is about
// 280 MiB, each etcd's 30-45 MiB.
//
// What kube-apiserver v1.37.2 does for events, found on the real server
// (TestKubeAPIServer and TestEventsWatch assert each):
//
//   - Events have no watch cache (DefaultWatchCacheSizes sets both groups'
//     to 0): every list reads etcd and every watch is an etcd watch of its
//     own. With --etcd-servers-overrides=/events#..., both groups are in
//     the events etcd and their resourceVersions are that etcd's
//     revisions, unrelated to other resources'.
//   - WatchList works for events: a watch with sendInitialEvents=true,
//     resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true gets
//     every stored event as ADDED (read from etcd at its current
//     revision), then a BOOKMARK annotated k8s.io/initial-events-end:
//     "true" at that revision, then changes.
//   - No other BOOKMARK ever reaches a watch of events: allowWatchBookmarks
//     is accepted but the periodic bookmarks (every minute, and 2 s before
//     the watch's timeout, at a revision past the watch's start) come from
//     the watch cache; a configmaps watch with the same parameters gets
//     them. A mirror's cursor advances only with changes to events (or its
//     own re-watches), and an idle watch says nothing of the source's
//     progress.
//   - A watch from a resourceVersion that etcd has compacted is accepted
//     (200) and its first and only event is an ERROR with a Status 410,
//     reason Expired, "The resourceVersion for the provided watch is too
//     old."; a list at such a resourceVersion (resourceVersionMatch=Exact)
//     is refused on the request with 410 Expired. A watch from the
//     compaction's revision on works.
//   - A test forces a compaction with CompactEvents: etcd's Compact (with
//     WithCompactPhysical) on the events etcd at its current revision (the
//     header revision of any read). Options.EtcdCompactionInterval < 0
//     turns kube-apiserver's own (5-minute) compaction off so that only
//     the test compacts.
//   - resourceVersions survive restarts of kube-apiserver (graceful or
//     SIGKILL): they are etcd's, so a list after a restart has the same
//     uids and resourceVersions and a watch from a resourceVersion taken
//     before resumes after it with nothing missed.
//   - --event-ttl is an etcd lease per event, shared by the events written
//     within min(5% of the TTL, --lease-reuse-duration-seconds=60 s), so an
//     event lives from its TTL to its TTL plus that: with a 2 s TTL it is
//     gone 2-3 s after its creation. A watcher gets the expiry as an
//     ordinary DELETED, indistinguishable from a user's delete.
//   - An event in a namespace that does not exist is refused (404):
//     EnsureNamespace first.
//   - RBAC: a ClusterRole with list and watch of core events (group "")
//     lets a user list and watch events in every namespace and nothing
//     else.
package kubeapiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/etcdproc"
)

const (
	// AdminUser is the user of AdminToken, in group system:masters (every
	// permission, whatever the authorization mode).
	AdminUser = "admin"

	// DefaultAuthorizationMode is Options.AuthorizationMode's default:
	// RBAC, so that tests can check what a least-privilege ClusterRole
	// allows, as in a real cluster.
	DefaultAuthorizationMode = "RBAC"

	// DefaultStartTimeout is Options.StartTimeout's default. A cached
	// start takes seconds; a loaded two-core machine can take far longer.
	DefaultStartTimeout = 2 * time.Minute

	// FirstBuildTime is how much of a test binary's timeout Start wants
	// left to build kube-apiserver when it is not built yet: a first
	// build from an empty Go build cache takes about 11 minutes on two
	// idle cores (22 CPU-minutes), with room to spare.
	FirstBuildTime = 20 * time.Minute

	// logTailLines is how much of each process's log a failed test prints.
	logTailLines = 60
)

// User is a token-authenticated user besides the admin.
type User struct {
	// Name is the user name; it also names the user's kubeconfig context.
	Name string
	// Groups are the user's groups (system:authenticated is added by
	// kube-apiserver).
	Groups []string
}

// Options configures a Cluster. The zero value is a kube-apiserver with
// its own defaults except where said.
type Options struct {
	// Dir holds the data, certificates, kubeconfig and logs. Empty: a new
	// temporary directory (Start: t.TempDir(); Launch: removed by Close).
	Dir string
	// Port is kube-apiserver's --secure-port; 0 picks a free one.
	Port int
	// BindAddress is the IP kube-apiserver listens on, advertises (the
	// kubernetes Service's endpoint) and has in its serving certificate;
	// empty means 127.0.0.1. A cluster with nodes needs one that is not
	// loopback (internal/nodecluster gives its side of a veth pair).
	BindAddress string
	// AuthorizationMode is --authorization-mode; empty means
	// DefaultAuthorizationMode. "AlwaysAllow" lets every user do anything.
	AuthorizationMode string
	// Users are token users besides the admin, each with a context of its
	// own in the kubeconfig.
	Users []User
	// EventTTL is --event-ttl; 0 keeps kube-apiserver's default (1h).
	EventTTL time.Duration
	// EtcdCompactionInterval is --etcd-compaction-interval; 0 keeps
	// kube-apiserver's default (5m), a negative value turns its
	// compaction off (tests then compact with CompactEvents).
	EtcdCompactionInterval time.Duration
	// SeparateEventsEtcd keeps events (both API groups) in a second etcd
	// (--etcd-servers-overrides=/events#<its URL>).
	SeparateEventsEtcd bool
	// EventsEtcdAddress is the host:port the events etcd serves clients
	// on (empty: a free loopback port); it implies SeparateEventsEtcd.
	EventsEtcdAddress string
	// EventsEtcdURL is the client URL of an etcd the caller runs, to keep
	// events in (--etcd-servers-overrides=/events#<it>): the cluster
	// neither starts nor stops it, so that a benchmark can put
	// kube-apiserver's events in the etcd another server uses. It
	// excludes EventsEtcdAddress.
	EventsEtcdURL string
	// Binary is a kube-apiserver binary to run instead of the build of
	// tools/kube-apiserver (Version is then what its --version prints);
	// empty: that build.
	Binary string
	// FrontProxy makes kube-apiserver's aggregator an authenticating
	// front proxy, so that APIServices can be served by aggregated API
	// servers: a front-proxy CA of its own (FrontProxyCAFile), a client
	// certificate it signs for FrontProxyClientName
	// (--proxy-client-cert-file, --proxy-client-key-file), and
	// --requestheader-client-ca-file, --requestheader-allowed-names and
	// the X-Remote-* header flags, as kubeadm sets them; kube-apiserver
	// publishes them in kube-system/extension-apiserver-authentication.
	// Without it the aggregator has no client certificate and aggregated
	// servers cannot tell who a request is from.
	FrontProxy bool
	// ExtraArgs are more kube-apiserver flags, after the harness's own
	// (a later flag overrides an earlier one).
	ExtraArgs []string
	// StartTimeout bounds how long Launch and Restart wait for etcd and
	// /readyz; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
}

// Cluster is a running kube-apiserver on loopback with its etcd.
type Cluster struct {
	opts      Options
	build     Build
	dir       string
	removeDir bool
	pki       *pki

	url        string
	adminToken string
	tokens     map[string]string // user name -> token
	kubeconfig string

	etcd, eventsEtcd       *proc // eventsEtcd nil unless separate
	etcdURL, eventsEtcdURL string
	apiserver              *proc
	components             []*proc // Run's, in start order
}

// Start launches kube-apiserver and etcd for the test (RequireBinaries
// first: the test may be skipped, saying why). It fails the test when
// they cannot be started. Everything is killed when the test ends; if it
// failed, the tails of the logs are printed.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	RequireBinaries(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := Launch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", c.LogTails(logTailLines))
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// RequireBinaries builds (or finds) kube-apiserver and etcd for a test,
// which is skipped, saying exactly why, when kube-apiserver is not built
// yet and the test binary's timeout (go test's default is 10 minutes)
// leaves less than FirstBuildTime to build it, or when they cannot be
// built here (ErrUnavailable: modules that cannot be downloaded, no
// repository sources). A build that fails for another reason (a compile
// error) also skips outside CI (the CI environment variable unset), since
// it says nothing about the code under test; in CI it fails the test, as
// etcdproc's and eventsdtest's builds do.
func RequireBinaries(t testing.TB) Build {
	t.Helper()
	if v, ok := Cached(); !ok {
		if dl, has := deadline(t); has && time.Until(dl) < FirstBuildTime {
			t.Skipf("kubeapiserver: kube-apiserver %s is not built yet, and a first build (up to %v on two cores) does not fit in the %v this test binary has left: build it once with `go run ./cmd/devcluster --build-only` (kept in %s), or give go test -timeout 30m",
				v, FirstBuildTime, time.Until(dl).Round(time.Second), buildcache.Root())
		}
	}
	_, b, err := binaries()
	if err != nil {
		var be *buildError
		switch {
		case errors.Is(err, ErrUnavailable):
			t.Skipf("kubeapiserver: no real kube-apiserver: %v", err)
		case errors.As(err, &be) && os.Getenv("CI") == "":
			t.Skipf("kubeapiserver: no real kube-apiserver (this build failure fails the test where CI is set): %v", err)
		}
		t.Fatal(err)
	}
	return b
}

// binaries builds (or finds) etcd and kube-apiserver. Errors wrap
// ErrUnavailable when they cannot be built here, or are a *buildError.
func binaries() (etcd string, b Build, err error) {
	etcd, err = etcdproc.Binary()
	if errors.Is(err, etcdproc.ErrNoModule) {
		return "", Build{}, fmt.Errorf("%w: etcd: %w", ErrUnavailable, err)
	}
	if err != nil {
		return "", Build{}, &buildError{err}
	}
	b, err = Binary()
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			return "", Build{}, err
		}
		return "", Build{}, &buildError{err}
	}
	return etcd, b, nil
}

// binariesFor is binaries with the kube-apiserver binary bin instead of
// the build when bin is not empty.
func binariesFor(bin string) (etcd string, b Build, err error) {
	if bin == "" {
		return binaries()
	}
	etcd, err = etcdproc.Binary()
	if errors.Is(err, etcdproc.ErrNoModule) {
		return "", Build{}, fmt.Errorf("%w: etcd: %w", ErrUnavailable, err)
	}
	if err != nil {
		return "", Build{}, &buildError{err}
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", Build{}, fmt.Errorf("kubeapiserver: %s --version: %w", bin, err)
	}
	// "Kubernetes v1.37.2"
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", Build{}, fmt.Errorf("kubeapiserver: %s --version printed nothing", bin)
	}
	return etcd, Build{Path: bin, Version: f[len(f)-1]}, nil
}

// deadline is the test binary's deadline, where t has one (a *testing.T
// with go test's -timeout).
func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// buildError marks a build that failed for a reason other than
// ErrUnavailable.
type buildError struct{ err error }

func (e *buildError) Error() string { return e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// Launch builds (or finds) kube-apiserver and etcd, starts etcd (two with
// SeparateEventsEtcd) and kube-apiserver, and waits for /readyz. The
// caller must Close the cluster. Errors wrap ErrUnavailable when the
// binaries cannot be built here.
func Launch(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.AuthorizationMode == "" {
		opts.AuthorizationMode = DefaultAuthorizationMode
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.EventsEtcdAddress != "" && opts.EventsEtcdURL != "" {
		return nil, errors.New("kubeapiserver: Options.EventsEtcdAddress and EventsEtcdURL exclude each other")
	}
	if opts.EventsEtcdAddress != "" || opts.EventsEtcdURL != "" {
		opts.SeparateEventsEtcd = true
	}
	etcdBin, b, err := binariesFor(opts.Binary)
	if err != nil {
		return nil, err
	}

	c := &Cluster{opts: opts, build: b, dir: opts.Dir, tokens: map[string]string{}}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "kubeapiserver-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	}
	ok := false
	defer func() {
		if !ok {
			// The error returned says what went wrong; the kill of what
			// started cannot add to it.
			_ = c.Close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(c.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if opts.BindAddress == "" {
		opts.BindAddress = "127.0.0.1"
		c.opts.BindAddress = opts.BindAddress
	}
	bindIP := net.ParseIP(opts.BindAddress)
	if bindIP == nil || bindIP.IsUnspecified() {
		return nil, fmt.Errorf("kubeapiserver: Options.BindAddress %q is not one IP address", opts.BindAddress)
	}
	if c.pki, err = newPKI(filepath.Join(c.dir, "pki"), bindIP); err != nil {
		return nil, fmt.Errorf("kubeapiserver: certificates: %w", err)
	}
	if opts.FrontProxy {
		if err := c.pki.newFrontProxy(filepath.Join(c.dir, "pki")); err != nil {
			return nil, fmt.Errorf("kubeapiserver: front-proxy certificates: %w", err)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if c.etcd, c.etcdURL, err = c.startEtcd(ctx, etcdBin, "etcd", ""); err != nil {
		return nil, err
	}
	c.eventsEtcdURL = c.etcdURL
	switch {
	case opts.EventsEtcdURL != "":
		c.eventsEtcdURL = opts.EventsEtcdURL
	case opts.SeparateEventsEtcd:
		if c.eventsEtcd, c.eventsEtcdURL, err = c.startEtcd(ctx, etcdBin, "etcd-events", opts.EventsEtcdAddress); err != nil {
			return nil, err
		}
	}

	port := opts.Port
	if port == 0 {
		if port, err = freePort(opts.BindAddress); err != nil {
			return nil, err
		}
	}
	c.url = "https://" + net.JoinHostPort(opts.BindAddress, strconv.Itoa(port))
	tokenFile, err := c.writeTokens()
	if err != nil {
		return nil, err
	}
	if c.kubeconfig, err = c.writeKubeconfig(); err != nil {
		return nil, err
	}
	c.apiserver = &proc{
		name:    "kube-apiserver",
		bin:     b.Path,
		args:    c.apiserverArgs(port, tokenFile),
		logPath: filepath.Join(c.dir, "logs", "kube-apiserver.log"),
	}
	if err := c.apiserver.start(); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// apiserverArgs are kube-apiserver's flags.
func (c *Cluster) apiserverArgs(port int, tokenFile string) []string {
	args := []string{
		"--bind-address=" + c.opts.BindAddress,
		"--advertise-address=" + c.opts.BindAddress,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.dir, "pki"),
		"--tls-cert-file=" + c.pki.servingCert,
		"--tls-private-key-file=" + c.pki.servingKey,
		"--etcd-servers=" + c.etcdURL,
		"--authorization-mode=" + c.opts.AuthorizationMode,
		"--token-auth-file=" + tokenFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.saPublic,
		"--service-account-signing-key-file=" + c.pki.saPrivate,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		// No endpoints for the kubernetes service: there is no cluster
		// network behind 127.0.0.1.
		"--endpoint-reconciler-type=none",
	}
	if c.opts.FrontProxy {
		args = append(args,
			"--requestheader-client-ca-file="+c.pki.frontProxyCA,
			"--requestheader-allowed-names="+FrontProxyClientName,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-uid-headers=X-Remote-Uid",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file="+c.pki.proxyClientCert,
			"--proxy-client-key-file="+c.pki.proxyClientKey,
		)
	}
	if c.opts.SeparateEventsEtcd {
		args = append(args, "--etcd-servers-overrides=/events#"+c.eventsEtcdURL)
	}
	if c.opts.EventTTL > 0 {
		args = append(args, "--event-ttl="+c.opts.EventTTL.String())
	}
	switch {
	case c.opts.EtcdCompactionInterval < 0:
		args = append(args, "--etcd-compaction-interval=0")
	case c.opts.EtcdCompactionInterval > 0:
		args = append(args, "--etcd-compaction-interval="+c.opts.EtcdCompactionInterval.String())
	}
	return append(args, c.opts.ExtraArgs...)
}

// startEtcd starts a single-member etcd named name, serving clients on
// addr (a free loopback port when empty), and waits until it answers.
func (c *Cluster) startEtcd(ctx context.Context, bin, name, addr string) (*proc, string, error) {
	var err error
	if addr == "" {
		if addr, err = freeAddr(); err != nil {
			return nil, "", err
		}
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	clientURL, peerURL := "http://"+addr, "http://"+peer
	p := &proc{
		name: name,
		bin:  bin,
		args: []string{
			"--name", name,
			"--data-dir", filepath.Join(c.dir, name),
			"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", name + "=" + peerURL,
			"--initial-cluster-state", "new",
			"--log-level", "warn",
		},
		logPath: filepath.Join(c.dir, "logs", name+".log"),
	}
	if err := p.start(); err != nil {
		return nil, "", err
	}
	if err := waitEtcd(ctx, p, clientURL); err != nil {
		_ = p.kill()
		return nil, "", err
	}
	return p, clientURL, nil
}

// waitEtcd waits until etcd p answers a linearizable read at clientURL.
func waitEtcd(ctx context.Context, p *proc, clientURL string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), time.Second)
		_, err = cli.Get(rctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("kubeapiserver: %s exited:\n%s", p.name, p.tail(logTailLines))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubeapiserver: %s at %s not healthy: %w (last: %v)", p.name, clientURL, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeTokens writes kube-apiserver's --token-auth-file: the admin and
// every user, each with a new random token.
func (c *Cluster) writeTokens() (string, error) {
	c.adminToken = newToken()
	c.tokens[AdminUser] = c.adminToken
	var b strings.Builder
	fmt.Fprintf(&b, "%s,%s,%s,\"system:masters\"\n", c.adminToken, AdminUser, AdminUser)
	for _, u := range c.opts.Users {
		if u.Name == "" || u.Name == AdminUser || c.tokens[u.Name] != "" || strings.ContainsAny(u.Name, ",\"\n") {
			return "", fmt.Errorf("kubeapiserver: user name %q: empty, repeated, %q, or with a comma, quote or newline", u.Name, AdminUser)
		}
		tok := newToken()
		c.tokens[u.Name] = tok
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", tok, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	path := filepath.Join(c.dir, "pki", "tokens.csv")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// writeKubeconfig writes a kubeconfig with the cluster (CA inline), a
// user and a context per token user (named after it), the admin's
// current.
func (c *Cluster) writeKubeconfig() (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube-apiserver"] = &clientcmdapi.Cluster{Server: c.url, CertificateAuthorityData: c.pki.caPEM}
	for name, tok := range c.tokens {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "kube-apiserver", AuthInfo: name, Namespace: "default"}
	}
	cfg.CurrentContext = AdminUser
	path := filepath.Join(c.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubeapiserver: kubeconfig: %w", err)
	}
	return path, nil
}

// KubeconfigAs writes a copy of the kubeconfig whose current context is
// the token user's (one of Options.Users), for commands that must run as
// that user without a --context flag, and returns its path.
func (c *Cluster) KubeconfigAs(user string) (string, error) {
	if _, ok := c.tokens[user]; !ok {
		return "", fmt.Errorf("kubeapiserver: no token user %q", user)
	}
	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeapiserver: kubeconfig: %w", err)
	}
	cfg.CurrentContext = user
	path := filepath.Join(c.dir, "kubeconfig-"+strings.NewReplacer(":", "_", "/", "_").Replace(user))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubeapiserver: kubeconfig: %w", err)
	}
	return path, nil
}

// WaitReady waits until kube-apiserver answers /readyz with 200 (every
// post-start hook done: RBAC's bootstrap roles, priority and fairness),
// failing when the process ends or ctx or the start timeout ends first.
func (c *Cluster) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	exited := c.apiserver.exited()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/readyz?verbose", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, failedChecks(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return fmt.Errorf("kubeapiserver: kube-apiserver exited before it was ready:\n%s", c.apiserver.tail(logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("kubeapiserver: kube-apiserver at %s not ready: %w (last /readyz: %s)\n%s", c.url, ctx.Err(), last, c.apiserver.tail(logTailLines))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// failedChecks keeps the lines of a verbose /readyz answer that are not
// "ok".
func failedChecks(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if l != "" && !strings.HasSuffix(l, " ok") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// URL is kube-apiserver's https URL on Options.BindAddress.
func (c *Cluster) URL() string { return c.url }

// CA is the PEM of the CA that signed kube-apiserver's serving
// certificate.
func (c *Cluster) CA() []byte { return append([]byte(nil), c.pki.caPEM...) }

// FrontProxyCAFile is the front proxy's CA (Options.FrontProxy), the
// --requestheader-client-ca-file an aggregated API server verifies the
// aggregator's client certificate with; "" without Options.FrontProxy.
func (c *Cluster) FrontProxyCAFile() string { return c.pki.frontProxyCA }

// AdminToken is the bearer token of AdminUser (system:masters).
func (c *Cluster) AdminToken() string { return c.adminToken }

// Token is the bearer token of the named user (AdminUser or one of
// Options.Users), "" for an unknown one.
func (c *Cluster) Token(user string) string { return c.tokens[user] }

// Kubeconfig is the path of a kubeconfig for client-go's clientcmd and
// for kubectl: cluster "kube-apiserver" with the CA, a user and a context
// per token user named after it (namespace default), AdminUser's current.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RESTConfig is a new client configuration for AdminUser.
func (c *Cluster) RESTConfig() *rest.Config { return c.UserConfig(AdminUser) }

// UserConfig is a new client configuration for the named user (its
// token, empty for an unknown user, which kube-apiserver then takes as
// anonymous).
func (c *Cluster) UserConfig(user string) *rest.Config {
	return &rest.Config{
		Host:            c.url,
		BearerToken:     c.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA()},
		QPS:             -1, // no client-side rate limit: tests measure the server
	}
}

// Version is the Kubernetes version of the kube-apiserver binary, as
// /version reports it.
func (c *Cluster) Version() string { return c.build.Version }

// BinaryPath is the kube-apiserver binary that runs.
func (c *Cluster) BinaryPath() string { return c.build.Path }

// Dir is the directory holding the data, certificates, kubeconfig and
// logs.
func (c *Cluster) Dir() string { return c.dir }

// EtcdEndpoints are the client URLs of every etcd: the main one, then the
// events one if separate (the caller's with Options.EventsEtcdURL).
func (c *Cluster) EtcdEndpoints() []string {
	if c.eventsEtcdURL == c.etcdURL {
		return []string{c.etcdURL}
	}
	return []string{c.etcdURL, c.eventsEtcdURL}
}

// EventsEtcdEndpoint is the client URL of the etcd that holds events
// (under /registry/events/): the events etcd if separate, else the main
// one.
func (c *Cluster) EventsEtcdEndpoint() string { return c.eventsEtcdURL }

// PID is the process id of kube-apiserver's current (or last) process.
func (c *Cluster) PID() int { return c.apiserver.pid() }

// EtcdPIDs are the process ids of the etcd processes the cluster runs,
// in EtcdEndpoints' order (not the caller's Options.EventsEtcdURL).
func (c *Cluster) EtcdPIDs() []int {
	out := []int{c.etcd.pid()}
	if c.eventsEtcd != nil {
		out = append(out, c.eventsEtcd.pid())
	}
	return out
}

// Running reports whether kube-apiserver's process runs.
func (c *Cluster) Running() bool { return c.apiserver.running() }

// Exited is closed when kube-apiserver's current process ends.
func (c *Cluster) Exited() <-chan struct{} { return c.apiserver.exited() }

// Stop shuts kube-apiserver down gracefully (SIGTERM) and waits for it to
// end; etcd keeps running.
func (c *Cluster) Stop() error { return c.apiserver.stop() }

// Kill sends kube-apiserver SIGKILL, as a crash would, and waits for it
// to end; etcd keeps running.
func (c *Cluster) Kill() error { return c.apiserver.kill() }

// Restart stops kube-apiserver if it runs (SIGTERM), starts it again with
// the same flags, port, certificates and tokens over the same etcd, and
// waits for /readyz.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.apiserver.stop(); err != nil {
		return err
	}
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return c.WaitReady(ctx)
}

// EnsureNamespace creates the namespaces that do not exist yet:
// kube-apiserver refuses events (and every namespaced object) in a
// namespace that does not exist.
func (c *Cluster) EnsureNamespace(ctx context.Context, names ...string) error {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	for _, n := range names {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubeapiserver: create namespace %s: %w", n, err)
		}
	}
	return nil
}

// CompactEvents compacts the etcd that holds events up to its current
// revision (physically: it returns once the old revisions are gone) and
// returns that revision. A watch or a list from a resourceVersion older
// than it then gets 410 Gone, as after kube-apiserver's own periodic
// compaction.
func (c *Cluster) CompactEvents(ctx context.Context) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.eventsEtcdURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	// Any read's header carries the store's current revision.
	resp, err := cli.Get(ctx, "compact_rev_key")
	if err != nil {
		return 0, fmt.Errorf("kubeapiserver: events etcd revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("kubeapiserver: compact the events etcd at %d: %w", rev, err)
	}
	return rev, nil
}

// CAFile is the file of the CA that signed kube-apiserver's serving
// certificate (CA), for components' --root-ca-file.
func (c *Cluster) CAFile() string { return filepath.Join(c.dir, "pki", "ca.crt") }

// ServiceAccountKeyFile is the private key kube-apiserver signs
// service-account tokens with, for kube-controller-manager's
// --service-account-private-key-file.
func (c *Cluster) ServiceAccountKeyFile() string { return c.pki.saPrivate }

// Run starts another component of the cluster (kube-controller-manager,
// a kubelet...): bin with args, its output in the logs directory as
// name.log, included in LogTails. Close stops it (SIGTERM, then SIGKILL)
// before kube-apiserver, the components in the reverse of their start
// order.
func (c *Cluster) Run(name, bin string, args []string) error {
	p := &proc{name: name, bin: bin, args: args, logPath: filepath.Join(c.dir, "logs", name+".log")}
	if err := p.start(); err != nil {
		return fmt.Errorf("kubeapiserver: %w", err)
	}
	c.components = append(c.components, p)
	return nil
}

// ComponentRunning reports whether the component Run started as name
// runs.
func (c *Cluster) ComponentRunning(name string) bool {
	for _, p := range c.components {
		if p.name == name {
			return p.running()
		}
	}
	return false
}

// StopComponents stops what Run started (SIGTERM, SIGKILL after 30 s),
// last started first, and forgets them.
func (c *Cluster) StopComponents() error {
	var errs []error
	for i := len(c.components) - 1; i >= 0; i-- {
		errs = append(errs, c.components[i].stop())
	}
	c.components = nil
	return errors.Join(errs...)
}

// LogTails is the last n lines of each process's log, for a failed test.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	for _, p := range append([]*proc{c.etcd, c.eventsEtcd, c.apiserver}, c.components...) {
		if p != nil {
			fmt.Fprintf(&b, "--- %s log (last %d lines, %s):\n%s\n", p.name, n, p.logPath, p.tail(n))
		}
	}
	return b.String()
}

// Close kills kube-apiserver and etcd (SIGKILL: nothing of theirs is
// needed after) and removes the directory if Launch made it.
func (c *Cluster) Close() error {
	errs := []error{c.StopComponents()}
	for _, p := range []*proc{c.apiserver, c.eventsEtcd, c.etcd} {
		if p != nil {
			errs = append(errs, p.kill())
		}
	}
	if c.removeDir {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) { return FreeAddr("127.0.0.1") }

// FreeAddr is an address of ip with a TCP port free now, for a server the
// caller starts on ip.
func FreeAddr(ip string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freePort is a port of ip free now.
func freePort(ip string) (int, error) {
	addr, err := FreeAddr(ip)
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(addr)
	return strconv.Atoi(p)
}
