package access

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/server/options"

	"github.com/kubevents/kubevents/internal/testpki"
)

// testCA is a certificate authority for tests, failing the test on errors.
type testCA struct{ *testpki.CA }

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{ca}
}

// client issues a client certificate with this common name and
// organizations.
func (ca testCA) client(t *testing.T, cn string, orgs ...string) *x509.Certificate {
	t.Helper()
	kp, err := ca.Issue(testpki.LeafOptions{CommonName: cn, Organizations: orgs, ExtKeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	return kp.Cert
}

// write writes the CA's certificate to dir/base.crt and returns the path.
func (ca testCA) write(t *testing.T, dir, base string) string {
	t.Helper()
	path, err := ca.WriteFile(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsRequest is a GET over TLS with this client certificate (none when nil)
// and headers.
func tlsRequest(cert *x509.Certificate, header map[string][]string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "https://eventsd/apis/events.kubevents.io/v1/events", nil)
	r.TLS = &tls.ConnectionState{}
	if cert != nil {
		r.TLS.PeerCertificates = []*x509.Certificate{cert}
	}
	for k, v := range header {
		r.Header[http.CanonicalHeaderKey(k)] = v
	}
	return r
}

func authenticate(t *testing.T, a authenticator.Request, r *http.Request) (user string, groups []string, extra map[string][]string, ok bool, err error) {
	t.Helper()
	resp, ok, err := a.AuthenticateRequest(r)
	if !ok {
		return "", nil, nil, ok, err
	}
	return resp.User.GetName(), resp.User.GetGroups(), resp.User.GetExtra(), ok, err
}

// TestFrontProxyFromFlags: with --requestheader-client-ca-file and
// --requestheader-allowed-names, a request is the user its X-Remote-*
// headers name only when it comes with a client certificate that CA
// verifies and whose name is allowed; the headers are dropped once read.
// Header names are the flags'.
func TestFrontProxyFromFlags(t *testing.T) {
	dir := t.TempDir()
	proxyCA, otherCA := newTestCA(t, "front-proxy-ca"), newTestCA(t, "other-ca")
	rh := DefaultRequestHeader()
	rh.ClientCAFile = proxyCA.write(t, dir, "front-proxy-ca")
	rh.AllowedNames = []string{"front-proxy-client"}
	b, err := Build(Options{RequestHeader: rh, AuthorizationModes: []string{ModeAlwaysDeny}})
	if err != nil {
		t.Fatal(err)
	}
	if b.FrontProxy == nil || b.Authenticator != nil || !b.ClientCertificates || b.Authorizer == nil {
		t.Fatalf("built %+v", b)
	}
	headers := map[string][]string{"X-Remote-User": {"alice"}, "X-Remote-Group": {"dev", "ops"}, "X-Remote-Extra-Scopes": {"a", "b"}}
	r := tlsRequest(proxyCA.client(t, "front-proxy-client"), headers)
	u, groups, extra, ok, err := authenticate(t, b.FrontProxy, r)
	if !ok || err != nil || u != "alice" || !cmp.Equal(groups, []string{"dev", "ops", "system:authenticated"}) || !cmp.Equal(extra, map[string][]string{"scopes": {"a", "b"}}) {
		t.Fatalf("the front proxy's request: %q %v %v %v %v", u, groups, extra, ok, err)
	}
	if r.Header.Get("X-Remote-User") != "" || r.Header.Get("X-Remote-Group") != "" {
		t.Errorf("the identity headers were left on the request: %v", r.Header)
	}
	for _, c := range []struct {
		name    string
		cert    *x509.Certificate
		wantErr string
	}{
		{"no certificate", nil, ""},
		{"a name not allowed", proxyCA.client(t, "someone-else"), "subject with cn=someone-else is not in the allowed list"},
		{"another CA", otherCA.client(t, "front-proxy-client"), "certificate signed by unknown authority"},
	} {
		u, _, _, ok, err := authenticate(t, b.FrontProxy, tlsRequest(c.cert, headers))
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if ok || (c.wantErr == "") != (gotErr == "") || !strings.Contains(gotErr, c.wantErr) {
			t.Errorf("%s: user %q, ok %v, err %v; want refused with %q", c.name, u, ok, err, c.wantErr)
		}
	}

	// Header names from the flags: X-Remote-User is then nobody's.
	rh.UsernameHeaders, rh.GroupHeaders, rh.ExtraHeaderPrefixes = []string{"X-Test-User"}, []string{"X-Test-Group"}, nil
	b, err = Build(Options{RequestHeader: rh})
	if err != nil {
		t.Fatal(err)
	}
	cert := proxyCA.client(t, "front-proxy-client")
	if u, _, _, ok, _ := authenticate(t, b.FrontProxy, tlsRequest(cert, headers)); ok {
		t.Errorf("X-Remote-User with --requestheader-username-headers=X-Test-User: %q", u)
	}
	if u, groups, _, ok, err := authenticate(t, b.FrontProxy, tlsRequest(cert, map[string][]string{"X-Test-User": {"bob"}, "X-Test-Group": {"g"}})); !ok || err != nil || u != "bob" ||
		!cmp.Equal(groups, []string{"g", "system:authenticated"}) {
		t.Errorf("X-Test-User: %q %v %v %v", u, groups, ok, err)
	}
}

// TestClientCertificates: with --client-ca-file, a client certificate
// that CA verifies is its common name, in its organizations.
func TestClientCertificates(t *testing.T) {
	ca := newTestCA(t, "client-ca")
	b, err := Build(Options{ClientCert: clientCAFile(t, ca)})
	if err != nil {
		t.Fatal(err)
	}
	if b.Authenticator == nil || b.FrontProxy != nil || !b.ClientCertificates {
		t.Fatalf("built %+v", b)
	}
	u, groups, _, ok, err := authenticate(t, b.Authenticator, tlsRequest(ca.client(t, "carol", "sre"), nil))
	if !ok || err != nil || u != "carol" || !cmp.Equal(groups, []string{"sre", "system:authenticated"}) {
		t.Fatalf("carol's certificate: %q %v %v %v", u, groups, ok, err)
	}
	if _, _, _, ok, err := authenticate(t, b.Authenticator, tlsRequest(newTestCA(t, "x").client(t, "carol"), nil)); ok || err == nil {
		t.Errorf("a certificate of another CA: ok %v, err %v", ok, err)
	}
}

func clientCAFile(t *testing.T, ca testCA) (o options.ClientCertAuthenticationOptions) {
	t.Helper()
	o.ClientCA = ca.write(t, t.TempDir(), "client-ca")
	return o
}

// TestRunFollowsTheCAFile: Run reads the front proxy's CA file again
// when it changes, and stops with its context, leaving no goroutine.
func TestRunFollowsTheCAFile(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreCurrent())
	dir := t.TempDir()
	oldCA, newCA := newTestCA(t, "old"), newTestCA(t, "new")
	rh := DefaultRequestHeader()
	rh.ClientCAFile = oldCA.write(t, dir, "ca")
	b, err := Build(Options{RequestHeader: rh})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	headers := map[string][]string{"X-Remote-User": {"alice"}}
	if _, _, _, ok, err := authenticate(t, b.FrontProxy, tlsRequest(oldCA.client(t, "proxy"), headers)); !ok {
		t.Fatalf("the old CA's proxy: %v", err)
	}
	if err := os.Rename(newCA.write(t, dir, "ca-new"), rh.ClientCAFile); err != nil {
		t.Fatal(err)
	}
	cert := newCA.client(t, "proxy")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, _, _, ok, _ := authenticate(t, b.FrontProxy, tlsRequest(cert, headers)); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rotated CA file was not read again within 30s")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestLookupFailure: with --authentication-kubeconfig and no front-proxy
// CA flag, the front proxy's settings are looked up in the cluster's
// ConfigMap; a cluster that refuses the read stops the start with an
// error saying what to grant, unless the failure is tolerated (then a
// warning, and no front proxy) or the lookup skipped (then no read).
func TestLookupFailure(t *testing.T) {
	var configMapReads atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication" {
			configMapReads.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"configmaps \"extension-apiserver-authentication\" is forbidden"}`)
	}))
	defer api.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, api.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Options{AuthenticationKubeconfig: kc})
	if err == nil || !strings.Contains(err.Error(), "kube-system/extension-apiserver-authentication") || !strings.Contains(err.Error(), "extension-apiserver-authentication-reader") ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("refused lookup: %v", err)
	}
	b, err := Build(Options{AuthenticationKubeconfig: kc, TolerateInClusterLookupFailure: true})
	if err != nil || b.FrontProxy != nil || len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "requests it forwards are refused") || b.Authenticator == nil {
		t.Fatalf("tolerated lookup failure: %+v %v", b, err)
	}
	reads := configMapReads.Load()
	b, err = Build(Options{AuthenticationKubeconfig: kc, SkipInClusterLookup: true})
	if err != nil || b.FrontProxy != nil || b.ClientCertificates || len(b.Warnings) != 0 || b.Authenticator == nil {
		t.Fatalf("skipped lookup: %+v %v", b, err)
	}
	if got := configMapReads.Load(); got != reads {
		t.Errorf("--authentication-skip-lookup read the ConfigMap %d times", got-reads)
	}
}

// TestDelegationErrors: flags that cannot work together say so.
func TestDelegationErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rh := DefaultRequestHeader()
	rh.ClientCAFile = newTestCA(t, "ca").write(t, dir, "ca")
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{RequestHeader: rh, AuthorizationKubeconfig: kc}, "--authorization-kubeconfig needs --authorization-mode to include Webhook"},
		{Options{RequestHeader: rh, AuthorizationModes: []string{ModeWebhook}, AuthorizationKubeconfig: kc, AuthzWebhookConfigFile: kc}, "not both"},
		{Options{RequestHeader: rh, AuthorizationModes: []string{ModeWebhook}}, "needs --authorization-webhook-config-file or --authorization-kubeconfig"},
		{Options{AuthenticationKubeconfig: InCluster}, "--authentication-kubeconfig in-cluster: unable to load in-cluster configuration"},
		{Options{RequestHeader: rh, AuthorizationModes: []string{ModeWebhook}, AuthorizationKubeconfig: InCluster}, "--authorization-kubeconfig in-cluster"},
		{Options{AuthenticationKubeconfig: filepath.Join(dir, "missing")}, "--authentication-kubeconfig " + filepath.Join(dir, "missing")},
		{Options{RequestHeader: func() options.RequestHeaderAuthenticationOptions {
			r := rh
			r.UsernameHeaders = []string{" "}
			return r
		}()}, `empty value in "requestheader-username-headers"`},
	} {
		if _, err := Build(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build: %v, want an error containing %q", err, c.want)
		}
	}
	// With delegated authorization alone (the front proxy authenticates).
	if b, err := Build(Options{RequestHeader: rh, AuthorizationModes: []string{ModeWebhook}, AuthorizationKubeconfig: kc}); err != nil || b.Authorizer == nil {
		t.Errorf("front proxy and delegated authorization: %+v %v", b, err)
	}
}
