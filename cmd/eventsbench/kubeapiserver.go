package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeAPIServerURLRE matches kube-apiserver's log line once it serves
// (host:port; startChild makes it an https URL).
var kubeAPIServerURLRE = regexp.MustCompile(`Serving securely on (\S+)`)

// kubeAPIServerStartTimeout bounds kube-apiserver's start: it installs
// its APIs and bootstraps its RBAC and priority levels first.
const kubeAPIServerStartTimeout = 3 * time.Minute

// kubeAPIServerPrefix is kube-apiserver's --etcd-prefix here: apart from
// eventsd's /registry in the shared events etcd, so that eventsd's watch
// of its prefix does not spend CPU on kube-apiserver's writes.
const kubeAPIServerPrefix = "/kube-apiserver-registry"

// kubeAPIServerFlags describes kube-apiserver's settings for the report.
const kubeAPIServerFlags = "--etcd-servers=<its own main etcd> --etcd-servers-overrides=/events#<the benchmark etcd> --etcd-prefix=" + kubeAPIServerPrefix +
	" --event-ttl=24h --authorization-mode=AlwaysAllow --token-auth-file (system:masters) --endpoint-reconciler-type=none, HTTPS with its self-signed certificate; otherwise defaults (as /work/shared/tools/upstream/start.sh)"

// startKubeAPIServer starts kube-apiserver (bin) on loopback with a main
// etcd of its own (a child too, returned first) and eventsEtcd for
// events, as big clusters split them, and creates the benchmark's
// namespaces, which kube-apiserver requires. It returns the main etcd,
// kube-apiserver and the admin token; on error, the children started are
// returned for the caller to stop.
func startKubeAPIServer(ctx context.Context, bin string, etcd etcdProc, dir, eventsEtcd string, namespaces int) (mainEtcd, ka *child, token string, err error) {
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, nil, "", err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, nil, "", err
	}
	token = hex.EncodeToString(tok)
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(token+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, nil, "", err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, "", err
	}
	if err := os.WriteFile(filepath.Join(pki, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return nil, nil, "", err
	}
	if err := os.WriteFile(filepath.Join(pki, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, nil, "", err
	}
	mainEtcd, err = etcd.start(ctx, filepath.Join(dir, "etcd-main"))
	if err != nil {
		return nil, nil, "", fmt.Errorf("kube-apiserver's main etcd: %w", err)
	}
	u, err := resolvePort("https://127.0.0.1:0")
	if err != nil {
		return mainEtcd, nil, "", err
	}
	args := []string{
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + u.Port(), "--cert-dir=" + pki,
		"--etcd-servers=" + mainEtcd.URL, "--etcd-servers-overrides=/events#" + eventsEtcd, "--etcd-prefix=" + kubeAPIServerPrefix,
		"--authorization-mode=AlwaysAllow", "--token-auth-file=" + filepath.Join(pki, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"), "--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--event-ttl=24h", "--endpoint-reconciler-type=none",
	}
	// Its /readyz wants the token: readiness is polled below.
	ka, err = startChildWithin(ctx, kubeAPIServerStartTimeout, "kube-apiserver", bin, args, kubeAPIServerURLRE, "https", "")
	if err != nil {
		return mainEtcd, nil, "", err
	}
	cs, err := newClientsetAuth(ka.URL, wireProtobuf, token, nil)
	if err != nil {
		return mainEtcd, ka, "", err
	}
	deadline := time.Now().Add(kubeAPIServerStartTimeout)
	for {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			break
		}
		if xerr := ka.exited(); xerr != nil {
			return mainEtcd, ka, "", xerr
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return mainEtcd, ka, "", fmt.Errorf("kube-apiserver at %s not ready within %s: %w\n%s", ka.URL, kubeAPIServerStartTimeout, err, ka.logs)
		}
		sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
	}
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return mainEtcd, ka, "", fmt.Errorf("kube-apiserver: create namespace %s: %w", ns.Name, err)
		}
	}
	return mainEtcd, ka, token, nil
}

// kubeAPIServerVersion returns what "bin --version" prints, for the report.
func kubeAPIServerVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
