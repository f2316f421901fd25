package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A server serves one cluster's events at its root, and, with a fleet
// (Config.Clusters), each cluster of the fleet at /clusters/NAME/ and
// every one of them at once at /clusters/*/ (FleetPath), as kcp serves
// its workspaces. Each is a scope: the store view, lineage and write
// policy the request's handlers use. Everything else (limits, metrics,
// authentication) is the server's, shared by every scope.

// ClustersPathPrefix starts the path of a fleet's cluster: the rest of a
// request's path after /clusters/NAME is served as at the root.
const ClustersPathPrefix = "/clusters/"

// FleetCluster is the name, in a path, of every cluster at once.
const FleetCluster = "*"

// Cluster is one cluster of a fleet (Config.Clusters).
type Cluster struct {
	// Name is the cluster's name (a DNS label; clusterview.ValidName),
	// served at /clusters/NAME/.
	Name string
	// Lineage resolves the cluster's family.* selectors; nil answers
	// them as a lineage that knows nothing.
	Lineage Lineage
	// ReadOnly, when set, refuses writes of the cluster's events with this
	// message, as Config.ReadOnly does at the root: a mirrored cluster's
	// events are written by its mirror.
	ReadOnly string
}

// scope is what a request's handlers serve: one cluster's events (the
// root's, or a fleet's cluster's), or every named cluster's.
type scope struct {
	// name is the cluster's name in authorization attributes and
	// messages: "" for the root cluster, FleetCluster for the fleet.
	name      string
	store     storage.Interface
	lineage   Lineage
	readOnly  string
	discovery *discovery
	// fleet is set for the fleet scope: its events carry their cluster
	// (clusterview.ClusterAnnotation), and a cluster field selector
	// narrows it (fleetSelector).
	fleet *clusterview.View
}

// scopeKey is the context key of a request's scope.
type scopeKey struct{}

// scopeOf returns the scope of a request's context: the root's unless
// the request was routed to a cluster.
func (s *Server) scopeOf(ctx context.Context) *scope {
	if sc, ok := ctx.Value(scopeKey{}).(*scope); ok {
		return sc
	}
	return s.root
}

// store returns the store the request's scope serves.
func (s *Server) store(ctx context.Context) storage.Interface { return s.scopeOf(ctx).store }

// newScopes builds the root's scope and a fleet's.
func (s *Server) newScopes(cfg Config) error {
	rw, err := newDiscovery(false)
	if err != nil {
		return err
	}
	ro, err := newDiscovery(true)
	if err != nil {
		return err
	}
	disc := func(readOnly string) *discovery {
		if readOnly != "" {
			return ro
		}
		return rw
	}
	lin := func(l Lineage) Lineage {
		if l == nil {
			return lineage.New(lineage.Options{Clock: cfg.Clock})
		}
		return l
	}
	s.root = &scope{store: cfg.Store, lineage: lin(cfg.Lineage), readOnly: cfg.ReadOnly, discovery: disc(cfg.ReadOnly)}
	if len(cfg.Clusters) == 0 {
		if cfg.RootCluster != "" {
			return fmt.Errorf("server: Config.RootCluster %q names no cluster of Config.Clusters", cfg.RootCluster)
		}
		return nil
	}
	s.clusters = make(map[string]*scope, len(cfg.Clusters)+1)
	for _, c := range cfg.Clusters {
		if why := clusterview.ValidName(c.Name); why != "" {
			return fmt.Errorf("server: Config.Clusters: cluster name %q: %s", c.Name, why)
		}
		if _, dup := s.clusters[c.Name]; dup {
			return fmt.Errorf("server: Config.Clusters: cluster %q given twice", c.Name)
		}
		s.clusters[c.Name] = &scope{name: c.Name, store: clusterview.New(cfg.Store, c.Name),
			lineage: lin(c.Lineage), readOnly: c.ReadOnly, discovery: disc(c.ReadOnly)}
	}
	fleet := clusterview.Fleet(cfg.Store)
	s.clusters[FleetCluster] = &scope{name: FleetCluster, store: fleet, fleet: fleet,
		lineage: lin(nil), readOnly: fleetReadOnly, discovery: ro}
	if cfg.RootCluster != "" {
		sc, ok := s.clusters[cfg.RootCluster]
		if !ok || cfg.RootCluster == FleetCluster {
			return fmt.Errorf("server: Config.RootCluster %q names no cluster of Config.Clusters", cfg.RootCluster)
		}
		s.root = sc
	} else {
		// The root cluster's own events (written to eventsd itself) are
		// kept apart from the fleet's.
		s.root.store = clusterview.New(cfg.Store, "")
	}
	return nil
}

// serveClusters answers GET /clusters/ (authorized as a non-resource
// path) with the fleet's clusters (eventapi.ClusterList).
func (s *Server) serveClusters(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	list := eventapi.ClusterList{TypeMeta: metav1.TypeMeta{Kind: "ClusterList", APIVersion: eventapi.KubeventsGroupVersion.String()}, Items: []eventapi.ClusterInfo{}}
	for _, n := range s.clusterNames() {
		sc := s.clusters[n]
		list.Items = append(list.Items, eventapi.ClusterInfo{Name: n, Root: s.root == sc, ReadOnly: sc.readOnly != ""})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&list)
}

// clusterNames returns the names of the fleet's clusters, sorted.
func (s *Server) clusterNames() []string {
	names := make([]string, 0, len(s.clusters))
	for n := range s.clusters {
		if n != FleetCluster {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// only returns the fleet scope sc restricted to some of its clusters (a
// user allowed in those only).
func (sc *scope) only(clusters []string) *scope {
	cp := *sc
	cp.fleet = sc.fleet.Only(clusters...)
	cp.store = cp.fleet
	return &cp
}

// fleetReadOnly refuses writes to every cluster at once.
var fleetReadOnly = "events are written to one cluster, at " + ClustersPathPrefix + "NAME/, not to " + ClustersPathPrefix + FleetCluster + "/"

// routeCluster routes a request under /clusters/NAME/ to that cluster's
// scope, with the rest of its path; it answers 404 for a cluster the
// server does not serve. Other requests are the root's.
func (s *Server) routeCluster(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, ClustersPathPrefix)
	if !ok || rest == "" {
		return r, true // GET /clusters/ is served as any path (serveClusters)
	}
	name, sub, _ := strings.Cut(rest, "/")
	sc, ok := s.clusters[name]
	if !ok {
		msg := fmt.Sprintf("cluster %q is not served here", name)
		if len(s.clusters) == 0 {
			msg = "this eventsd serves no fleet: its events are at the root (see --sources-config)"
		} else {
			names := make([]string, 0, len(s.clusters))
			for n := range s.clusters {
				names = append(names, n)
			}
			slices.Sort(names)
			msg += " (clusters: " + strings.Join(names, ", ") + ")"
		}
		se := newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, msg)
		se.ErrStatus.Details = &metav1.StatusDetails{Name: name, Kind: "clusters"}
		writeStatus(w, se)
		return nil, false
	}
	r2 := r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc))
	u := *r.URL
	u.Path, u.RawPath = "/"+sub, ""
	r2.URL = &u
	r2.RequestURI = u.RequestURI()
	return r2, true
}

// clusterTerm is the field of the fleet's cluster selector.
const clusterTerm = "cluster"

// fleetSelector takes the cluster terms (cluster=NAME, cluster!=NAME)
// out of a fleet request's raw field selector, and returns the rest, and
// sel with the clusters they select: the one an equality names
// (sel.Clusters), or every cluster but those they exclude (a predicate
// on the events' cluster annotation, ahead of sel.Predicate).
func (sc *scope) fleetSelector(raw string, sel *storage.Selector) (rest string, se *apierrors.StatusError) {
	if sc.fleet == nil || !strings.Contains(raw, clusterTerm) {
		return raw, nil
	}
	var keep, not []string
	var eq string
	for _, term := range strings.Split(raw, ",") {
		f, v, neg, ok := splitTerm(term)
		if !ok || f != clusterTerm {
			keep = append(keep, term)
			continue
		}
		if why := clusterview.ValidName(v); why != "" {
			return "", apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: cluster %q: %s", v, why))
		}
		if neg {
			not = append(not, v)
			continue
		}
		if eq != "" && eq != v {
			return "", apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: cluster=%s and cluster=%s select nothing", eq, v))
		}
		eq = v
	}
	switch {
	case eq != "" && slices.Contains(not, eq):
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: cluster=%s and cluster!=%s select nothing", eq, eq))
	case eq != "":
		sel.Clusters = storage.OneCluster(eq)
	case len(not) > 0:
		sel.Predicate = notClusters{not: not, next: sel.Predicate}
	}
	return strings.Join(keep, ","), nil
}

// notClusters refuses the events of some clusters of a fleet view (by
// their clusterview.ClusterAnnotation), then asks next (if any).
type notClusters struct {
	not  []string
	next storage.Predicate
}

// Unwrap returns the predicate asked after n (filterRun looks through it).
func (n notClusters) Unwrap() storage.Predicate { return n.next }

// Matches implements storage.Predicate.
func (n notClusters) Matches(ev *corev1.Event) bool {
	if slices.Contains(n.not, clusterview.ClusterOf(ev)) {
		return false
	}
	return n.next == nil || n.next.Matches(ev)
}

// splitTerm splits a field selector term into its field, value and
// whether it is an inequality.
func splitTerm(term string) (field, value string, negate, ok bool) {
	for _, op := range []string{"!=", "==", "="} {
		if f, v, found := strings.Cut(term, op); found {
			return strings.TrimSpace(f), strings.TrimSpace(v), op == "!=", true
		}
	}
	return "", "", false, false
}

// fleetOnlyOneCluster refuses what only one cluster can answer (a family,
// the lineage of objects) on the fleet.
func fleetOnlyOneCluster(what string) *apierrors.StatusError {
	return apierrors.NewBadRequest(fmt.Sprintf("%s are answered for one cluster: ask %sNAME/, not %s%s/", what, ClustersPathPrefix, ClustersPathPrefix, FleetCluster))
}
