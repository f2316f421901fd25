package evctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// discoveryServer serves legacy discovery listing groups (and core v1).
func discoveryServer(t *testing.T, groups ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body any
		switch r.URL.Path {
		case "/api":
			body = metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}}
		case "/apis":
			l := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
			for _, g := range groups {
				gv := metav1.GroupVersionForDiscovery{GroupVersion: g + "/v1", Version: "v1"}
				l.Groups = append(l.Groups, metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
			}
			body = l
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPickGroup: --api-group=auto reads eventsd's own group only from a
// kube-apiserver that serves it through its aggregator; from eventsd
// itself, from a kube-apiserver without it, and from a server whose
// discovery fails, it reads events.k8s.io. Explicit values are taken as
// given, and an unknown one is an error naming the flag.
func TestPickGroup(t *testing.T) {
	for _, tc := range []struct {
		what   string
		groups []string
		flag   string
		want   string
	}{
		{"kube-apiserver with eventsd registered", []string{"apiregistration.k8s.io", "events.k8s.io", "events.kubevents.io"}, "auto", groupKubevents},
		{"kube-apiserver without eventsd", []string{"apiregistration.k8s.io", "events.k8s.io"}, "auto", groupUpstream},
		{"eventsd itself", []string{"events.k8s.io", "events.kubevents.io"}, "auto", groupUpstream},
		{"eventsd, its group asked for", []string{"events.k8s.io", "events.kubevents.io"}, "events.kubevents.io", groupKubevents},
		{"kube-apiserver with eventsd, events.k8s.io asked for", []string{"apiregistration.k8s.io", "events.k8s.io", "events.kubevents.io"}, "events.k8s.io", groupUpstream},
	} {
		srv := discoveryServer(t, tc.groups...)
		disc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pickGroup(tc.flag, disc)
		if err != nil || got != tc.want {
			t.Errorf("%s (--api-group=%s): %q, %v; want %q", tc.what, tc.flag, got, err, tc.want)
		}
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	disc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: failing.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pickGroup("auto", disc); err != nil || got != groupUpstream {
		t.Errorf("discovery failing: %q, %v; want %q", got, err, groupUpstream)
	}
	if _, err := pickGroup("events", disc); err == nil || !strings.Contains(err.Error(), "--api-group") {
		t.Errorf("--api-group=events: %v, want an error naming the flag", err)
	}
}
