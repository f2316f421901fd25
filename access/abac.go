package access

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/kubevents/kubevents/server"
	"io"
	"os"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// ABAC policy file identifiers, kube-apiserver's
// abac.authorization.kubernetes.io/v1beta1 Policy.
const (
	// PolicyAPIVersion is the apiVersion every policy line carries.
	PolicyAPIVersion = "abac.authorization.kubernetes.io/v1beta1"
	// PolicyKind is the kind every policy line carries.
	PolicyKind = "Policy"
	// Wildcard in a policy field matches any value.
	Wildcard = "*"
	// noPolicyMatched is the ABAC authorizer's reason when it has no
	// opinion, kube-apiserver's wording.
	noPolicyMatched = "No policy matched."
	// maxPolicyLineBytes bounds one line of a policy file, so a file
	// that is not line-delimited JSON fails clearly instead of being
	// read into memory whole.
	maxPolicyLineBytes = 1 << 20
)

// Policy is one line of an ABAC policy file: the wire form of
// kube-apiserver's abac.authorization.kubernetes.io/v1beta1 Policy.
type Policy struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Spec       PolicySpec `json:"spec"`
}

// PolicySpec says whom a policy lets do what. Empty fields match nothing
// (an empty namespace matches only requests without one: cluster-scoped
// and all-namespaces requests); "*" matches anything.
type PolicySpec struct {
	// User is the user name the policy applies to, or "*".
	User string `json:"user,omitempty"`
	// Group is a group the user must be in, or "*".
	Group string `json:"group,omitempty"`
	// Readonly limits the policy to get, list and watch.
	Readonly bool `json:"readonly,omitempty"`
	// APIGroup is the API group of the resource ("" is the core group).
	APIGroup string `json:"apiGroup,omitempty"`
	// Resource is the resource, e.g. "events".
	Resource string `json:"resource,omitempty"`
	// Namespace is the namespace of the request.
	Namespace string `json:"namespace,omitempty"`
	// NonResourcePath is a non-resource path such as /api or /metrics; a
	// trailing "*" matches the paths it prefixes.
	NonResourcePath string `json:"nonResourcePath,omitempty"`
	// Cluster is eventsd's extension for a fleet (--sources-config): the
	// cluster a resource request is to, by name, or "*" for any. Empty
	// matches requests to the root cluster only (an eventsd without a
	// fleet has no other), so that a policy written before the fleet
	// grants nothing in its clusters. A request to every cluster at once
	// (/clusters/*/) is asked cluster by cluster and served from those
	// allowed. Non-resource requests (discovery, /version) are alike in
	// every cluster: the field does not apply to them.
	Cluster string `json:"cluster,omitempty"`
}

// PolicyList is an ABAC authorizer: a request is allowed when any policy
// matches it, and otherwise gets no opinion, so later authorizers in the
// chain may still allow it.
type PolicyList []Policy

var _ authorizer.UnconditionalAuthorizer = PolicyList(nil)

// LoadPolicyFile reads an ABAC policy file (--authorization-policy-file).
func LoadPolicyFile(path string) (PolicyList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--authorization-policy-file: %w", err)
	}
	defer f.Close()
	pl, err := ParsePolicies(f)
	if err != nil {
		return nil, fmt.Errorf("--authorization-policy-file %s: %w", path, err)
	}
	return pl, nil
}

// ParsePolicies reads policies, one JSON object per line. Blank lines and
// lines starting with # are skipped. Unknown fields are ignored, as
// kube-apiserver ignores them; a wrong apiVersion or kind is an error
// (eventsd does not read the unversioned policies of Kubernetes before
// 1.2).
func ParsePolicies(r io.Reader) (PolicyList, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxPolicyLineBytes)
	var pl PolicyList
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var p Policy
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if p.APIVersion != PolicyAPIVersion || p.Kind != PolicyKind {
			return nil, fmt.Errorf("line %d: apiVersion %q, kind %q: want apiVersion %q, kind %q", line, p.APIVersion, p.Kind, PolicyAPIVersion, PolicyKind)
		}
		pl = append(pl, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return pl, nil
}

// Authorize implements authorizer.Authorizer with kube-apiserver's ABAC
// semantics.
func (pl PolicyList) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	for i := range pl {
		if pl[i].Spec.matches(a) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, noPolicyMatched, nil
}

func (s *PolicySpec) matches(a authorizer.Attributes) bool {
	if !s.subjectMatches(a.GetUser()) {
		return false
	}
	// A read-only policy allows only reads; any policy allows them.
	if s.Readonly && !a.IsReadOnly() {
		return false
	}
	if a.IsResourceRequest() {
		return fieldMatches(s.Cluster, server.ClusterOf(a)) &&
			fieldMatches(s.Namespace, a.GetNamespace()) &&
			fieldMatches(s.Resource, a.GetResource()) &&
			fieldMatches(s.APIGroup, a.GetAPIGroup())
	}
	switch p := s.NonResourcePath; {
	case p == Wildcard || p == a.GetPath():
		return true
	case strings.HasSuffix(p, Wildcard):
		return strings.HasPrefix(a.GetPath(), strings.TrimRight(p, Wildcard))
	}
	return false
}

// subjectMatches: a policy names a user, a group or both; each one given
// must match, and a policy naming neither matches no one.
func (s *PolicySpec) subjectMatches(u user.Info) bool {
	if u == nil || (s.User == "" && s.Group == "") {
		return false
	}
	if s.User != "" && s.User != Wildcard && s.User != u.GetName() {
		return false
	}
	if s.Group != "" && s.Group != Wildcard {
		for _, g := range u.GetGroups() {
			if g == s.Group {
				return true
			}
		}
		return false
	}
	return true
}

func fieldMatches(policy, value string) bool {
	return policy == Wildcard || policy == value
}
