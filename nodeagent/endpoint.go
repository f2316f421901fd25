package nodeagent

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// unixScheme is the scheme of a CRI endpoint on a unix socket.
const unixScheme = "unix://"

// criTarget turns --runtime-endpoint into a gRPC dial target. It takes
// what crictl and the kubelet take: unix:///path/to.sock, or a bare socket
// path (the kubelet reads one as unix://, as fakecri --listen does).
func criTarget(endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return "", errors.New("--runtime-endpoint is required: unix:///path/to.sock or /path/to.sock")
	case strings.HasPrefix(endpoint, unixScheme):
		if len(endpoint) == len(unixScheme) {
			return "", fmt.Errorf("--runtime-endpoint %q: empty socket path", endpoint)
		}
		return endpoint, nil
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("--runtime-endpoint %q: want unix:///path/to.sock or /path/to.sock", endpoint)
	}
	path, err := filepath.Abs(endpoint)
	if err != nil {
		return "", fmt.Errorf("--runtime-endpoint %q: %w", endpoint, err)
	}
	return unixScheme + path, nil
}

// restConfig finds the API server as kubectl and evctl do: client-go's
// loading rules (--kubeconfig, else $KUBECONFIG, else ~/.kube/config),
// with --server overriding the kubeconfig's server, or alone.
func restConfig(o Options) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{}
	overrides.ClusterInfo.Server = o.Server
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no API server to record events to: give --server or --kubeconfig, or a kubeconfig in $KUBECONFIG or %s", clientcmd.RecommendedHomeFile)
	case err != nil && o.Kubeconfig != "":
		return nil, fmt.Errorf("--kubeconfig %s: %w", o.Kubeconfig, err)
	case err != nil:
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return cfg, nil
}
