package server

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventVerbs are the verbs both groups serve on events, and readVerbs
// those of a read-only server (Config.ReadOnly).
var (
	eventVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	readVerbs  = []string{"get", "list", "watch"}
)

// apiResource describes one resource in discovery.
type apiResource struct {
	group, version, resource, singular, kind string
	namespaced                               bool
	shortNames                               []string
	verbs                                    []string
}

// discoveryResources lists events in the three groups and, as stubs without
// verbs, the kinds users name in `kubectl events --for KIND/NAME`: kubectl
// resolves the kind through discovery before it sends the query, and fails
// with `the server doesn't have a resource type` for a kind it cannot map.
// eventsd serves nothing but events; requests for the stubs get 404, but
// for the get of one namespace (serveNamespace).
var discoveryResources = []apiResource{
	{"", "v1", "events", "event", "Event", true, []string{"ev"}, eventVerbs},
	{"events.k8s.io", "v1", "events", "event", "Event", true, []string{"ev"}, eventVerbs},
	// eventsd's own group: read-only whatever the server's mode, and
	// without short names, so that `kubectl get ev` (and `events`) stay
	// core/v1's wherever discovery lists this group too (a cluster whose
	// kube-apiserver delegates it to eventsd).
	{"events.kubevents.io", "v1", "events", "event", "Event", true, nil, readVerbs},
	// The ownership lineage behind the family.* selectors (lineages.go).
	{"events.kubevents.io", "v1", "lineages", "lineage", "Lineage", true, nil, []string{"list"}},
	// Summaries of events: occurrences by field and over time (facets.go).
	{"events.kubevents.io", "v1", "facets", "facet", "Facet", true, nil, []string{"list"}},

	{"", "v1", "pods", "pod", "Pod", true, []string{"po"}, nil},
	{"", "v1", "nodes", "node", "Node", false, []string{"no"}, nil},
	{"", "v1", "namespaces", "namespace", "Namespace", false, []string{"ns"}, []string{"get"}},
	{"", "v1", "services", "service", "Service", true, []string{"svc"}, nil},
	{"", "v1", "endpoints", "endpoints", "Endpoints", true, []string{"ep"}, nil},
	{"", "v1", "configmaps", "configmap", "ConfigMap", true, []string{"cm"}, nil},
	{"", "v1", "secrets", "secret", "Secret", true, nil, nil},
	{"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, []string{"sa"}, nil},
	{"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true, []string{"pvc"}, nil},
	{"", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false, []string{"pv"}, nil},
	{"", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", true, []string{"rc"}, nil},
	{"", "v1", "resourcequotas", "resourcequota", "ResourceQuota", true, []string{"quota"}, nil},
	{"apps", "v1", "deployments", "deployment", "Deployment", true, []string{"deploy"}, nil},
	{"apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, []string{"rs"}, nil},
	{"apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, []string{"sts"}, nil},
	{"apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, []string{"ds"}, nil},
	{"batch", "v1", "jobs", "job", "Job", true, nil, nil},
	{"batch", "v1", "cronjobs", "cronjob", "CronJob", true, []string{"cj"}, nil},
	{"autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler", true, []string{"hpa"}, nil},
	{"networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", true, []string{"ing"}, nil},
	{"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, []string{"pdb"}, nil},
	{"storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", false, []string{"sc"}, nil},
	{"storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", false, nil, nil},
	{"coordination.k8s.io", "v1", "leases", "lease", "Lease", true, nil, nil},
	{"discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", true, nil, nil},
}

// aggregatedContentType is the media type of aggregated discovery v2.
const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// discovery holds the pre-rendered discovery documents.
type discovery struct {
	aggregatedCore, aggregatedGroups []byte
	legacyCore, legacyGroups         []byte
	groups                           map[string][]byte // "/apis/<group>"
	resourceLists                    map[string][]byte // "/api/v1", "/apis/<group>/<version>"
}

func groupOrder() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range discoveryResources {
		if r.group != "" && !seen[r.group] {
			seen[r.group] = true
			out = append(out, r.group)
		}
	}
	return out
}

func newDiscovery(readOnly bool) (*discovery, error) {
	d := &discovery{groups: map[string][]byte{}, resourceLists: map[string][]byte{}}
	type gv struct{ group, version string }
	byGV := map[gv][]apiResource{}
	versionOf := map[string]string{}
	for _, r := range discoveryResources {
		if readOnly && r.resource == "events" {
			r.verbs = readVerbs
		}
		byGV[gv{r.group, r.version}] = append(byGV[gv{r.group, r.version}], r)
		versionOf[r.group] = r.version
	}
	aggGroup := func(group string) apidiscoveryv2.APIGroupDiscovery {
		g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}}
		v := versionOf[group]
		dv := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, r := range byGV[gv{group, v}] {
			scope := apidiscoveryv2.ScopeCluster
			if r.namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			verbs := r.verbs
			if verbs == nil {
				verbs = []string{}
			}
			dv.Resources = append(dv.Resources, apidiscoveryv2.APIResourceDiscovery{
				Resource:         r.resource,
				ResponseKind:     &metav1.GroupVersionKind{Group: r.group, Version: r.version, Kind: r.kind},
				Scope:            scope,
				SingularResource: r.singular,
				Verbs:            verbs,
				ShortNames:       r.shortNames,
			})
		}
		g.Versions = []apidiscoveryv2.APIVersionDiscovery{dv}
		return g
	}
	listMeta := metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}
	var err error
	if d.aggregatedCore, err = json.Marshal(&apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: listMeta,
		Items: []apidiscoveryv2.APIGroupDiscovery{aggGroup("")}}); err != nil {
		return nil, err
	}
	all := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: listMeta}
	legacy := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, group := range groupOrder() {
		all.Items = append(all.Items, aggGroup(group))
		v := versionOf[group]
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v}
		g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: group,
			Versions: []metav1.GroupVersionForDiscovery{gvd}, PreferredVersion: gvd}
		if d.groups["/apis/"+group], err = json.Marshal(&g); err != nil {
			return nil, err
		}
		g.TypeMeta = metav1.TypeMeta{}
		legacy.Groups = append(legacy.Groups, g)
	}
	if d.aggregatedGroups, err = json.Marshal(all); err != nil {
		return nil, err
	}
	if d.legacyGroups, err = json.Marshal(legacy); err != nil {
		return nil, err
	}
	if d.legacyCore, err = json.Marshal(&metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: ""}}}); err != nil {
		return nil, err
	}
	for key, rs := range byGV {
		groupVersion := key.version
		path := "/api/" + key.version
		if key.group != "" {
			groupVersion = key.group + "/" + key.version
			path = "/apis/" + groupVersion
		}
		l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: groupVersion}
		for _, r := range rs {
			verbs := r.verbs
			if verbs == nil {
				verbs = []string{}
			}
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.resource, SingularName: r.singular,
				Namespaced: r.namespaced, Kind: r.kind, Verbs: verbs, ShortNames: r.shortNames})
		}
		if d.resourceLists[path], err = json.Marshal(l); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// wantsAggregated reports whether the client accepts aggregated discovery
// v2; kubectl asks for it first and falls back to the legacy documents.
func wantsAggregated(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mt == "application/json" && params["g"] == "apidiscovery.k8s.io" &&
			params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

// serve answers a discovery path; ok=false if p is not one.
func (d *discovery) serve(w http.ResponseWriter, r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	var body []byte
	ct := "application/json"
	switch p {
	case "/api":
		body = d.legacyCore
		if wantsAggregated(r.Header.Get("Accept")) {
			body, ct = d.aggregatedCore, aggregatedContentType
		}
	case "/apis":
		body = d.legacyGroups
		if wantsAggregated(r.Header.Get("Accept")) {
			body, ct = d.aggregatedGroups, aggregatedContentType
		}
	default:
		if b, ok := d.resourceLists[p]; ok {
			body = b
		} else if b, ok := d.groups[p]; ok {
			body = b
		} else {
			return false
		}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Vary", "Accept")
	_, _ = w.Write(body)
	return true
}
