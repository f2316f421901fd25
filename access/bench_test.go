package access

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// BenchmarkAuthenticateAuthorizeCreate measures what authentication and
// authorization add to one create: a static token, the request info, and
// a 10-line ABAC policy whose last line matches. Compare with
// server.BenchmarkServerCreateAuthz's cpu-ns/op for a whole create.
func BenchmarkAuthenticateAuthorizeCreate(b *testing.B) {
	dir := b.TempDir()
	var policy strings.Builder
	for i := range 9 {
		fmt.Fprintf(&policy, `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "user-%d", "namespace": "ns-%d", "apiGroup": "*", "resource": "events"}}`+"\n", i, i)
	}
	policy.WriteString(`{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bench", "namespace": "default", "apiGroup": "*", "resource": "events"}}` + "\n")
	tokens, policyFile := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "policy.jsonl")
	if err := os.WriteFile(tokens, []byte("bench-token,bench,1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(policyFile, []byte(policy.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	built, err := Build(Options{TokenAuthFile: tokens, AuthorizationModes: []string{ModeABAC}, PolicyFile: policyFile})
	if err != nil {
		b.Fatal(err)
	}
	rif := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	req, err := http.NewRequest(http.MethodPost, "http://eventsd/api/v1/namespaces/default/events", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		// bearertoken removes the header it authenticated.
		req.Header.Set("Authorization", "Bearer bench-token")
		resp, ok, err := built.Authenticator.AuthenticateRequest(req)
		if !ok || err != nil {
			b.Fatalf("authenticate: %v %v", ok, err)
		}
		info, err := rif.NewRequestInfo(req)
		if err != nil {
			b.Fatal(err)
		}
		attrs := authorizer.AttributesRecord{User: resp.User, Verb: info.Verb, Namespace: info.Namespace, APIGroup: info.APIGroup,
			APIVersion: info.APIVersion, Resource: info.Resource, Name: info.Name, ResourceRequest: info.IsResourceRequest, Path: info.Path}
		if d, _, err := built.Authorizer.Authorize(req.Context(), attrs); d != authorizer.DecisionAllow || err != nil {
			b.Fatalf("authorize: %v %v", d, err)
		}
	}
}
