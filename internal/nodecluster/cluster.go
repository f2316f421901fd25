package nodecluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/clusterdns"
	"github.com/kubevents/kubevents/internal/containerdproc"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// NodeName is the node's name.
const NodeName = "node-1"

// Image is the image the node has without a pull, for test workloads:
// busybox, with /bin/sh, sleep, true, false, cat, echo, kill, ls, env,
// date, hostname, nc, nslookup and wget (plain HTTP: busybox's TLS shares
// no cipher suite with Go's servers).
const Image = containerdproc.Image

// StorageClassName is the default StorageClass's name.
const StorageClassName = "local"

// VolumeCapacity is each local volume's declared capacity: enough for any
// claim of the chart (10Gi by default). A volume is a directory on this
// machine's disk; nothing enforces the size.
const VolumeCapacity = "20Gi"

// DefaultStartTimeout is Options.StartTimeout's default.
const DefaultStartTimeout = 4 * time.Minute

// nodeUser is the kubelet's identity (the Node authorizer's).
const nodeUser = "system:node:" + NodeName

// Options configures a Cluster. Zero fields take the defaults.
type Options struct {
	// Dir holds everything the cluster writes (kube-apiserver's
	// certificates and data, the kubelet's root, logs, volumes). Empty: a
	// new temporary directory, removed by Stop.
	Dir string
	// EventTTL is kube-apiserver's --event-ttl (0: its default, 1h).
	EventTTL time.Duration
	// Users are token users besides the admin (kubeapiserver.Options).
	Users []kubeapiserver.User
	// APIServerArgs are more kube-apiserver flags.
	APIServerArgs []string
	// EventsEtcd keeps the cluster's events (both API groups) in an etcd
	// of their own (kube-apiserver's --etcd-servers-overrides=/events#),
	// serving plain HTTP on the host's address, which pods reach
	// (EventsEtcdURL), as a cluster's events etcd that eventsd replicas
	// share.
	EventsEtcd bool
	// PersistentVolumes is how many local volumes (of VolumeCapacity) the
	// default StorageClass has (0: 4).
	PersistentVolumes int
	// StartTimeout bounds the start, until the node is Ready
	// (DefaultStartTimeout).
	StartTimeout time.Duration
	// Logf, when set, is told of each step.
	Logf func(format string, args ...any)
}

// Cluster is a running single-node cluster.
type Cluster struct {
	opts      Options
	dir       string
	removeDir bool
	bin       Binaries

	net        *network
	apiserver  *kubeapiserver.Cluster
	containerd *containerdproc.Containerd
	dns        func() error // stops the DNS server
	client     kubernetes.Interface
}

// CanRun says why a node cannot run here, or nil: what containerd needs
// (root, overlayfs, cgroups, runc, busybox-static) and network namespaces
// with ip, nsenter and iptables.
func CanRun() error {
	if err := containerdproc.CanRun(containerdproc.Options{}); err != nil {
		return err
	}
	if err := canNetwork(); err != nil {
		return fmt.Errorf("%w: %w", containerdproc.ErrCannotRun, err)
	}
	return nil
}

// Launch builds (or finds) every component and starts the cluster,
// returning once the node is Ready, the default ServiceAccount exists and
// the default StorageClass has its volumes. The caller must Stop it, also
// after an error when the returned cluster is not nil.
func Launch(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.PersistentVolumes <= 0 {
		opts.PersistentVolumes = 4
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := CanRun(); err != nil {
		return nil, err
	}
	bin, err := Build(opts.Logf)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, dir: opts.Dir, bin: bin}
	if c.dir == "" {
		// Short: containerd's sockets live under it.
		if c.dir, err = os.MkdirTemp("", "node-"); err != nil {
			return nil, fmt.Errorf("nodecluster: %w", err)
		}
		c.removeDir = true
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	begun := time.Now()
	if err := c.start(ctx); err != nil {
		return c, err
	}
	opts.Logf("node %s Ready in %v (kube-apiserver at %s, pods in %s)", NodeName, time.Since(begun).Round(time.Millisecond),
		c.apiserver.URL(), c.net.PodCIDR())
	return c, nil
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

func (c *Cluster) start(ctx context.Context) error {
	logf := c.opts.Logf
	var err error
	if c.net, err = newNetwork(filepath.Join(buildcache.Root(), "nodecluster-network.lock")); err != nil {
		return err
	}
	logf("network namespace %s: host %s, node %s, pods %s", c.net.name, c.net.HostIP(), c.net.NodeIP(), c.net.PodCIDR())

	users := append([]kubeapiserver.User{{Name: nodeUser, Groups: []string{"system:nodes"}}}, c.opts.Users...)
	var eventsEtcd string
	if c.opts.EventsEtcd {
		if eventsEtcd, err = kubeapiserver.FreeAddr(c.net.HostIP()); err != nil {
			return err
		}
	}
	c.apiserver, err = kubeapiserver.Launch(ctx, kubeapiserver.Options{
		EventsEtcdAddress: eventsEtcd,
		Dir:               c.path("control-plane"),
		BindAddress:       c.net.HostIP(),
		AuthorizationMode: "Node,RBAC",
		Users:             users,
		EventTTL:          c.opts.EventTTL,
		FrontProxy:        true,
		StartTimeout:      c.opts.StartTimeout,
		ExtraArgs: append([]string{
			// The kubernetes Service's endpoint is the host's address.
			"--endpoint-reconciler-type=lease",
			"--allow-privileged=true",
			// The aggregator and webhooks dial a Service's endpoints
			// (pods, routed to the node) rather than its address, which
			// only the node's kube-proxy rules translate.
			"--enable-aggregator-routing=true",
			// Logs, exec and port-forward dial the node's address: its
			// name resolves nowhere.
			"--kubelet-preferred-address-types=InternalIP",
		}, c.opts.APIServerArgs...),
	})
	if err != nil {
		return fmt.Errorf("nodecluster: control plane: %w", err)
	}
	logf("kube-apiserver %s ready at %s", c.apiserver.Version(), c.apiserver.URL())
	cfg := c.apiserver.RESTConfig()
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("nodecluster: %w", err)
	}
	admin := c.apiserver.Kubeconfig()
	if err := c.run(controllerManager, false, controllerManagerArgs(admin, c.apiserver.ServiceAccountKeyFile(), c.apiserver.CAFile(), c.net.PodCIDR())...); err != nil {
		return err
	}
	if err := c.run(scheduler, false, schedulerArgs(admin)...); err != nil {
		return err
	}

	if c.dns, err = c.startDNS(ctx); err != nil {
		return err
	}

	if err := c.startNode(ctx); err != nil {
		return err
	}
	if err := c.run(kubeProxy, true, kubeProxyArgs(admin, NodeName, c.net.PodCIDR())...); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	return c.makeStorage(ctx)
}

// run starts a component built from tools/kubernetes, in the node's
// namespace when inNode.
func (c *Cluster) run(name string, inNode bool, args ...string) error {
	bin := c.bin.Kubernetes.Path(name)
	if inNode {
		bin, args = nsenter(c.net.NetNSPath(), bin, args...)
	}
	return c.apiserver.Run(name, bin, args)
}

// startNode starts containerd and the kubelet in the node's namespace.
func (c *Cluster) startNode(ctx context.Context) error {
	cniConf := c.path("cni", "net.d")
	for _, d := range []string{cniConf, c.path("cni", "ipam"), c.path("kubelet"), c.path("pod-logs"), c.path("volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("nodecluster: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-kubevents.conflist"), []byte(cniConfig(c.net.PodCIDR(), c.path("cni", "ipam"))), 0o644); err != nil {
		return fmt.Errorf("nodecluster: %w", err)
	}
	bins := c.bin.Containerd
	var err error
	c.containerd, err = containerdproc.Start(containerdproc.Options{
		Binaries: &bins,
		Logf:     c.opts.Logf,
		NetNS:    c.net.NetNSPath(),
		CNI:      &containerdproc.CNI{BinDir: c.bin.CNI.Dir, ConfDir: cniConf},
	})
	if err != nil {
		return fmt.Errorf("nodecluster: %w", err)
	}
	resolv := c.path("resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+c.net.HostIP()+"\n"), 0o644); err != nil {
		return fmt.Errorf("nodecluster: %w", err)
	}
	config := kubeletConfig{
		NodeIP:          c.net.NodeIP(),
		CgroupRoot:      c.containerd.CgroupRoot(),
		RuntimeEndpoint: c.containerd.Endpoint(),
		ClusterDNS:      c.net.HostIP(),
		ResolvConf:      resolv,
		PodLogsDir:      c.path("pod-logs"),
		VolumePluginDir: c.path("volume-plugins"),
	}
	configPath := c.path("kubelet.yaml")
	if err := os.WriteFile(configPath, []byte(config.String()), 0o644); err != nil {
		return fmt.Errorf("nodecluster: %w", err)
	}
	kubeconfig, err := c.apiserver.KubeconfigAs(nodeUser)
	if err != nil {
		return err
	}
	return c.run(kubelet, true,
		"--config="+configPath,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+c.path("kubelet"),
		"--hostname-override="+NodeName,
		"--node-ip="+c.net.NodeIP(),
		"--v=1",
	)
}

// waitReady waits for the node's Ready condition and the default
// namespace's ServiceAccount (without which no pod is admitted).
func (c *Cluster) waitReady(ctx context.Context) error {
	last := "not registered"
	for {
		node, err := c.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil {
			last = "no Ready condition"
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				}
			}
			if isReady(node) {
				_, err := c.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
				if err == nil {
					return nil
				}
				last = "Ready, but no default ServiceAccount yet: " + err.Error()
			}
		}
		for _, name := range []string{kubelet, controllerManager, scheduler, kubeProxy} {
			if !c.apiserver.ComponentRunning(name) && name != kubeProxy {
				return fmt.Errorf("nodecluster: %s exited:\n%s", name, c.apiserver.LogTails(40))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodecluster: node %s not Ready (%s): %w\n%s", NodeName, last, ctx.Err(), c.LogTails(40))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func isReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// makeStorage creates the default StorageClass and its local volumes,
// each a directory of the cluster's bound to the node.
func (c *Cluster) makeStorage(ctx context.Context) error {
	binding := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &binding,
		ReclaimPolicy:     &reclaim,
	}
	if _, err := c.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("nodecluster: StorageClass: %w", err)
	}
	for i := range c.opts.PersistentVolumes {
		name := fmt.Sprintf("local-%d", i+1)
		dir := c.path("volumes", name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("nodecluster: %w", err)
		}
		// Pods running as any user (the restricted standard's) write it.
		if err := os.Chmod(dir, 0o777); err != nil {
			return fmt.Errorf("nodecluster: %w", err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(VolumeCapacity)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              StorageClassName,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{NodeName}}},
				}}}},
			},
		}
		if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("nodecluster: PersistentVolume %s: %w", name, err)
		}
	}
	return nil
}

// Client is a clientset for the admin.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// RESTConfig is a new client configuration for the admin.
func (c *Cluster) RESTConfig() *rest.Config { return c.apiserver.RESTConfig() }

// UserConfig is a new client configuration for a token user of
// Options.Users.
func (c *Cluster) UserConfig(user string) *rest.Config { return c.apiserver.UserConfig(user) }

// Kubeconfig is the path of the admin's kubeconfig (a context per token
// user), for kubectl and helm.
func (c *Cluster) Kubeconfig() string { return c.apiserver.Kubeconfig() }

// APIServer is the control plane.
func (c *Cluster) APIServer() *kubeapiserver.Cluster { return c.apiserver }

// Containerd is the node's container runtime.
func (c *Cluster) Containerd() *containerdproc.Containerd { return c.containerd }

// NodeIP is the node's InternalIP.
func (c *Cluster) NodeIP() string { return c.net.NodeIP() }

// HostIP is the host's address toward the node: kube-apiserver's and the
// DNS server's.
func (c *Cluster) HostIP() string { return c.net.HostIP() }

// PodCIDR is the pods' address range.
func (c *Cluster) PodCIDR() string { return c.net.PodCIDR() }

// EventsEtcdURL is the client URL of the events etcd (Options.EventsEtcd),
// on the host's address; "" without one.
func (c *Cluster) EventsEtcdURL() string {
	if !c.opts.EventsEtcd {
		return ""
	}
	return c.apiserver.EventsEtcdEndpoint()
}

// NetNS is the path of the node's network namespace.
func (c *Cluster) NetNS() string { return c.net.NetNSPath() }

// ImportImage imports the images of an archive (tools/image's output)
// into the node's containerd, as `ctr -n k8s.io images import` does.
func (c *Cluster) ImportImage(tarPath string) error {
	_, err := c.containerd.ImportImage(tarPath)
	return err
}

// LogTails is the last n lines of each component's log and containerd's.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	if c.apiserver != nil {
		b.WriteString(c.apiserver.LogTails(n))
	}
	if c.containerd != nil {
		lines := strings.Split(strings.TrimRight(c.containerd.Logs(), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- containerd log (last %d lines):\n%s\n", n, strings.Join(lines, "\n"))
	}
	return b.String()
}

// Stop ends everything Launch started: the kubelet, kube-proxy and the
// controllers, the pods with their mounts and cgroups (containerd's
// Stop), what the kubelet mounted, the DNS server, kube-apiserver and
// etcd, the node's network namespace and veth pair, and the directory if
// Launch made it. The error says what could not be cleaned up.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.apiserver != nil {
		errs = append(errs, c.apiserver.StopComponents())
	}
	if c.containerd != nil {
		errs = append(errs, c.containerd.Stop())
	}
	// What the kubelet mounted: volumes, its root made shared.
	errs = append(errs, containerdproc.UnmountUnder(c.dir), c.removeLogLinks())
	if c.dns != nil {
		errs = append(errs, c.dns())
	}
	// kube-apiserver before the network its address is on: killed after,
	// its clients' connections would never hear of it.
	if c.apiserver != nil {
		errs = append(errs, c.apiserver.Close())
	}
	if c.net != nil {
		errs = append(errs, c.net.tearDown())
	}
	if c.removeDir {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

// containerLogLinks is where a kubelet links every container's log,
// whatever its root directory.
const containerLogLinks = "/var/log/containers"

// removeLogLinks removes the kubelet's links to this cluster's pod logs
// that it left in containerLogLinks.
func (c *Cluster) removeLogLinks() error {
	entries, err := os.ReadDir(containerLogLinks)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, c.path("pod-logs")+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// startDNS serves the cluster's DNS (internal/clusterdns: Services and
// their endpoints under cluster.local) on the host's address, port 53, UDP
// and TCP: the kubelet gives it to pods as their nameserver. It returns
// once the server has read every Service, and how to stop it.
func (c *Cluster) startDNS(ctx context.Context) (func() error, error) {
	addr := net.JoinHostPort(c.net.HostIP(), "53")
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("nodecluster: DNS: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("nodecluster: DNS: %w", err)
	}
	srv, err := clusterdns.New(clusterdns.Config{Client: c.client, Domain: ClusterDomain, Logf: c.opts.Logf})
	if err != nil {
		pc.Close()
		l.Close()
		return nil, fmt.Errorf("nodecluster: DNS: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, pc, l) }()
	stop := func() error {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("nodecluster: DNS: %w", err)
		}
		return nil
	}
	if err := srv.WaitReady(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("nodecluster: DNS not ready: %w", err), stop())
	}
	return stop, nil
}
