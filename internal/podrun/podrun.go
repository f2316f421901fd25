// Package podrun is a test harness that runs eventsd as a pod of the
// manifests in deploy/ would run it, outside a cluster: the container's
// authentication and TLS flags, with the files they name taken from the
// pod's ConfigMap and Secret, and the pod's view of its cluster (the
// service account's token and CA, https://kubernetes.default.svc) pointed
// at a real kube-apiserver. test/deploy runs the chart's and the bases'
// renders with it, test/readme what docs/install.md installs.
package podrun

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// What a pod sees of its cluster, as the webhook kubeconfigs name it.
const (
	podCA     = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	podToken  = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	podServer = "https://kubernetes.default.svc:443/"
)

// Pod is what of a pod template Start runs.
type Pod struct {
	// Args are the eventsd container's arguments.
	Args []string
	// Files are the contents of the files the arguments name, by their
	// base name (a ConfigMap's or a Secret's keys: tokenreview-kubeconfig.yaml,
	// tls.crt, ...).
	Files map[string][]byte
}

// Cluster is the kube-apiserver that stands for the pod's cluster.
type Cluster struct {
	// URL is kube-apiserver's base URL.
	URL string
	// CA is the PEM of the CA kube-apiserver's certificate is verified with.
	CA []byte
	// Token is the pod's service account token.
	Token string
}

// Flags whose files Start writes from Pod.Files; the other flags are
// the pod's business (its listen address, data directory, mirror) and left
// out.
var fileFlags = map[string]bool{
	"--authentication-token-webhook-config-file": true,
	"--authorization-webhook-config-file":        true,
	"--tls-cert-file":                            true,
	"--tls-private-key-file":                     true,
}

// Args are the pod's authentication, authorization and TLS flags for an
// eventsd outside the pod: the files they name written into dir from
// pod.Files, the webhook kubeconfigs pointed at c. A webhook kubeconfig
// that does not name the pod's service account token, CA and
// kube-apiserver is an error (the test would not run what the pod runs).
func Args(pod Pod, c Cluster, dir string) ([]string, error) {
	caFile, tokenFile := filepath.Join(dir, "cluster-ca.crt"), filepath.Join(dir, "cluster-token")
	if err := os.WriteFile(caFile, c.CA, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(tokenFile, []byte(c.Token), 0o600); err != nil {
		return nil, err
	}
	var args []string
	for _, a := range pod.Args {
		name, value, _ := strings.Cut(a, "=")
		switch {
		case name == "--authorization-mode":
			args = append(args, a)
		case fileFlags[name]:
			b, ok := pod.Files[path.Base(value)]
			if !ok {
				return nil, fmt.Errorf("%s: the pod has no file %s", a, path.Base(value))
			}
			if strings.HasSuffix(name, "-webhook-config-file") {
				for _, s := range []string{podCA, podToken, podServer} {
					if !strings.Contains(string(b), s) {
						return nil, fmt.Errorf("%s: the webhook kubeconfig does not name %s:\n%s", a, s, b)
					}
				}
				b = []byte(strings.NewReplacer(podCA, caFile, podToken, tokenFile, podServer, c.URL+"/").Replace(string(b)))
			}
			file := filepath.Join(dir, path.Base(value))
			if err := os.WriteFile(file, b, 0o600); err != nil {
				return nil, err
			}
			args = append(args, name+"="+file)
		}
	}
	return args, nil
}

// Start runs eventsd on loopback with Args and extra flags, failing the
// test on an error.
func Start(t testing.TB, pod Pod, c Cluster, extra ...string) *eventsdtest.Process {
	t.Helper()
	args, err := Args(pod, c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return eventsdtest.Start(t, eventsdtest.Options{Args: append(args, extra...)})
}
