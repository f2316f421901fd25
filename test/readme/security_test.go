package readme

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// securityDoc is the page whose commands TestSecurityPage runs.
const securityDoc = "docs/security.md"

// TestSecurityPage runs docs/security.md's commands as a reader would:
// openssl's certificate and tokens, eventsd serving HTTPS with them and
// the page's ABAC policy, kubectl in a context of bob's own (his
// namespace listed, another refused with the Forbidden the page shows),
// curl reading /metrics as prometheus (200; 403 with bob's token); then
// eventsd beside a real kube-apiserver, delegating tokens and decisions
// to it with the page's two kubeconfig files: a cluster user reads the
// events of the namespace RBAC gives them, is refused another (403), and
// an unknown token is refused (401).
func TestSecurityPage(t *testing.T) {
	t.Parallel()
	needs(t, "openssl", "curl")
	const (
		certs        = "openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=eventsd \\"
		abacServer   = "go run ./cmd/eventsd --tls-cert-file tls.crt --tls-private-key-file tls.key --data-dir ./secure-data \\"
		bobContext   = "kubectl config set-cluster eventsd-tls --server=https://127.0.0.1:8080 --certificate-authority=tls.crt --embed-certs"
		bobForbidden = "kubectl --context bob@eventsd get events -n kube-system"
		metrics      = "curl -s -o /dev/null -w '%{http_code}\\n' --cacert tls.crt https://127.0.0.1:8080/metrics \\"
		webhook      = "eventsd --tls-cert-file tls.crt --tls-private-key-file tls.key \\"
	)
	blocks := pageBlocks(t, securityDoc, []string{certs, abacServer, bobContext, bobForbidden, metrics, webhook}, nil)
	md, err := doctest.Read(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	// The page's Forbidden, its one ```text block.
	forbidden := strings.TrimSpace(doctest.Blocks(md, "text")[0])
	// The kubeconfig the page shows for the token webhook, whose
	// CLUSTER, CA and token file the reader fills in.
	var reviewKubeconfig string
	for _, b := range doctest.Blocks(md, "yaml") {
		if strings.HasPrefix(b, "# tokenreview.kubeconfig") {
			reviewKubeconfig = b
		}
	}
	if reviewKubeconfig == "" {
		t.Fatalf("%s has no ```yaml block of tokenreview.kubeconfig", securityDoc)
	}

	// The blocks run in a directory holding what they read of the clone.
	r := newPageReader(t, securityDoc, blocks, commandsBin(t), "docs/examples/abac-policy.jsonl")
	addr := eventsdtest.FreeAddr(t)
	// eventsd is built once and on PATH (go run would build it again at
	// each block), and listens on a free port instead of 8080, which
	// another test may hold; the blocks reach it there (the certificate
	// is for the IP, whatever the port).
	r.substitute("go run ./cmd/eventsd", "eventsd --listen "+addr)
	r.substitute("127.0.0.1:8080", addr)

	r.run(certs)
	stop := r.start(abacServer, "eventsd serving")
	if out := r.run(bobContext); !strings.Contains(out, "No resources found in prod namespace.") {
		t.Errorf("bob's events in prod: want No resources found in prod namespace.; kubectl printed:\n%s", out)
	}
	// "--context leaves the current one as it is": none here.
	if cfg, err := clientcmd.LoadFromFile(filepath.Join(r.home, ".kube", "config")); err != nil {
		t.Errorf("the reader's kubeconfig after the block: %v", err)
	} else if cfg.CurrentContext != "" {
		t.Errorf("the reader's kubeconfig after the block: current context %q, want it left as it was (none)", cfg.CurrentContext)
	}
	out, err := r.try(bobForbidden)
	if err == nil || !strings.Contains(out, forbidden) {
		t.Errorf("bob's events in kube-system: %v; want kubectl to fail with the page's\n%s\nit printed:\n%s", err, forbidden, out)
	}
	if out := r.run(metrics); strings.TrimSpace(out) != "200" {
		t.Errorf("/metrics with prometheus' token: %q, want 200", out)
	}
	// The page's "with bob's token, 403": its block with bob's token.
	r.substitute("',prometheus,'", "',bob,'")
	if out := r.run(metrics); strings.TrimSpace(out) != "403" {
		t.Errorf("/metrics with bob's token: %q, want 403", out)
	}
	stop()

	// Beside a cluster: a real kube-apiserver (RBAC), eventsd's identity
	// bound to system:auth-delegator, a user alice who may read the
	// events of namespace dev only.
	kas := kubeapiserver.Start(t, kubeapiserver.Options{Users: []kubeapiserver.User{{Name: "eventsd"}, {Name: "alice"}}})
	cs := kubernetes.NewForConfigOrDie(kas.RESTConfig())
	ctx := context.Background()
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "eventsd-auth-delegator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "eventsd"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kas.EnsureNamespace(ctx, "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles("dev").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "events-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("dev").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "events-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The page's kubeconfig, filled in as its reader would: the cluster's
	// address and CA, and a file holding eventsd's token.
	tokenFile := filepath.Join(r.dir, "eventsd.token")
	if err := os.WriteFile(tokenFile, []byte(kas.Token("eventsd")), 0o600); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("https://CLUSTER:6443", kas.URL(), "/etc/eventsd/cluster-ca.crt", kas.CAFile(),
		"/var/run/secrets/kubernetes.io/serviceaccount/token", tokenFile)
	tokenReview := fill.Replace(reviewKubeconfig)
	authorize := strings.Replace(tokenReview, "/apis/authentication.k8s.io/v1/tokenreviews", "/apis/authorization.k8s.io/v1/subjectaccessreviews", 1)
	for name, text := range map[string]string{"tokenreview.kubeconfig": tokenReview, "authorize.kubeconfig": authorize} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr = eventsdtest.FreeAddr(t)
	// The block names eventsd, on PATH; it listens on a free port.
	r.substitute("eventsd --tls-cert-file", "eventsd --listen "+addr+" --tls-cert-file")
	r.start(webhook, "eventsd serving")

	asUser := func(token string, args ...string) eventsdtest.KubectlResult {
		t.Helper()
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["eventsd"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthority: filepath.Join(r.dir, "tls.crt")}
		cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts["user"] = &clientcmdapi.Context{Cluster: "eventsd", AuthInfo: "user"}
		cfg.CurrentContext = "user"
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return eventsdtest.RunKubectl(ctx, t, path, nil, args...)
	}
	if res := asUser(kas.Token("alice"), "get", "events", "-n", "dev"); res.Err != nil || !strings.Contains(res.Stderr, "No resources found in dev namespace.") {
		t.Errorf("alice's events in dev, which the cluster's RBAC lets her read: %v\n%s%s", res.Err, res.Stdout, res.Stderr)
	}
	if res := asUser(kas.Token("alice"), "get", "events.v1.events.k8s.io", "-n", "dev"); res.Err != nil {
		t.Errorf("alice's events.k8s.io events in dev: %v\n%s%s", res.Err, res.Stdout, res.Stderr)
	}
	if res := asUser(kas.Token("alice"), "get", "events", "-n", "prod"); res.Err == nil || !strings.Contains(res.Stderr, `User "alice" cannot list resource "events" in API group "" in the namespace "prod"`) {
		t.Errorf("alice's events in prod: %v, want Forbidden\n%s%s", res.Err, res.Stdout, res.Stderr)
	}
	if res := asUser("not-a-token", "get", "events", "-n", "dev"); res.Err == nil || !strings.Contains(res.Stderr, "You must be logged in to the server") {
		t.Errorf("an unknown token: %v, want kubectl's 401 (You must be logged in)\n%s%s", res.Err, res.Stdout, res.Stderr)
	}
}
