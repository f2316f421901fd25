package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/testpki"
)

const (
	cgToken      = "0b6c6f7e-token-alice"
	cgOtherToken = "another-token-bob"
)

// cgTokenFile writes a kube-apiserver static token file.
func cgTokenFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	content := fmt.Sprintf("%s,alice,1001,\"system:masters,dev\"\n%s,bob,1002\n", cgToken, cgOtherToken)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cgClientset builds a clientset from cfg.
func cgClientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// cgGetWithAuth sends a raw request with the Authorization header authz
// (none when empty).
func cgGetWithAuth(t *testing.T, client *http.Client, method, url, authz string) cgResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(cgCtx(t), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return cgResponse{code: resp.StatusCode, header: resp.Header, body: b}
}

// cgMetrics scrapes /metrics (with token when not empty; over HTTPS
// without verifying the certificate) and returns each
// sample by its series name, e.g. `eventsd_requests_total{code="201",...}`.
func cgMetrics(t *testing.T, baseURL, token string) map[string]float64 {
	t.Helper()
	authz := ""
	if token != "" {
		authz = "Bearer " + token
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if strings.HasPrefix(baseURL, "https:") {
		client = azHTTPClient()
	}
	r := cgGetWithAuth(t, client, "GET", baseURL+"/metrics", authz)
	if r.code != 200 {
		t.Fatalf("GET /metrics: %d %s", r.code, r.body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad metrics value in %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func cgExpectUnauthorized(t *testing.T, r cgResponse, what string) {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Errorf("%s: %d %s is not a Status: %v", what, r.code, r.body, err)
		return
	}
	if r.code != 401 || st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure ||
		st.Reason != metav1.StatusReasonUnauthorized || st.Code != 401 || st.Message != "Unauthorized" {
		t.Errorf("%s: got %d %s, want 401 Status Unauthorized", what, r.code, r.body)
	}
}

func TestAuthToken(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--token-auth-file", cgTokenFile(t)}})
	client := &http.Client{Timeout: 30 * time.Second}
	paths := []string{
		"/api/v1/namespaces/default/events",
		"/api/v1/events",
		"/apis/events.k8s.io/v1/namespaces/default/events",
		"/api/v1/namespaces/default/events/x",
		"/api",
		"/apis",
		"/api/v1",
		"/apis/events.k8s.io/v1",
		"/openapi/v3",
		"/metrics",
	}
	for _, path := range paths {
		for _, authz := range []string{"", "Bearer wrong-token", "Bearer ", "Basic YWxpY2U6cGFzcw==", cgToken, "Bearer " + cgToken + "x"} {
			cgExpectUnauthorized(t, cgGetWithAuth(t, client, "GET", p.URL+path, authz), fmt.Sprintf("GET %s with Authorization %q", path, authz))
		}
	}
	cgExpectUnauthorized(t, cgGetWithAuth(t, client, "POST", p.URL+"/api/v1/namespaces/default/events", ""), "POST without a token")
	cgExpectUnauthorized(t, cgGetWithAuth(t, client, "DELETE", p.URL+"/api/v1/namespaces/default/events", "Bearer nope"), "DELETE collection with a wrong token")
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := cgGetWithAuth(t, client, "GET", p.URL+path, ""); r.code != 200 {
			t.Errorf("GET %s without a token: %d %s", path, r.code, r.body)
		}
	}
	for _, tok := range []string{cgToken, cgOtherToken} {
		if r := cgGetWithAuth(t, client, "GET", p.URL+"/api/v1/namespaces/default/events", "Bearer "+tok); r.code != 200 {
			t.Errorf("GET with token %q: %d %s", tok, r.code, r.body)
		}
	}

	// client-go without a token.
	_, err := p.Clientset().CoreV1().Events("default").List(cgCtx(t), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("client-go without a token: %v, want Unauthorized", err)
	}
	bad := p.RESTConfig()
	bad.BearerToken = "wrong-token"
	if _, err := cgClientset(t, bad).CoreV1().Events("default").Create(cgCtx(t), cgCoreEvent("default", "nope", "pod"), metav1.CreateOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("client-go with a wrong token: %v, want Unauthorized", err)
	}

	// client-go with the token: every verb works.
	cfg := p.RESTConfig()
	cfg.BearerToken = cgToken
	cs := cgClientset(t, cfg)
	ctx := cgCtx(t)
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("events.k8s.io/v1"); err != nil {
		t.Errorf("discovery with the token: %v", err)
	}
	l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list with the token: %v", err)
	}
	if len(l.Items) != 0 {
		t.Errorf("unauthenticated writes were stored: %v", cgCoreNames(l.Items))
	}
	w := cgWatch(t)(cs.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
	cgCreateCore(t, cs, cgCoreEvent("default", "authed", "pod"))
	cgCreateNew(t, cs, cgNewEvent("default", "authed-new", "pod"))
	cgNextCore(t, w, watch.Added, "authed")
	cgNextCore(t, w, watch.Added, "authed-new")
	if _, err := cs.CoreV1().Events("default").Patch(ctx, "authed", "application/strategic-merge-patch+json", []byte(`{"count":2}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("patch with the token: %v", err)
	}
	if err := cgDeleteJSON(ctx, cs, "default", "authed", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete with the token: %v", err)
	}
	if got, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{}); err != nil || len(got.Items) != 1 || got.Items[0].Name != "authed-new" {
		t.Errorf("events.k8s.io list with the token: %v %v", got, err)
	}
}

// cgServingCert writes a serving certificate for 127.0.0.1 and dnsNames
// and its key, signed by a new CA, returning their paths and the CA's PEM.
func cgServingCert(t *testing.T, dnsNames ...string) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	ca, err := testpki.NewCA("eventsd-e2e-ca")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(testpki.LeafOptions{CommonName: "eventsd-e2e", DNSNames: dnsNames,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		t.Fatal(err)
	}
	if certFile, keyFile, err = kp.WriteFiles(t.TempDir(), "tls"); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, ca.CertPEM
}

func TestTLSServing(t *testing.T) {
	t.Parallel()
	certFile, keyFile, caPEM := cgServingCert(t, "localhost")
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--token-auth-file", cgTokenFile(t),
	}})
	if !strings.HasPrefix(p.URL, "https://127.0.0.1:") {
		t.Fatalf("URL %q, want https://127.0.0.1:port", p.URL)
	}
	ctx := cgCtx(t)
	cfg := &rest.Config{Host: p.URL, QPS: -1, Timeout: 30 * time.Second, BearerToken: cgToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	cs := cgClientset(t, cfg)
	l, err := cs.CoreV1().Events("tls").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list over https with the CA: %v", err)
	}
	w := cgWatch(t)(cs.EventsV1().Events("tls").Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
	cgCreateCore(t, cs, cgCoreEvent("tls", "secure", "pod"))
	if e := cgNext(t, w); e.Type != watch.Added {
		t.Errorf("watch over https: %s %+v", e.Type, e.Object)
	}
	got, err := cs.CoreV1().Events("tls").Get(ctx, "secure", metav1.GetOptions{})
	if err != nil || got.Message != "message of secure" {
		t.Errorf("get over https: %+v %v", got, err)
	}

	// The same CA, no token: 401 over TLS.
	anon := rest.CopyConfig(cfg)
	anon.BearerToken = ""
	if _, err := cgClientset(t, anon).CoreV1().Events("tls").List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("https without a token: %v, want Unauthorized", err)
	}
	// Without the CA the certificate is not trusted.
	untrusted := rest.CopyConfig(cfg)
	untrusted.TLSClientConfig = rest.TLSClientConfig{}
	_, err = cgClientset(t, untrusted).CoreV1().Events("tls").List(ctx, metav1.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("https without the CA: %v, want a certificate verification error", err)
	}
	// The health checks are served over TLS too, without a token.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if r := cgGetWithAuth(t, client, "GET", p.URL+"/readyz", ""); r.code != 200 {
		t.Errorf("https /readyz: %d %s", r.code, r.body)
	}
	// Plain HTTP to the TLS port gets no API response.
	plain := "http://" + strings.TrimPrefix(p.URL, "https://")
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(plain + "/api/v1/events"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS port answered 200")
		}
	}
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--token-auth-file", cgTokenFile(t)}})
	cfg := p.RESTConfig()
	cfg.BearerToken = cgToken
	cs := cgClientset(t, cfg)
	ctx := cgCtx(t)

	cgExpectUnauthorized(t, cgGetWithAuth(t, &http.Client{Timeout: 10 * time.Second}, "GET", p.URL+"/metrics", ""), "GET /metrics without a token")

	const nCore, nNew = 5, 2
	for i := 0; i < nCore; i++ {
		cgCreateCore(t, cs, cgCoreEvent("metrics", fmt.Sprintf("c%d", i), "pod"))
	}
	for i := 0; i < nNew; i++ {
		cgCreateNew(t, cs, cgNewEvent("metrics-new", fmt.Sprintf("n%d", i), "pod"))
	}
	if _, err := cs.CoreV1().Events("metrics").Create(ctx, cgCoreEvent("metrics", "c0", "pod"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := cs.CoreV1().Events("metrics").Get(ctx, "c1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	m := cgMetrics(t, p.URL, cgToken)
	for _, c := range []struct {
		series string
		want   float64
	}{
		{"eventsd_stored_events", nCore + nNew},
		{"eventsd_expired_events_total", 0},
		{`eventsd_requests_total{code="201",group="core",verb="create"}`, nCore},
		{`eventsd_requests_total{code="201",group="events.k8s.io",verb="create"}`, nNew},
		{`eventsd_requests_total{code="409",group="core",verb="create"}`, 1},
		{`eventsd_requests_total{code="200",group="core",verb="get"}`, 1},
		{`eventsd_request_duration_seconds_count{group="core",verb="create"}`, nCore + 1},
		{`eventsd_request_duration_seconds_count{group="events.k8s.io",verb="create"}`, nNew},
	} {
		if got, ok := m[c.series]; !ok || got != c.want {
			t.Errorf("%s = %v (present %v), want %v", c.series, got, ok, c.want)
		}
	}
	if m["eventsd_storage_bytes"] <= 0 {
		t.Errorf("eventsd_storage_bytes = %v, want > 0", m["eventsd_storage_bytes"])
	}
	buckets := 0
	for k := range m {
		if strings.HasPrefix(k, "eventsd_request_duration_seconds_bucket{") {
			buckets++
		}
	}
	if buckets == 0 {
		t.Errorf("no eventsd_request_duration_seconds buckets")
	}

	// The gauge follows deletes.
	for _, n := range []string{"c0", "c1"} {
		if err := cgDeleteJSON(ctx, cs, "metrics", n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cgPoll(t, 5*time.Second, "eventsd_stored_events to drop by 2", func() (bool, string) {
		got := cgMetrics(t, p.URL, cgToken)["eventsd_stored_events"]
		return got == nCore+nNew-2, fmt.Sprint(got)
	})
}
