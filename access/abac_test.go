package access

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/server"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// testPolicy is the README's example policy file.
const testPolicy = `# kubectl's discovery for everyone with a token
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "system:authenticated", "readonly": true, "nonResourcePath": "*"}}

# alice: everything with events in namespace dev, in both API groups
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "dev", "apiGroup": "*", "resource": "events"}}
# bob: read events in namespace prod only
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "namespace": "prod", "apiGroup": "*", "resource": "events", "readonly": true}}
# group sre: everything, in every namespace and across namespaces
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "sre", "namespace": "*", "apiGroup": "*", "resource": "*"}}
# monitoring: scrape /metrics
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "prometheus", "readonly": true, "nonResourcePath": "/metrics"}}
# core group only
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "carol", "namespace": "dev", "resource": "events"}}
# both user and group must match
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "dave", "group": "ops", "namespace": "*", "apiGroup": "*", "resource": "events"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "erin", "readonly": true, "nonResourcePath": "/debug/*"}}
`

func res(u user.Info, verb, group, ns, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "v1", Resource: "events", Namespace: ns, Name: name, ResourceRequest: true}
}

func nonRes(u user.Info, verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Path: path}
}

func TestABACAuthorize(t *testing.T) {
	pl, err := ParsePolicies(strings.NewReader(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if len(pl) != 8 {
		t.Fatalf("%d policies, want 8", len(pl))
	}
	authd := func(name string, groups ...string) user.Info {
		return &user.DefaultInfo{Name: name, Groups: append(groups, user.AllAuthenticated)}
	}
	alice, bob, sam, prom := authd("alice"), authd("bob"), authd("sam", "sre"), authd("prometheus")
	carol, dave, daveNoOps, erin := authd("carol"), authd("dave", "ops"), authd("dave"), authd("erin")
	anon := &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	for _, c := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		allow bool
	}{
		// Namespace-scoped user.
		{"alice lists dev", res(alice, "list", "", "dev", ""), true},
		{"alice creates in dev", res(alice, "create", "", "dev", ""), true},
		{"alice deletes in dev, events.k8s.io", res(alice, "delete", "events.k8s.io", "dev", "x"), true},
		{"alice lists prod", res(alice, "list", "", "prod", ""), false},
		{"alice lists all namespaces", res(alice, "list", "", "", ""), false},
		{"alice watches all namespaces", res(alice, "watch", "", "", ""), false},
		{"alice pods in dev", authorizer.AttributesRecord{User: alice, Verb: "get", Resource: "pods", Namespace: "dev", ResourceRequest: true}, false},
		// Read-only user.
		{"bob gets in prod", res(bob, "get", "", "prod", "x"), true},
		{"bob lists in prod", res(bob, "list", "events.k8s.io", "prod", ""), true},
		{"bob watches in prod", res(bob, "watch", "", "prod", ""), true},
		{"bob creates in prod", res(bob, "create", "", "prod", ""), false},
		{"bob patches in prod", res(bob, "patch", "", "prod", "x"), false},
		{"bob deletes collection in prod", res(bob, "deletecollection", "", "prod", ""), false},
		{"bob lists dev", res(bob, "list", "", "dev", ""), false},
		// Cluster-wide group.
		{"sre lists all namespaces", res(sam, "list", "", "", ""), true},
		{"sre watches all namespaces", res(sam, "watch", "events.k8s.io", "", ""), true},
		{"sre deletes anywhere", res(sam, "delete", "", "kube-system", "x"), true},
		{"sre cannot write non-resource paths", nonRes(sam, "post", "/metrics"), false},
		// Non-resource paths.
		{"discovery for the authenticated", nonRes(bob, "get", "/apis/events.k8s.io/v1"), true},
		{"discovery is read-only", nonRes(bob, "post", "/api"), false},
		{"no discovery for the anonymous", nonRes(anon, "get", "/api"), false},
		{"prometheus scrapes", nonRes(prom, "get", "/metrics"), true},
		{"exact path only", nonRes(prom, "get", "/metricsx"), true}, // the discovery rule allows any get
		{"erin reads profiles", nonRes(erin, "get", "/debug/pprof/heap"), true},
		{"a non-resource rule never matches resources", res(erin, "get", "", "", "x"), false},
		// Core group only when apiGroup is empty.
		{"carol core", res(carol, "create", "", "dev", ""), true},
		{"carol events.k8s.io", res(carol, "create", "events.k8s.io", "dev", ""), false},
		// User and group.
		{"dave in ops", res(dave, "create", "", "dev", ""), true},
		{"dave not in ops", res(daveNoOps, "create", "", "dev", ""), false},
		{"no user", authorizer.AttributesRecord{Verb: "get", Path: "/api"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, reason, err := pl.Authorize(context.Background(), c.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got := d == authorizer.DecisionAllow; got != c.allow {
				t.Errorf("decision %v, want allow=%v", d, c.allow)
			}
			if d != authorizer.DecisionAllow && (d != authorizer.DecisionNoOpinion || reason != noPolicyMatched) {
				t.Errorf("not allowed: %v %q, want no opinion, %q", d, reason, noPolicyMatched)
			}
		})
	}
}

func TestABACNonResourceExactPath(t *testing.T) {
	pl, err := ParsePolicies(strings.NewReader(`{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "p", "nonResourcePath": "/metrics"}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := &user.DefaultInfo{Name: "p"}
	for path, want := range map[string]bool{"/metrics": true, "/metricsx": false, "/metrics/x": false, "/api": false} {
		if d, _, _ := pl.Authorize(context.Background(), nonRes(p, "get", path)); (d == authorizer.DecisionAllow) != want {
			t.Errorf("%s: %v, want allow=%v", path, d, want)
		}
	}
}

func TestParsePoliciesErrors(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not JSON", "{nope}\n", "line 1"},
		{"unversioned", `{"user": "alice"}`, `apiVersion ""`},
		{"wrong kind", `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Role", "spec": {}}`, `kind "Role"`},
		{"second line", "# c\n" + `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "a"}}` + "\n[1]\n", "line 3"},
		{"wrong type", `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"readonly": "yes"}}`, "line 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	pl, err := ParsePolicies(strings.NewReader("\n# only comments\n\n"))
	if err != nil || len(pl) != 0 {
		t.Errorf("empty file: %v %v", pl, err)
	}
}

// fleetExampleFirstLine starts docs/security.md's example of a fleet's
// policy, after the page's example policy file.
const fleetExampleFirstLine = `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "cluster": "east", "namespace": "shop", "apiGroup": "*", "resource": "events", "readonly": true}}`

// TestExamplePolicyMatchesReadme: the policy docs/security.md shows is
// the example file the end-to-end tests run against, and it loads.
func TestExamplePolicyMatchesReadme(t *testing.T) {
	policyLines := func(path string) []string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1"`) {
				out = append(out, l)
			}
		}
		return out
	}
	example := filepath.Join("..", "docs", "examples", "abac-policy.jsonl")
	if _, err := LoadPolicyFile(example); err != nil {
		t.Fatal(err)
	}
	// The page's fleet section shows lines of its own (the cluster field),
	// which must load too.
	inFile, inDocs := policyLines(example), policyLines(filepath.Join("..", "docs", "security.md"))
	var fleet []string
	if i := slices.Index(inDocs, fleetExampleFirstLine); i >= 0 {
		inDocs, fleet = inDocs[:i], inDocs[i:]
	}
	if len(fleet) == 0 {
		t.Errorf("docs/security.md has no fleet example starting with %s", fleetExampleFirstLine)
	} else if pl, err := ParsePolicies(strings.NewReader(strings.Join(fleet, "\n"))); err != nil || len(pl) != len(fleet) {
		t.Errorf("docs/security.md's fleet example: %d policies, %v", len(pl), err)
	}
	if len(inFile) == 0 || strings.Join(inFile, "\n") != strings.Join(inDocs, "\n") {
		t.Errorf("docs/security.md's ABAC example differs from %s:\ndocs/security.md:\n%s\nfile:\n%s", example, strings.Join(inDocs, "\n"), strings.Join(inFile, "\n"))
	}
}

// TestABACCluster: a policy's cluster (eventsd's extension) matches
// requests to that cluster of a fleet; none matches the root cluster's
// only, "*" every cluster; non-resource requests ignore it.
func TestABACCluster(t *testing.T) {
	pl, err := ParsePolicies(strings.NewReader(`
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "cluster": "east", "namespace": "shop", "apiGroup": "*", "resource": "events", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bob", "namespace": "*", "apiGroup": "*", "resource": "*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "carol", "cluster": "*", "namespace": "*", "apiGroup": "*", "resource": "*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "system:authenticated", "readonly": true, "nonResourcePath": "*"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, cluster, ns string
		nonResource, want bool
	}{
		{user: "alice", cluster: "east", ns: "shop", want: true},
		{user: "alice", cluster: "west", ns: "shop"},
		{user: "alice", cluster: "", ns: "shop"},
		{user: "alice", cluster: "east", ns: "other"},
		{user: "alice", cluster: "*", ns: "shop"},
		{user: "bob", cluster: "", ns: "any", want: true},
		{user: "bob", cluster: "east", ns: "any"},
		{user: "carol", cluster: "east", ns: "any", want: true},
		{user: "carol", cluster: "", ns: "any", want: true},
		{user: "alice", cluster: "west", nonResource: true, want: true},
	} {
		a := server.ClusterAttributes{AttributesRecord: authorizer.AttributesRecord{
			User: &user.DefaultInfo{Name: tc.user, Groups: []string{"system:authenticated"}}, Verb: "list",
			Namespace: tc.ns, Resource: "events", APIVersion: "v1", ResourceRequest: !tc.nonResource, Path: "/api"}, Cluster: tc.cluster}
		d, _, _ := pl.Authorize(context.Background(), a)
		if got := d == authorizer.DecisionAllow; got != tc.want {
			t.Errorf("%s listing events of %q in cluster %q (non-resource %v): allowed %v, want %v", tc.user, tc.ns, tc.cluster, tc.nonResource, got, tc.want)
		}
	}
}
