package nodecluster

import (
	"errors"
	"fmt"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/containerdproc"
	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// BuildCommand builds every component the cluster runs ahead of the tests
// (a first build of the node's Kubernetes components takes tens of
// minutes), as .ci/run does.
const BuildCommand = "go run ./cmd/devcluster --nodes --build-only"

// Names of the commands built from tools/kubernetes.
const (
	kubelet           = "kubelet"
	controllerManager = "kube-controller-manager"
	scheduler         = "kube-scheduler"
	kubeProxy         = "kube-proxy"
)

// newKubernetesModule is tools/kubernetes: the node's and the control
// plane's other components, at the Kubernetes version kube-apiserver is
// built at. The kubelet, the largest, is built last, so that its
// presence in the cache means a whole build.
func newKubernetesModule() *buildcache.Module {
	return &buildcache.Module{
		Dir:       "tools/kubernetes",
		Prefix:    "kubernetes-node-",
		VersionOf: "k8s.io/kubernetes",
		LDFlags:   kubeapiserver.LDFlags,
		Commands: []buildcache.Command{
			{Name: scheduler, Package: "k8s.io/kubernetes/cmd/kube-scheduler"},
			{Name: kubeProxy, Package: "k8s.io/kubernetes/cmd/kube-proxy"},
			{Name: controllerManager, Package: "k8s.io/kubernetes/cmd/kube-controller-manager"},
			{Name: kubelet, Package: "k8s.io/kubernetes/cmd/kubelet"},
		},
	}
}

// newCNIModule is tools/cni: the CNI plugins containerd's CRI plugin runs.
func newCNIModule() *buildcache.Module {
	const plugins = "github.com/containernetworking/plugins/plugins/"
	return &buildcache.Module{
		Dir:       "tools/cni",
		Prefix:    "cni-plugins-",
		VersionOf: "github.com/containernetworking/plugins",
		Commands: []buildcache.Command{
			{Name: "loopback", Package: plugins + "main/loopback"},
			{Name: "host-local", Package: plugins + "ipam/host-local"},
			{Name: "portmap", Package: plugins + "meta/portmap"},
			{Name: "bridge", Package: plugins + "main/bridge"},
		},
	}
}

// Binaries are the builds a cluster runs.
type Binaries struct {
	// Kubernetes holds kubelet, kube-controller-manager, kube-scheduler
	// and kube-proxy.
	Kubernetes buildcache.Binaries
	// CNI holds the CNI plugins.
	CNI buildcache.Binaries
	// Containerd is containerd, its shim, ctr and crictl.
	Containerd containerdproc.Binaries
}

// Cached reports whether every build the cluster runs is in the user
// cache directory already, and if not, which is missing.
func Cached() (missing []string) {
	if _, ok := newKubernetesModule().Cached(); !ok {
		missing = append(missing, "kubelet, kube-controller-manager, kube-scheduler and kube-proxy (tools/kubernetes)")
	}
	if _, ok := newCNIModule().Cached(); !ok {
		missing = append(missing, "the CNI plugins (tools/cni)")
	}
	if !containerdproc.Cached() {
		missing = append(missing, "containerd (tools/containerd)")
	}
	if _, ok := kubeapiserver.Cached(); !ok {
		missing = append(missing, "kube-apiserver (tools/kube-apiserver)")
	}
	return missing
}

// ErrUnavailable wraps the reason a component cannot be built here (its
// sources or modules cannot be had); tests skip on it.
var ErrUnavailable = errors.New("nodecluster: a component cannot be built here")

// Build builds (or finds) every component the cluster runs: etcd and
// kube-apiserver, then tools/kubernetes (after kube-apiserver, whose
// packages it shares in the Go build cache), the CNI plugins and
// containerd. logf, when set, is told of each step.
func Build(logf func(format string, args ...any)) (Binaries, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	unavailable := func(what string, err error) error {
		if errors.Is(err, buildcache.ErrUnavailable) || errors.Is(err, kubeapiserver.ErrUnavailable) ||
			errors.Is(err, containerdproc.ErrUnavailable) || errors.Is(err, etcdproc.ErrNoModule) {
			return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
		}
		return fmt.Errorf("nodecluster: building %s: %w", what, err)
	}
	var b Binaries
	logf("building (or finding) etcd and kube-apiserver")
	if _, err := etcdproc.Binary(); err != nil {
		return b, unavailable("etcd", err)
	}
	if _, err := kubeapiserver.Binary(); err != nil {
		return b, unavailable("kube-apiserver", err)
	}
	var err error
	logf("building (or finding) kubelet, kube-controller-manager, kube-scheduler and kube-proxy")
	if b.Kubernetes, err = newKubernetesModule().Build(); err != nil {
		return b, unavailable("tools/kubernetes", err)
	}
	logf("building (or finding) the CNI plugins")
	if b.CNI, err = newCNIModule().Build(); err != nil {
		return b, unavailable("tools/cni", err)
	}
	logf("building (or finding) containerd")
	if b.Containerd, err = containerdproc.Build(); err != nil {
		return b, unavailable("containerd", err)
	}
	return b, nil
}
