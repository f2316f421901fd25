package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// azTokens are the static tokens of the ABAC test: token → user line.
var azTokens = map[string]string{
	"tok-alice": `alice,1001`,
	"tok-bob":   `bob,1002`,
	"tok-sam":   `sam,1003,"sre"`,
	"tok-root":  `root,1,"system:masters"`,
	"tok-prom":  `prometheus,1004`,
	"tok-eve":   `eve,1005`,
}

// azHTTPClient is a client for azStart's self-signed HTTPS.
func azHTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test's own self-signed server
}

func azWriteFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func azTokenFile(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for tok, rest := range azTokens {
		fmt.Fprintf(&b, "%s,%s\n", tok, rest)
	}
	return azWriteFile(t, "tokens.csv", b.String())
}

// azClient is a clientset authenticating with token.
func azClient(t *testing.T, p *eventsdtest.Process, token string) kubernetes.Interface {
	t.Helper()
	cfg := p.RESTConfig()
	cfg.BearerToken = token
	return cgClientset(t, cfg)
}

// azStart starts eventsd over HTTPS (kubectl sends tokens only over TLS)
// with args.
func azStart(t *testing.T, args ...string) *eventsdtest.Process {
	t.Helper()
	cert, key, _ := cgServingCert(t, "localhost")
	return eventsdtest.Start(t, eventsdtest.Options{Args: append([]string{"--tls-cert-file", cert, "--tls-private-key-file", key}, args...)})
}

// azKubeconfig writes a kubeconfig for p with a bearer token.
func azKubeconfig(t *testing.T, p *eventsdtest.Process, token string) string {
	t.Helper()
	return azWriteFile(t, "kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eventsd
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: eventsd
  context: {cluster: eventsd, namespace: default, user: u}
current-context: eventsd
users:
- name: u
  user: {token: %q}
`, p.URL, token))
}

func azExpectForbidden(t *testing.T, err error, what, message string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
		return
	}
	if message != "" && !strings.Contains(err.Error(), message) {
		t.Errorf("%s: %q, want it to contain %q", what, err.Error(), message)
	}
}

// TestAuthorizationABAC runs eventsd with the README's example ABAC policy
// (docs/examples/abac-policy.jsonl): a namespace-scoped user, a read-only
// user, a cluster-wide group, a metrics scraper and system:masters.
func TestAuthorizationABAC(t *testing.T) {
	t.Parallel()
	policy, err := filepath.Abs(filepath.Join("..", "..", "docs", "examples", "abac-policy.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	p := azStart(t, "--token-auth-file", azTokenFile(t), "--authorization-mode", "ABAC", "--authorization-policy-file", policy)
	ctx := cgCtx(t)
	alice, bob, sam := azClient(t, p, "tok-alice"), azClient(t, p, "tok-bob"), azClient(t, p, "tok-sam")
	root, eve := azClient(t, p, "tok-root"), azClient(t, p, "tok-eve")

	// alice: everything in dev, nothing elsewhere, not across namespaces.
	cgCreateCore(t, alice, cgCoreEvent("dev", "a1", "pod"))
	if _, err := alice.EventsV1().Events("dev").Create(ctx, cgNewEvent("dev", "a2", "pod"), metav1.CreateOptions{}); err != nil {
		t.Errorf("alice creates events.k8s.io in dev: %v", err)
	}
	if err := alice.CoreV1().Events("dev").Delete(ctx, "a2", metav1.DeleteOptions{}); err != nil {
		t.Errorf("alice deletes in dev: %v", err)
	}
	_, err = alice.CoreV1().Events("prod").Create(ctx, cgCoreEvent("prod", "a3", "pod"), metav1.CreateOptions{})
	azExpectForbidden(t, err, "alice creates in prod", `events is forbidden: User "alice" cannot create resource "events" in API group "" in the namespace "prod"`)
	_, err = alice.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "alice lists all namespaces", `events is forbidden: User "alice" cannot list resource "events" in API group "" at the cluster scope`)
	_, err = alice.EventsV1().Events("").Watch(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "alice watches all namespaces", `User "alice" cannot watch resource "events" in API group "events.k8s.io" at the cluster scope`)

	// sam (group sre): every namespace and across them.
	cgCreateCore(t, sam, cgCoreEvent("prod", "s1", "pod"))
	if l, err := sam.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Errorf("sre lists all namespaces: %v %v", l, err)
	}
	w, err := sam.EventsV1().Events("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("sre watches all namespaces: %v", err)
	} else {
		w.Stop()
	}

	// bob: reads prod, writes nothing.
	if l, err := bob.CoreV1().Events("prod").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("bob lists prod: %v %v", l, err)
	}
	if _, err := bob.EventsV1().Events("prod").Get(ctx, "s1", metav1.GetOptions{}); err != nil {
		t.Errorf("bob gets in prod: %v", err)
	}
	_, err = bob.CoreV1().Events("prod").Create(ctx, cgCoreEvent("prod", "b1", "pod"), metav1.CreateOptions{})
	azExpectForbidden(t, err, "bob creates in prod", `User "bob" cannot create resource "events"`)
	err = bob.CoreV1().Events("prod").Delete(ctx, "s1", metav1.DeleteOptions{})
	azExpectForbidden(t, err, "bob deletes in prod", `events "s1" is forbidden: User "bob" cannot delete resource "events" in API group "" in the namespace "prod"`)
	err = bob.CoreV1().Events("prod").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	azExpectForbidden(t, err, "bob deletes the collection in prod", `cannot deletecollection resource "events"`)

	// eve has a token but no policy: discovery only.
	_, err = eve.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "eve lists default", `User "eve" cannot list resource "events"`)
	if _, err := eve.Discovery().ServerResourcesForGroupVersion("events.k8s.io/v1"); err != nil {
		t.Errorf("eve's discovery: %v", err)
	}
	// system:masters may do anything.
	if _, err := root.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("system:masters lists all namespaces: %v", err)
	}

	// /metrics and /debug need their non-resource permission.
	client := azHTTPClient()
	if r := cgGetWithAuth(t, client, "GET", p.URL+"/metrics", "Bearer tok-bob"); r.code != http.StatusForbidden ||
		!strings.Contains(string(r.body), `forbidden: User \"bob\" cannot get path \"/metrics\"`) {
		t.Errorf("bob GET /metrics: %d %s", r.code, r.body)
	}
	m := cgMetrics(t, p.URL, "tok-prom")
	if m[`eventsd_forbidden_requests_total{outcome="rejected"}`] < 7 {
		t.Errorf("eventsd_forbidden_requests_total{outcome=\"rejected\"} = %v, want >= 7", m[`eventsd_forbidden_requests_total{outcome="rejected"}`])
	}
	if r := cgGetWithAuth(t, client, "GET", p.URL+"/api/v1/namespaces/dev/events", ""); r.code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", r.code, r.body)
	}
	// Health checks stay open.
	if r := cgGetWithAuth(t, client, "GET", p.URL+"/readyz", ""); r.code != http.StatusOK {
		t.Errorf("/readyz: %d %s", r.code, r.body)
	}

	// kubectl as the restricted user: discovery works, its namespace
	// lists, another namespace gets kube-apiserver's Forbidden message.
	kc := azKubeconfig(t, p, "tok-bob")
	if res := p.Kubectl(kc, "get", "events", "-n", "prod"); res.Err != nil || !strings.Contains(res.Stdout, "s1") {
		t.Errorf("kubectl get events -n prod as bob: %v\n%s\n%s", res.Err, res.Stdout, res.Stderr)
	}
	res := p.Kubectl(kc, "get", "events", "-n", "kube-system")
	want := `Error from server (Forbidden): events is forbidden: User "bob" cannot list resource "events" in API group "" in the namespace "kube-system"`
	if res.Err == nil || !strings.Contains(res.Stderr, want) {
		t.Errorf("kubectl get events -n kube-system as bob: %v\nstdout %s\nstderr %s\nwant %s", res.Err, res.Stdout, res.Stderr, want)
	}
	// A missing event outside default: kubectl's follow-up get of the
	// namespace is refused (bob may read events only), and kubectl then
	// shows the event's own 404, as with kube-apiserver.
	const rejected = `eventsd_forbidden_requests_total{outcome="rejected"}`
	before := cgMetrics(t, p.URL, "tok-prom")[rejected]
	res = p.Kubectl(kc, "get", "event", "missing", "-n", "prod")
	if want := `Error from server (NotFound): events "missing" not found`; res.Err == nil || !strings.Contains(res.Stderr, want) {
		t.Errorf("kubectl get event missing -n prod as bob: %v\nstderr %s\nwant %s", res.Err, res.Stderr, want)
	}
	if after := cgMetrics(t, p.URL, "tok-prom")[rejected]; after != before+1 {
		t.Errorf("%s went from %v to %v over kubectl's get of a missing event, want one refusal (the namespace)", rejected, before, after)
	}
	if r := cgGetWithAuth(t, client, "GET", p.URL+"/api/v1/namespaces/prod", "Bearer tok-root"); r.code != http.StatusOK ||
		!strings.Contains(string(r.body), `"kind":"Namespace"`) {
		t.Errorf("system:masters gets namespace prod: %d %s", r.code, r.body)
	}
	res = p.Kubectl(kc, "get", "events", "-A")
	if res.Err == nil || !strings.Contains(res.Stderr, `User "bob" cannot list resource "events" in API group "" at the cluster scope`) {
		t.Errorf("kubectl get events -A as bob: %v\n%s", res.Err, res.Stderr)
	}
}

// azRunEventsd runs eventsd with args, expecting it to exit; it returns
// the combined output.
func azRunEventsd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, eventsdtest.Binary(t), append([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAuthorizationStartupErrors: configurations that cannot work are
// refused at start with an error naming the flag.
func TestAuthorizationStartupErrors(t *testing.T) {
	t.Parallel()
	tokens := azTokenFile(t)
	policy := azWriteFile(t, "policy.jsonl", `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "a", "resource": "*"}}`+"\n")
	badPolicy := azWriteFile(t, "bad.jsonl", `{"user": "a"}`+"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--authorization-mode", "ABAC", "--authorization-policy-file", policy}, "needs authentication"},
		{[]string{"--token-auth-file", tokens, "--authorization-mode", "ABAC"}, "--authorization-mode=ABAC needs --authorization-policy-file"},
		{[]string{"--token-auth-file", tokens, "--authorization-policy-file", policy}, "--authorization-policy-file needs --authorization-mode to include ABAC"},
		{[]string{"--token-auth-file", tokens, "--authorization-mode", "ABAC", "--authorization-policy-file", badPolicy}, "line 1"},
		{[]string{"--token-auth-file", tokens, "--authorization-mode", "RBAC"}, "eventsd has no RBAC mode"},
		{[]string{"--token-auth-file", tokens, "--authorization-mode", "Webhook"}, "needs --authorization-webhook-config-file"},
		{[]string{"--token-auth-file", tokens, "--authorization-mode", "ABAC,ABAC", "--authorization-policy-file", policy}, "ABAC given twice"},
	} {
		out, err := azRunEventsd(t, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("eventsd %s: %v\n%s\nwant an error containing %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// azWebhook is a loopback TLS server answering TokenReview (at
// /tokenreview) and SubjectAccessReview (at /authorize) per the
// Kubernetes webhook contract, as a cluster's kube-apiserver would: tokens
// "tok-NAME" are user NAME in group "team-NAME"; a user may do anything in
// the namespace named after them, and get non-resource paths.
type azWebhook struct {
	srv                  *httptest.Server
	tokenCalls, sarCalls atomic.Int64
	mu                   sync.Mutex
	sars                 []authorizationv1.SubjectAccessReviewSpec
}

func newAZWebhook(t *testing.T) *azWebhook {
	t.Helper()
	wh := &azWebhook{}
	mux := http.NewServeMux()
	mux.HandleFunc("/tokenreview", func(w http.ResponseWriter, r *http.Request) {
		wh.tokenCalls.Add(1)
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if name, ok := strings.CutPrefix(tr.Spec.Token, "tok-"); ok && name != "" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: name, UID: "uid-" + name, Groups: []string{"team-" + name}}}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: false}
		}
		azWriteJSON(w, &tr)
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		wh.sarCalls.Add(1)
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		wh.mu.Lock()
		wh.sars = append(wh.sars, sar.Spec)
		wh.mu.Unlock()
		switch ra := sar.Spec.ResourceAttributes; {
		case sar.Spec.NonResourceAttributes != nil:
			sar.Status.Allowed = sar.Spec.NonResourceAttributes.Verb == "get"
		case ra != nil && ra.Namespace == sar.Spec.User:
			sar.Status.Allowed = true
		default:
			sar.Status.Reason = "no RBAC policy matched"
		}
		azWriteJSON(w, &sar)
	})
	wh.srv = httptest.NewTLSServer(mux)
	t.Cleanup(wh.srv.Close)
	return wh
}

func azWriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// kubeconfig is a webhook configuration file pointing at path, trusting
// the server's certificate.
func (wh *azWebhook) kubeconfig(t *testing.T, path string) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: wh.srv.Certificate().Raw})
	return azWriteFile(t, "webhook.kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: webhook
  cluster:
    server: %s%s
    certificate-authority-data: %s
users:
- name: eventsd
  user: {}
contexts:
- name: webhook
  context: {cluster: webhook, user: eventsd}
current-context: webhook
`, wh.srv.URL, path, base64.StdEncoding.EncodeToString(ca)))
}

func (wh *azWebhook) lastSAR(t *testing.T) authorizationv1.SubjectAccessReviewSpec {
	t.Helper()
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if len(wh.sars) == 0 {
		t.Fatal("no SubjectAccessReview received")
	}
	return wh.sars[len(wh.sars)-1]
}

// TestAuthorizationWebhooks: users' tokens are checked by a TokenReview
// webhook and their requests by a SubjectAccessReview webhook (after
// ABAC), both cached; with the webhooks down, requests are denied clearly.
func TestAuthorizationWebhooks(t *testing.T) {
	t.Parallel()
	wh := newAZWebhook(t)
	policy := azWriteFile(t, "policy.jsonl", `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "ann", "namespace": "shared", "resource": "events", "readonly": true}}`+"\n")
	p := azStart(t, "--authentication-token-webhook-config-file", wh.kubeconfig(t, "/tokenreview"),
		"--authorization-mode", "ABAC,Webhook", "--authorization-policy-file", policy,
		"--authorization-webhook-config-file", wh.kubeconfig(t, "/authorize"))
	ctx := cgCtx(t)
	ann := azClient(t, p, "tok-ann")

	// The webhook allows ann her namespace; she is in her webhook groups
	// and system:authenticated.
	cgCreateCore(t, ann, cgCoreEvent("ann", "e1", "pod"))
	sar := wh.lastSAR(t)
	if sar.User != "ann" || sar.UID != "uid-ann" || strings.Join(sar.Groups, ",") != "team-ann,system:authenticated" ||
		sar.ResourceAttributes == nil || *sar.ResourceAttributes != (authorizationv1.ResourceAttributes{Namespace: "ann", Verb: "create", Version: "v1", Resource: "events"}) {
		t.Errorf("SubjectAccessReview spec %+v, resource attributes %+v", sar, sar.ResourceAttributes)
	}
	// Decisions and tokens are cached: the same requests again make no
	// webhook calls.
	tokens, sars := wh.tokenCalls.Load(), wh.sarCalls.Load()
	for range 3 {
		if _, err := ann.CoreV1().Events("ann").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("ann lists her namespace: %v", err)
		}
	}
	if got := wh.sarCalls.Load() - sars; got != 1 {
		t.Errorf("3 identical lists made %d SubjectAccessReviews, want 1 (cached)", got)
	}
	if got := wh.tokenCalls.Load() - tokens; got != 0 {
		t.Errorf("3 lists with a known token made %d TokenReviews, want 0 (cached)", got)
	}
	// The webhook's denial is kube-apiserver's Forbidden with its reason.
	_, err := ann.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{})
	// The reasons of every mode asked are joined, as kube-apiserver's
	// union authorizer joins them.
	azExpectForbidden(t, err, "ann lists kube-system", `events is forbidden: User "ann" cannot list resource "events" in API group "" in the namespace "kube-system": ABAC: No policy matched.
Webhook: no RBAC policy matched`)
	// ABAC allows before the webhook is asked.
	sars = wh.sarCalls.Load()
	if _, err := ann.CoreV1().Events("shared").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("ann lists shared (ABAC): %v", err)
	}
	if got := wh.sarCalls.Load() - sars; got != 0 {
		t.Errorf("a request ABAC allows made %d SubjectAccessReviews", got)
	}
	// Non-resource requests are reviewed as such.
	if r := cgGetWithAuth(t, azHTTPClient(), "GET", p.URL+"/metrics", "Bearer tok-ann"); r.code != http.StatusOK {
		t.Errorf("ann GET /metrics: %d %s", r.code, r.body)
	}
	if sar := wh.lastSAR(t); sar.NonResourceAttributes == nil || *sar.NonResourceAttributes != (authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}) {
		t.Errorf("non-resource SubjectAccessReview %+v", sar)
	}
	// An unknown token is 401.
	_, err = azClient(t, p, "nope").CoreV1().Events("ann").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("unknown token: %v, want Unauthorized", err)
	}

	// kubectl with the user's own token.
	kc := azKubeconfig(t, p, "tok-ann")
	if res := p.Kubectl(kc, "get", "events", "-n", "ann"); res.Err != nil || !strings.Contains(res.Stdout, "e1") {
		t.Errorf("kubectl get events -n ann: %v\n%s\n%s", res.Err, res.Stdout, res.Stderr)
	}

	// The webhooks go down. Cached tokens and decisions still work; a
	// new token is 401 and a new decision is denied with 500 naming
	// the failure, and nothing is written.
	wh.srv.Close()
	if _, err := ann.CoreV1().Events("ann").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("cached decision with the webhook down: %v", err)
	}
	_, err = azClient(t, p, "tok-zed").CoreV1().Events("zed").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("new token with the token webhook down: %v, want Unauthorized", err)
	}
	err = ann.CoreV1().Events("ann").Delete(ctx, "e1", metav1.DeleteOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "authorization failed, so the request is denied") {
		t.Errorf("new decision with the authorization webhook down: %v, want a 500 saying authorization failed", err)
	}
	if l, err := ann.CoreV1().Events("ann").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("after the denied delete: %v %v", l, err)
	}
	m := cgMetrics(t, p.URL, "tok-ann")
	for _, s := range []string{`eventsd_unauthorized_requests_total{outcome="error"}`, `eventsd_forbidden_requests_total{outcome="error"}`} {
		if m[s] < 1 {
			t.Errorf("%s = %v, want >= 1", s, m[s])
		}
	}
	// Each failure is logged with its cause.
	var authnErr, authzErr bool
	for _, l := range strings.Split(p.Logs(), "\n") {
		authnErr = authnErr || strings.Contains(l, `msg="unable to authenticate the request"`) && strings.Contains(l, "connection refused")
		authzErr = authzErr || strings.Contains(l, `msg="request denied: authorization failed"`) && strings.Contains(l, "connection refused")
	}
	if !authnErr || !authzErr {
		t.Errorf("eventsd log lacks the token webhook's failure (%v) or the authorization webhook's (%v)", authnErr, authzErr)
	}
	if m[`eventsd_unauthorized_requests_total{outcome="rejected"}`] < 1 {
		t.Errorf("the unknown token was not counted as rejected: %v", m)
	}
}
