package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubevents/kubevents/server"
)

// recordingAuthorizer records the attributes it is asked about and
// answers with decide.
type recordingAuthorizer struct {
	mu     sync.Mutex
	seen   []authorizer.AttributesRecord
	decide func(authorizer.Attributes) (authorizer.Decision, string, error)
}

func (a *recordingAuthorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, attrs.(server.ClusterAttributes).AttributesRecord)
	return a.decide(attrs)
}

func (a *recordingAuthorizer) last(t *testing.T) authorizer.AttributesRecord {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		t.Fatal("the authorizer was not asked")
	}
	return a.seen[len(a.seen)-1]
}

func doRequest(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestAuthorizationAttributes checks what the authorizer is asked for each
// kind of request (kube-apiserver's request info), who is asking when
// there is no authenticator, and the Forbidden Status a denial gets.
func TestAuthorizationAttributes(t *testing.T) {
	authz := &recordingAuthorizer{decide: func(authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", nil
	}}
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.Authorizer = authz })
	anon := &user.DefaultInfo{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	res := func(verb, group, ns, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: anon, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: "events", Namespace: ns, Name: name, ResourceRequest: true}
	}
	for _, c := range []struct {
		method, path string
		want         authorizer.AttributesRecord
		message      string
	}{
		{"GET", "/api/v1/namespaces/kube-system/events", res("list", "", "kube-system", ""),
			`events is forbidden: User "system:anonymous" cannot list resource "events" in API group "" in the namespace "kube-system"`},
		{"GET", "/api/v1/events", res("list", "", "", ""),
			`events is forbidden: User "system:anonymous" cannot list resource "events" in API group "" at the cluster scope`},
		{"GET", "/api/v1/events?watch=true", res("watch", "", "", ""), ""},
		{"GET", "/api/v1/watch/namespaces/a/events", res("watch", "", "a", ""), ""},
		{"GET", "/apis/events.k8s.io/v1/namespaces/a/events/x", res("get", "events.k8s.io", "a", "x"),
			`events.events.k8s.io "x" is forbidden: User "system:anonymous" cannot get resource "events" in API group "events.k8s.io" in the namespace "a"`},
		{"POST", "/api/v1/namespaces/a/events", res("create", "", "a", ""), ""},
		{"PUT", "/api/v1/namespaces/a/events/x", res("update", "", "a", "x"), ""},
		{"PATCH", "/api/v1/namespaces/a/events/x", res("patch", "", "a", "x"), ""},
		{"DELETE", "/api/v1/namespaces/a/events/x", res("delete", "", "a", "x"), ""},
		{"DELETE", "/apis/events.k8s.io/v1/namespaces/a/events", res("deletecollection", "events.k8s.io", "a", ""), ""},
		{"GET", "/metrics", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/metrics"},
			`forbidden: User "system:anonymous" cannot get path "/metrics"`},
		{"GET", "/api", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/api"}, ""},
		{"GET", "/apis/events.k8s.io/v1", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/apis/events.k8s.io/v1"}, ""},
		{"GET", "/openapi/v3", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/openapi/v3"}, ""},
		{"GET", "/debug/pprof/heap", authorizer.AttributesRecord{User: anon, Verb: "get", Path: "/debug/pprof/heap"}, ""},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			code, body := doRequest(t, c.method, e.url+c.path, "{}")
			want := c.want
			want.Path, _, _ = strings.Cut(c.path, "?")
			if got := authz.last(t); !cmp.Equal(got, want) {
				t.Errorf("attributes: %s", cmp.Diff(want, got))
			}
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("%d %s: not a Status: %v", code, body, err)
			}
			if code != http.StatusForbidden || st.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden {
				t.Errorf("got %d %s, want a 403 Forbidden Status", code, body)
			}
			if c.message != "" && st.Message != c.message {
				t.Errorf("message %q, want %q", st.Message, c.message)
			}
		})
	}
	// Health checks and /version are not authorized.
	n := len(authz.seen)
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		if code, body := doRequest(t, "GET", e.url+p, ""); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	if len(authz.seen) != n {
		t.Errorf("health checks were authorized: %v", authz.seen[n:])
	}
	// Nothing was written by the denied writes.
	authz.decide = func(authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	}
	l, err := e.cs.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Errorf("after denied writes: %v %v", l, err)
	}
}

// TestAuthorizationReasonAndError: a reason is appended to the Forbidden
// message; an authorizer that fails denies with 500 and stores nothing;
// the authenticated user is who the authorizer is asked about.
func TestAuthorizationReasonAndError(t *testing.T) {
	authz := &recordingAuthorizer{}
	bob := &user.DefaultInfo{Name: "bob", UID: "2", Groups: []string{"dev", "system:authenticated"}}
	authn := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: bob}, true, nil
	})
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.Authorizer, c.Authenticator = authz, authn })

	authz.decide = func(authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, "ABAC: No policy matched.", nil
	}
	code, body := doRequest(t, "GET", e.url+"/api/v1/namespaces/kube-system/events", "")
	want := `events is forbidden: User "bob" cannot list resource "events" in API group "" in the namespace "kube-system": ABAC: No policy matched.`
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || code != http.StatusForbidden || st.Message != want {
		t.Errorf("got %d %s, want 403 with %q", code, body, want)
	}
	if got := authz.last(t).User; !cmp.Equal(got, user.Info(bob)) {
		t.Errorf("authorizer asked about %v, want bob", got)
	}

	authz.decide = func(authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", errors.New("Post \"https://127.0.0.1:1/authorize\": connection refused")
	}
	code, body = doRequest(t, "POST", e.url+"/api/v1/namespaces/a/events", `{"metadata":{"name":"x"},"involvedObject":{"namespace":"a"}}`)
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	if code != http.StatusInternalServerError || st.Reason != metav1.StatusReasonInternalError ||
		!strings.Contains(st.Message, "authorization failed, so the request is denied") || !strings.Contains(st.Message, "connection refused") {
		t.Errorf("authorizer error: %d %s, want 500 naming the failure", code, body)
	}
	authz.decide = func(authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	}
	if l, err := e.cs.CoreV1().Events("a").List(e.ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("after a failed authorization: %v %v", l, err)
	}
}
