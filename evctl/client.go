package evctl

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// connFlags are kubectl's connection flags.
type connFlags struct {
	kubeconfig, context, namespace, server, token string
	insecure                                      bool
	allNamespaces                                 bool
	timeout                                       time.Duration
}

func (c *connFlags) add(f *pflag.FlagSet) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	f.StringVar(&c.context, "context", "", "The kubeconfig context to use.")
	f.StringVarP(&c.namespace, "namespace", "n", "", "The namespace (default: the context's, else default).")
	f.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "Look in every namespace.")
	f.StringVar(&c.server, "server", "", "The API server's URL, instead of the kubeconfig's.")
	f.StringVar(&c.token, "token", "", "A bearer token for the API server.")
	f.BoolVar(&c.insecure, "insecure-skip-tls-verify", false, "Do not verify the server's certificate.")
	f.DurationVar(&c.timeout, "request-timeout", 30*time.Second, "How long to wait for each request (not for watches).")
}

// client builds a clientset and the namespace to use, as kubectl does:
// the kubeconfig (with its loading rules), overridden by the flags.
func (c *connFlags) client() (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	if c.server != "" {
		overrides.ClusterInfo = clientcmdapi.Cluster{Server: c.server, InsecureSkipTLSVerify: c.insecure}
	} else if c.insecure {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	if c.token != "" {
		overrides.AuthInfo.Token = c.token
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no server to talk to: %w (give --server or a kubeconfig)", err)
	}
	ns := c.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "evctl"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	return cs, ns, nil
}
