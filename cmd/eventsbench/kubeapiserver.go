package main

import (
	"context"
	"fmt"
	"time"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// kubeAPIServerBuilt is the --kube-apiserver value that runs
// internal/kubeapiserver's build of tools/kube-apiserver (cached in the
// user cache directory; `go run ./cmd/devcluster --build-only` builds it)
// rather than a given binary.
const kubeAPIServerBuilt = "built"

// kubeAPIServerStartTimeout bounds kube-apiserver's start: it installs
// its APIs and bootstraps its RBAC and priority levels first.
const kubeAPIServerStartTimeout = 3 * time.Minute

// kubeAPIServerPrefix is kube-apiserver's --etcd-prefix here: apart from
// eventsd's /registry in the shared events etcd, so that eventsd's watch
// of its prefix does not spend CPU on kube-apiserver's writes.
const kubeAPIServerPrefix = "/kube-apiserver-registry"

// kubeAPIServerFlags describes the run's kube-apiserver settings for the
// report.
const kubeAPIServerFlags = "internal/kubeapiserver's set-up (HTTPS with its own CA, token authentication, service-account keys, --endpoint-reconciler-type=none)" +
	" with --etcd-servers=<a main etcd of its own> --etcd-servers-overrides=/events#<the benchmark etcd> --etcd-prefix=" + kubeAPIServerPrefix +
	" --event-ttl=24h --authorization-mode=AlwaysAllow; otherwise kube-apiserver's defaults"

// kubeAPIServerOptions are internal/kubeapiserver's options for bin (a
// binary, or kubeAPIServerBuilt) with its data in dir.
func kubeAPIServerOptions(bin, dir string) kubeapiserver.Options {
	opts := kubeapiserver.Options{Dir: dir, StartTimeout: kubeAPIServerStartTimeout}
	if bin != kubeAPIServerBuilt {
		opts.Binary = bin
	}
	return opts
}

// launchKubeAPIServer starts kube-apiserver (bin, or the build when bin
// is kubeAPIServerBuilt) on loopback through internal/kubeapiserver, with
// a main etcd of its own and its events in eventsEtcd, as big clusters
// split them, and creates the benchmark's namespaces, which
// kube-apiserver requires. The caller closes the cluster.
func launchKubeAPIServer(ctx context.Context, bin, dir, eventsEtcd string, namespaces int) (*kubeapiserver.Cluster, error) {
	opts := kubeAPIServerOptions(bin, dir)
	opts.AuthorizationMode = "AlwaysAllow"
	opts.EventTTL = 24 * time.Hour
	opts.EventsEtcdURL = eventsEtcd
	opts.ExtraArgs = []string{"--etcd-prefix=" + kubeAPIServerPrefix}
	c, err := kubeapiserver.Launch(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := c.EnsureNamespace(ctx, namespaceNames(namespaces)...); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w\n%s", err, c.LogTails(20))
	}
	return c, nil
}

// namespaceNames are the first n benchmark namespaces.
func namespaceNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = namespaceName(i)
	}
	return out
}
