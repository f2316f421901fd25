package access

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// sarServer is a loopback SubjectAccessReview API, as a cluster's
// kube-apiserver serves it (any path: the webhook's configured path, or
// /apis/authorization.k8s.io/v1/subjectaccessreviews for
// --authorization-kubeconfig), recording each review's spec. It allows a
// request to the root cluster (no cluster extra) or to cluster east, and
// denies the rest.
type sarServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	sars []authorizationv1.SubjectAccessReviewSpec
}

func newSARServer(t *testing.T) *sarServer {
	t.Helper()
	s := &sarServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// client-go sends protobuf, the webhook JSON: decode either.
		var sar authorizationv1.SubjectAccessReview
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.sars = append(s.sars, sar.Spec)
		s.mu.Unlock()
		clusters := sar.Spec.Extra[server.ClusterExtra]
		sar.Status.Allowed = len(clusters) == 0 || slices.Equal(clusters, authorizationv1.ExtraValue{"east"})
		if !sar.Status.Allowed {
			sar.Status.Reason = fmt.Sprintf("not in cluster %v", clusters)
		}
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		out, err := runtime.Encode(scheme.Codecs.LegacyCodec(authorizationv1.SchemeGroupVersion), &sar)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// take returns the reviews received since the last take.
func (s *sarServer) take() []authorizationv1.SubjectAccessReviewSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.sars
	s.sars = nil
	return got
}

// kubeconfig writes a kubeconfig whose server is the SAR server's URL
// followed by path.
func (s *sarServer) kubeconfig(t *testing.T, path string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q}
users:
- name: u
  user: {}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, s.srv.URL+path)
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestWebhookAuthorizationOfAFleet: with mode Webhook (its configuration
// file, or --authorization-kubeconfig's SubjectAccessReviews), a request
// to /clusters/east/ sends a review whose spec.extra has
// events.kubevents.io/cluster: [east]; a root request sends one without
// that extra; a request to /clusters/*/ is asked as such (extra "*"),
// then, refused so, once per cluster, each with its cluster in the extra,
// and served from the clusters allowed.
func TestWebhookAuthorizationOfAFleet(t *testing.T) {
	for _, mode := range []string{"webhook config file", "authorization kubeconfig"} {
		t.Run(mode, func(t *testing.T) {
			sars := newSARServer(t)
			tokens := filepath.Join(t.TempDir(), "tokens.csv")
			if err := os.WriteFile(tokens, []byte("tok-alice,alice,uid-alice,dev\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			o := Options{TokenAuthFile: tokens, AuthorizationModes: []string{ModeWebhook}, AuthorizedTTL: -1, UnauthorizedTTL: -1}
			if mode == "webhook config file" {
				o.AuthzWebhookConfigFile = sars.kubeconfig(t, "/authorize")
			} else {
				o.AuthorizationKubeconfig = sars.kubeconfig(t, "")
			}
			b, err := Build(o)
			if err != nil {
				t.Fatal(err)
			}
			store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), NoSync: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			url, _ := servertest.Serve(t, server.Config{Store: store, Authenticator: b.Authenticator, Authorizer: b.Authorizer, EventTTL: time.Hour,
				Logger: slog.New(slog.DiscardHandler), Clusters: []server.Cluster{{Name: "east"}, {Name: "west"}}})
			ctx := t.Context()
			// Each cluster's event, written to the store directly: no
			// review.
			for _, c := range []string{"", "east", "west"} {
				if _, err := clusterview.New(store, c).Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Namespace: "shop", Name: "web.1"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web"},
					Reason:         "Started", Message: "in " + c, Type: corev1.EventTypeNormal,
				}, storage.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			client := func(c string) kubernetes.Interface {
				host := url
				if c != "" {
					host += server.ClustersPathPrefix + c
				}
				cs, err := kubernetes.NewForConfig(&rest.Config{Host: host, BearerToken: "tok-alice", QPS: -1})
				if err != nil {
					t.Fatal(err)
				}
				return cs
			}
			// clusterExtras are the cluster extras of the reviews, in
			// order, "-" for a review without one; each review must be
			// of list events in shop by alice.
			clusterExtras := func(specs []authorizationv1.SubjectAccessReviewSpec) []string {
				t.Helper()
				var got []string
				for _, s := range specs {
					ra := s.ResourceAttributes
					if s.User != "alice" || ra == nil || ra.Verb != "list" || ra.Resource != "events" || ra.Namespace != "shop" {
						t.Errorf("review %+v, want list events in shop by alice", s)
					}
					v, ok := s.Extra[server.ClusterExtra]
					if !ok {
						got = append(got, "-")
						continue
					}
					got = append(got, strings.Join(v, ","))
				}
				return got
			}

			l, err := client("east").CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != 1 || l.Items[0].Message != "in east" {
				t.Fatalf("east's list: %v %v", l, err)
			}
			if got := clusterExtras(sars.take()); !slices.Equal(got, []string{"east"}) {
				t.Errorf("east's request: reviews with cluster extras %q, want [east]", got)
			}

			l, err = client("").CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != 1 || l.Items[0].Message != "in " {
				t.Fatalf("the root's list: %v %v", l, err)
			}
			if got := clusterExtras(sars.take()); !slices.Equal(got, []string{"-"}) {
				t.Errorf("a root request: reviews with cluster extras %q, want one without", got)
			}

			if _, err = client("west").CoreV1().Events("shop").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("west's list: %v, want Forbidden", err)
			}
			if got := clusterExtras(sars.take()); !slices.Equal(got, []string{"west"}) {
				t.Errorf("west's request: reviews with cluster extras %q, want [west]", got)
			}

			l, err = client(server.FleetCluster).CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var served []string
			for _, it := range l.Items {
				served = append(served, it.Annotations[eventapi.ClusterAnnotation]+":"+it.Message)
			}
			if !slices.Equal(served, []string{"east:in east"}) {
				t.Errorf("the fleet's list served %q, want east's event only", served)
			}
			got := clusterExtras(sars.take())
			if len(got) == 0 || got[0] != server.FleetCluster {
				t.Errorf("the fleet's request: reviews with cluster extras %q, want the fleet's first", got)
			} else {
				got = got[1:]
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"east", "west"}) {
				t.Errorf("the fleet's request: reviews with cluster extras %q, want one each for east and west after the fleet's", got)
			}
		})
	}
}
