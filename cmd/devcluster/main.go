// Command devcluster runs a real control plane for events on loopback, for
// trying eventsd beside a cluster from a clone of this repository: an etcd
// for everything, an etcd for events only and upstream's kube-apiserver
// (built from tools/kube-apiserver on the first run and cached in the
// user cache directory) with --etcd-servers-overrides=/events#<the events
// etcd>, HTTPS, token authentication and RBAC. It writes a kubeconfig with
// an admin context, prints where everything is, and runs until Ctrl-C,
// which stops it all.
//
//	go run ./cmd/devcluster --kubeconfig cluster.kubeconfig
//	go run ./cmd/devcluster --build-only   # only build (and cache) kube-apiserver and etcd
//
// With --nodes it runs a whole single-node cluster instead
// (internal/nodecluster): the control plane, kube-controller-manager,
// kube-scheduler, containerd, a kubelet, kube-proxy and cluster DNS, the
// node in a network namespace of its own. It needs root.
//
//	sudo go run ./cmd/devcluster --nodes --kubeconfig cluster.kubeconfig
//	go run ./cmd/devcluster --nodes --build-only   # only build (and cache) every component
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/internal/duration"
	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := newCommand(os.Stdout)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

// options are devcluster's flags.
type options struct {
	dir               string
	kubeconfig        string
	port              int
	eventsEtcd        string
	eventTTL          time.Duration
	compaction        time.Duration
	authorizationMode string
	apiserverArgs     []string
	buildOnly         bool
	nodes             bool
}

func newCommand(out io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "devcluster",
		Short: "Run etcd, an events etcd and a real kube-apiserver on loopback until Ctrl-C",
		Long: `devcluster runs a real control plane for events on loopback: an etcd, an etcd for
events only, and upstream's kube-apiserver with --etcd-servers-overrides=/events#<events etcd>,
HTTPS (a CA made for the run), token authentication (an admin in system:masters) and RBAC.
kube-apiserver is built from tools/kube-apiserver on the first run (minutes) and cached in the
user cache directory. Run it from a clone of the repository; Ctrl-C stops everything.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "Directory for the data, certificates, logs and kubeconfig; kept after exit. Empty: a new temporary directory, removed on exit.")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "Also write the admin kubeconfig (CA inline, token) to this file.")
	f.IntVar(&o.port, "port", 6443, "kube-apiserver's HTTPS port on 127.0.0.1; 0 picks a free one.")
	f.StringVar(&o.eventsEtcd, "events-etcd", "127.0.0.1:2379", "host:port the events etcd serves clients on (eventsd's --etcd-servers=http://HOST:PORT).")
	f.DurationVar(&o.eventTTL, "event-ttl", time.Hour, "kube-apiserver's --event-ttl.")
	f.DurationVar(&o.compaction, "etcd-compaction-interval", 5*time.Minute, "kube-apiserver's --etcd-compaction-interval; 0 turns its compaction off.")
	f.StringVar(&o.authorizationMode, "authorization-mode", kubeapiserver.DefaultAuthorizationMode, "kube-apiserver's --authorization-mode.")
	f.StringArrayVar(&o.apiserverArgs, "apiserver-arg", nil, "A further kube-apiserver flag, as --name=value (repeatable).")
	f.BoolVar(&o.buildOnly, "build-only", false, "Only build kube-apiserver and etcd (with --nodes, every component) into the user cache directory (the tests that run a real kube-apiserver or cluster use these builds), print where, and exit.")
	f.BoolVar(&o.nodes, "nodes", false, "Run a whole single-node cluster (controllers, scheduler, containerd, kubelet, kube-proxy, DNS; needs root) instead of the control plane for events; --port, --events-etcd, --etcd-compaction-interval and --authorization-mode do not apply.")
	duration.HintFlags(f)
	buildinfo.AddVersionFlag(cmd)
	return cmd
}

// checkPorts fails, naming the address and the flag that changes it, when
// an address devcluster is to listen on is taken (another devcluster, a
// kube-apiserver or an etcd). It only tries them: something may still
// take one before its server does, which then fails with its own error.
func checkPorts(o options) error {
	type addr struct{ flag, addr, what, another string }
	var addrs []addr
	if o.port != 0 {
		addrs = append(addrs, addr{"--port", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port)),
			fmt.Sprintf("kube-apiserver's port %d on 127.0.0.1", o.port), "choose another with --port (0: any free port)"})
	}
	if o.eventsEtcd != "" {
		addrs = append(addrs, addr{"--events-etcd", o.eventsEtcd,
			"the events etcd's address " + o.eventsEtcd, "choose another with --events-etcd (e.g. 127.0.0.1:2381)"})
	}
	for _, a := range addrs {
		l, err := net.Listen("tcp", a.addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%s is in use (another devcluster, kube-apiserver or etcd?): stop what listens there, or %s", a.what, a.another)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", a.flag, a.addr, err)
		}
		l.Close()
	}
	return nil
}

// build builds (or finds) kube-apiserver and etcd and says where they are.
// The etcd server module is fetched first (a second when it is there): a
// clone that has only built devcluster lacks it, and a module that cannot
// be had must fail before kube-apiserver's build of minutes, not after.
func build(out io.Writer) error {
	t0 := time.Now()
	if err := etcdproc.Fetch(); err != nil {
		return err
	}
	if v, ok := kubeapiserver.Cached(); !ok {
		fmt.Fprintf(out, "building kube-apiserver %s from tools/kube-apiserver (the first build takes minutes)...\n", v)
	}
	b, err := kubeapiserver.Binary()
	if err != nil {
		return err
	}
	etcd, err := etcdproc.Binary()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kube-apiserver %s: %s\netcd: %s\n(%v)\n", b.Version, b.Path, etcd, time.Since(t0).Round(time.Second))
	return nil
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.nodes {
		return runNodes(ctx, o, out)
	}
	if o.buildOnly {
		return build(out)
	}
	// Before the build of minutes and before anything starts: a port in
	// use is one line naming it and its flag, not kube-apiserver's or
	// etcd's bind error after the build.
	if err := checkPorts(o); err != nil {
		return err
	}
	opts := kubeapiserver.Options{
		Dir:               o.dir,
		Port:              o.port,
		AuthorizationMode: o.authorizationMode,
		EventTTL:          o.eventTTL,
		EventsEtcdAddress: o.eventsEtcd,
		ExtraArgs:         o.apiserverArgs,
	}
	if o.compaction == 0 {
		opts.EtcdCompactionInterval = -1
	} else {
		opts.EtcdCompactionInterval = o.compaction
	}
	if opts.Dir != "" {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return err
		}
	}
	if err := build(out); err != nil {
		return err
	}
	fmt.Fprintln(out, "starting etcd, the events etcd and kube-apiserver...")
	c, err := kubeapiserver.Launch(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := copyKubeconfig(c.Kubeconfig(), o.kubeconfig); err != nil {
		return err
	}
	eps := c.EtcdEndpoints()
	fmt.Fprintf(out, "kube-apiserver %s ready at %s (pid %d)\n", c.Version(), c.URL(), c.PID())
	fmt.Fprintf(out, "KUBECONFIG=%s\n", c.Kubeconfig())
	if o.kubeconfig != "" {
		fmt.Fprintf(out, "kubeconfig also written to %s\n", o.kubeconfig)
	}
	fmt.Fprintf(out, "ETCD=%s\nEVENTS_ETCD=%s   (events under /registry/events/)\n", eps[0], eps[1])
	fmt.Fprintf(out, "logs: %s/logs\nCtrl-C stops everything.\n", c.Dir())
	select {
	case <-ctx.Done():
	case <-c.Exited():
		return fmt.Errorf("kube-apiserver exited:\n%s", c.LogTails(20))
	}
	fmt.Fprintln(out, "stopping")
	if err := c.Stop(); err != nil {
		return err
	}
	return nil
}

// copyKubeconfig copies the cluster's kubeconfig to --kubeconfig's file,
// when one is given.
func copyKubeconfig(from, to string) error {
	if to == "" {
		return nil
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
