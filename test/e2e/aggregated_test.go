package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubevents/kubevents/evctl"
	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// aggComponent is the kustomize component under test, from this package.
var aggComponent = filepath.Join("..", "..", "deploy", "kustomize", "components", "aggregated")

// aggOverlay writes a kustomization in a new directory that lists the
// component (by a path relative to it, as kustomize requires) and files
// (name -> content), and returns the directory.
func aggOverlay(t *testing.T, kustomization string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	comp, err := filepath.Abs(aggComponent)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, comp)
	if err != nil {
		t.Fatal(err)
	}
	files["kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - " + rel + "\n" + kustomization
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// aggKubeconfig writes a kubeconfig for cluster c with token.
func aggKubeconfig(t *testing.T, c *kubeapiserver.Cluster, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: c.URL(), CertificateAuthorityData: c.CA()}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiServices is the resource of APIServices (read with the dynamic
// client: kube-aggregator's clientset is not a dependency).
var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// apiServiceAvailable reports the Available condition of eventsd's
// APIService, and its status, reason and message.
func apiServiceAvailable(ctx context.Context, dc dynamic.Interface) (bool, string) {
	as, err := dc.Resource(apiServices).Get(ctx, "v1.events.kubevents.io", metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			return m["status"] == "True", fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return false, "no Available condition"
}

// TestAggregatedComponentDryRun: the component as shipped (APIService,
// the auth-delegator ClusterRoleBinding, the RoleBinding in kube-system
// and the readers' ClusterRole) passes kube-apiserver's server-side
// dry run, every object, and nothing is created.
func TestAggregatedComponentDryRun(t *testing.T) {
	c := kubeapiserver.Start(t, kubeapiserver.Options{FrontProxy: true})
	ctx := cgCtx(t)
	dir := aggOverlay(t, "", map[string]string{})
	r := eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, "apply", "--dry-run=server", "-k", dir)
	if r.Err != nil {
		t.Fatalf("kubectl apply --dry-run=server -k: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	for _, want := range []string{
		"apiservice.apiregistration.k8s.io/v1.events.kubevents.io created (server dry run)",
		"clusterrolebinding.rbac.authorization.k8s.io/eventsd:aggregated:auth-delegator created (server dry run)",
		"rolebinding.rbac.authorization.k8s.io/eventsd:aggregated:extension-apiserver-authentication-reader created (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/kubevents:events-reader created (server dry run)",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("dry run: no %q in:\n%s", want, r.Stdout)
		}
	}
	dc, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(apiServices).Get(ctx, "v1.events.kubevents.io", metav1.GetOptions{}); err == nil {
		t.Errorf("a dry run created the APIService")
	}
	// The RoleBinding must stay in kube-system, where the Role is.
	r = eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, "kustomize", dir)
	if r.Err != nil || !strings.Contains(r.Stdout, "name: eventsd:aggregated:extension-apiserver-authentication-reader\n  namespace: kube-system\n") {
		t.Errorf("kubectl kustomize: %v: the RoleBinding is not in kube-system:\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
}

// aggEventsd is the namespace, ServiceAccount and Service an install of
// eventsd has (the Service an ExternalName for localhost: there is no
// cluster network behind a kube-apiserver on loopback, and the aggregator
// dials an ExternalName service's name), and a ClusterRoleBinding giving
// user reader the component's ClusterRole.
const aggEventsd = `apiVersion: v1
kind: Namespace
metadata:
  name: kubevents
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: eventsd
  namespace: kubevents
---
apiVersion: v1
kind: Service
metadata:
  name: eventsd
  namespace: kubevents
spec:
  type: ExternalName
  externalName: localhost
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: reader-reads-kubevents
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kubevents:events-reader
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: reader
`

// TestAggregatedAPI: eventsd registered with a real kube-apiserver's
// aggregator by the kustomize component (its CA patched in, so the
// aggregator verifies eventsd), delegating authentication and
// authorization to the cluster as the component's RBAC lets it:
//   - kubectl get events.events.kubevents.io -A --field-selector
//     involves.name=web-1 through kube-apiserver lists eventsd's events
//     involving web-1 (as regarding or related object), for a user whose
//     RBAC allows it, and is refused (403) for one whose RBAC does not;
//   - evctl --kubeconfig <the cluster's> reads eventsd's events (not the
//     cluster's own events.k8s.io), and is refused likewise;
//   - with eventsd's store (etcd) down, discovery of the group through
//     kube-apiserver still answers at once;
//   - with eventsd down, kube-apiserver's discovery answers at once, the
//     group's requests are refused with 503 rather than hanging, other
//     groups are served, and the APIService turns Available=False.
func TestAggregatedAPI(t *testing.T) {
	c := kubeapiserver.Start(t, kubeapiserver.Options{FrontProxy: true, Users: []kubeapiserver.User{{Name: "reader"}, {Name: "stranger"}}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	store := etcdproc.Start(t, 1)
	// The name kube-apiserver's aggregator verifies.
	certFile, keyFile, caPEM := cgServingCert(t, "eventsd.kubevents.svc")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	overlay := aggOverlay(t, `resources:
  - eventsd.yaml
patches:
  - target: {kind: APIService, name: v1.events.kubevents.io}
    patch: |-
      - op: remove
        path: /spec/insecureSkipTLSVerify
      - op: add
        path: /spec/caBundle
        value: `+base64.StdEncoding.EncodeToString(caPEM)+`
      - op: replace
        path: /spec/service/port
        value: `+strconv.Itoa(port)+`
`, map[string]string{"eventsd.yaml": aggEventsd})
	if r := eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, "apply", "-k", overlay); r.Err != nil {
		t.Fatalf("kubectl apply -k: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}

	// eventsd talks to the cluster as its ServiceAccount, with no more
	// than the component's RBAC.
	admin, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("kubevents").CreateToken(ctx, "eventsd",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saKubeconfig := aggKubeconfig(t, c, tr.Status.Token)
	p := eventsdtest.Start(t, eventsdtest.Options{Listen: "127.0.0.1:" + strconv.Itoa(port), Args: []string{
		"--storage-backend=etcd", "--etcd-servers=" + strings.Join(store.Endpoints(), ","),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--authentication-kubeconfig", saKubeconfig,
		"--authorization-mode=Webhook", "--authorization-kubeconfig", saKubeconfig,
	}})

	// Events written to eventsd directly (the admin's token, checked by
	// a TokenReview), and one to the cluster's own events only.
	direct, err := kubernetes.NewForConfig(&rest.Config{Host: p.URL, BearerToken: c.AdminToken(), TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(ns, name string) corev1.ObjectReference {
		return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name}
	}
	at := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	for _, ev := range []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1-backoff"}, InvolvedObject: pod("shop", "web-1"), Reason: "BackOff", Message: "Back-off restarting failed container web"},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-2-pulled"}, InvolvedObject: pod("shop", "web-2"), Reason: "Pulled", Message: "pulled"},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "node-web-1"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1"},
			Related: ptrTo(pod("shop", "web-1")), Reason: "Preempted", Message: "preempted web-1"},
	} {
		ev.Type, ev.Count, ev.FirstTimestamp, ev.LastTimestamp = corev1.EventTypeWarning, 1, at, at
		if _, err := direct.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s in eventsd: %v", ev.Name, err)
		}
	}
	_, err = admin.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "cluster-only"}, InvolvedObject: pod("default", "web-1"),
		Reason: "OnlyInCluster", Message: "kube-apiserver's own", Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: at, LastTimestamp: at}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	dc, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cgPoll(t, 2*time.Minute, "the APIService to be Available", func() (bool, string) { return apiServiceAvailable(ctx, dc) })

	kubectl := func(user string, args ...string) eventsdtest.KubectlResult {
		return eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, append([]string{"--context", user}, args...)...)
	}
	get := []string{"get", "events.events.kubevents.io", "-A", "--field-selector", "involves.name=web-1"}
	r := kubectl("reader", append(get, "-o", "name")...)
	if r.Err != nil {
		t.Fatalf("reader: kubectl %s: %v\n%s", strings.Join(get, " "), r.Err, r.Stderr)
	}
	if got, want := strings.Fields(r.Stdout), []string{"event.events.kubevents.io/node-web-1", "event.events.kubevents.io/web-1-backoff"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("reader: kubectl %s -o name: %q, want %q", strings.Join(get, " "), got, want)
	}
	r = kubectl("reader", get...)
	if r.Err != nil || !strings.Contains(r.Stdout, "BackOff") || !strings.Contains(r.Stdout, "Preempted") || strings.Contains(r.Stdout, "Pulled") {
		t.Errorf("reader: kubectl %s (table): %v\n%s%s", strings.Join(get, " "), r.Err, r.Stdout, r.Stderr)
	}
	r = kubectl("stranger", get...)
	if r.Err == nil || !strings.Contains(r.Stderr, `(Forbidden)`) || !strings.Contains(r.Stderr, `User "stranger" cannot list resource "events" in API group "events.kubevents.io"`) {
		t.Errorf("stranger: kubectl %s: %v, want 403 Forbidden\n%s%s", strings.Join(get, " "), r.Err, r.Stdout, r.Stderr)
	}

	runEvctl := func(user string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := evctl.NewCommand(&out, &errOut)
		cmd.SetArgs(append([]string{"--kubeconfig", c.Kubeconfig(), "--context", user}, args...))
		err := cmd.ExecuteContext(ctx)
		return out.String() + errOut.String(), err
	}
	out, err := runEvctl("reader", "-A", "get")
	if err != nil || !strings.Contains(out, "BackOff") || !strings.Contains(out, "Pulled") || strings.Contains(out, "OnlyInCluster") {
		t.Errorf("reader: evctl -A get: %v, want eventsd's events (BackOff, Pulled), not the cluster's (OnlyInCluster):\n%s", err, out)
	}
	out, err = runEvctl("reader", "-n", "shop", "get", "--for", "pod/web-1")
	if err != nil || !strings.Contains(out, "BackOff") || strings.Contains(out, "Pulled") {
		t.Errorf("reader: evctl -n shop get --for pod/web-1: %v, want BackOff alone:\n%s", err, out)
	}
	out, err = runEvctl("stranger", "-A", "get")
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "events.kubevents.io") {
		t.Errorf("stranger: evctl -A get: %v, want forbidden in events.kubevents.io:\n%s", err, out)
	}

	// Discovery through kube-apiserver, timed.
	readerHTTP, err := rest.HTTPClientFor(c.UserConfig("reader"))
	if err != nil {
		t.Fatal(err)
	}
	adminHTTP, err := rest.HTTPClientFor(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	fetchAs := func(hc *http.Client, path string) (int, time.Duration) {
		t.Helper()
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	fetch := func(path string) (int, time.Duration) { t.Helper(); return fetchAs(readerHTTP, path) }
	const fast = 2 * time.Second
	code, took := fetch("/apis/events.kubevents.io/v1")
	t.Logf("store up: GET /apis/events.kubevents.io/v1 through kube-apiserver: %d in %v", code, took)

	// eventsd's store down: discovery does not need it.
	store.Kill(0)
	for i := 0; i < 3; i++ {
		code, took = fetch("/apis/events.kubevents.io/v1")
		t.Logf("store down: GET /apis/events.kubevents.io/v1 through kube-apiserver: %d in %v", code, took)
		if code != http.StatusOK || took > fast {
			t.Errorf("store down: discovery of the group: %d in %v, want 200 within %v", code, took, fast)
		}
	}
	if ok, state := apiServiceAvailable(ctx, dc); !ok {
		t.Errorf("store down: the APIService is not Available: %s", state)
	}
	code, took = fetch("/apis/events.kubevents.io/v1/events?limit=1")
	t.Logf("store down: a list of the group through kube-apiserver: %d in %v", code, took)

	// eventsd down: kube-apiserver's discovery still answers, the group
	// is refused at once, others are served.
	p.Kill()
	code, took = fetch("/apis/events.kubevents.io/v1/events?limit=1")
	t.Logf("eventsd down: a list of the group: %d in %v", code, took)
	if code != http.StatusServiceUnavailable || took > fast {
		t.Errorf("eventsd down: a list of the group: %d in %v, want 503 within %v", code, took, fast)
	}
	for _, path := range []string{"/api", "/apis", "/apis/events.k8s.io/v1", "/api/v1/namespaces/default/events"} {
		code, took = fetchAs(adminHTTP, path)
		t.Logf("eventsd down: GET %s: %d in %v", path, code, took)
		if code != http.StatusOK || took > fast {
			t.Errorf("eventsd down: GET %s: %d in %v, want 200 within %v", path, code, took, fast)
		}
	}
	start := time.Now()
	cgPoll(t, 2*time.Minute, "the APIService to turn unavailable", func() (bool, string) {
		ok, state := apiServiceAvailable(ctx, dc)
		return !ok, state
	})
	_, state := apiServiceAvailable(ctx, dc)
	t.Logf("eventsd down: APIService unavailable after %v: %s", time.Since(start), state)
	start = time.Now()
	r = kubectl("reader", "api-resources")
	// Observed with kube-apiserver v1.37.2: aggregated discovery keeps
	// the group's last document (marked stale), and kubectl still
	// succeeds; logged, since it is kube-apiserver's to change.
	t.Logf("eventsd down: kubectl api-resources in %v: %v %s", time.Since(start), r.Err, r.Stderr)
	if !strings.Contains(r.Stdout, "events.kubevents.io/v1") {
		t.Logf("eventsd down: kubectl api-resources no longer lists events.kubevents.io/v1")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+"/apis", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	// The group stays in aggregated discovery, without resources and
	// marked Stale: client-go reports it as a failed group, which is what
	// keeps a namespace Terminating while eventsd is down.
	resp, err := adminHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(b.String(), `"name":"events.kubevents.io"},"versions":[{"version":"v1","freshness":"Stale"}]`) {
		t.Errorf("eventsd down: aggregated discovery does not list events.kubevents.io/v1 as Stale:\n%s", b.String())
	}
	r = kubectl("reader", get...)
	t.Logf("eventsd down: kubectl %s: %v %s", strings.Join(get, " "), r.Err, r.Stderr)
}

// ptrTo is a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }
