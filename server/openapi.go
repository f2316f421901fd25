package server

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/kubevents/kubevents/eventapi"
)

// openAPI serves the OpenAPI v3 documents kubectl reads before `create -f`
// with its default --validate=strict: it looks, in the group-version's
// document, for a PATCH operation tagged with the object's
// group-version-kind that declares the fieldValidation parameter, and then
// lets the server validate. The documents describe the events endpoints
// and their parameters; they do not carry schemas.
//
// Requests forwarded by an authenticating front proxy (a cluster's
// kube-apiserver aggregating eventsd's group) get an index that lists
// eventsd's own group alone: kube-apiserver merges the index of every
// APIService backend into its own, path by path, so an index listing
// api/v1 or events.k8s.io/v1 would let eventsd's skeletal documents stand
// in for the cluster's own.
//
// /openapi/v2 answers a Swagger 2.0 document without paths: kube-apiserver's
// aggregator downloads every APIService backend's v2 document to merge it
// into its own, and logs and retries a 404 for as long as the backend is
// registered. eventsd describes its API in v3 only, which is what kubectl
// reads.
type openAPI struct {
	v2                     []byte
	index, frontProxyIndex []byte
	docs                   map[string][]byte // "api/v1", "apis/events.k8s.io/v1", "apis/events.kubevents.io/v1"
	etags                  map[string]string
}

func newOpenAPI() (*openAPI, error) {
	o := &openAPI{docs: map[string][]byte{}, etags: map[string]string{}}
	type entry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	paths, frontProxyPaths := map[string]entry{}, map[string]entry{}
	kubevents := eventapi.KubeventsGroupVersion
	for _, gv := range []struct {
		key, group, version, prefix string
		readOnly                    bool
	}{
		{"api/v1", "", "v1", "/api/v1", false},
		{"apis/events.k8s.io/v1", "events.k8s.io", "v1", "/apis/events.k8s.io/v1", false},
		{"apis/" + kubevents.String(), kubevents.Group, kubevents.Version, "/apis/" + kubevents.String(), true},
	} {
		doc, err := json.Marshal(openAPIDoc(gv.group, gv.version, gv.prefix, gv.readOnly))
		if err != nil {
			return nil, err
		}
		sum := sha512.Sum512(doc)
		hash := strings.ToUpper(hex.EncodeToString(sum[:]))
		o.docs[gv.key] = doc
		o.etags[gv.key] = hash
		paths[gv.key] = entry{ServerRelativeURL: "/openapi/v3/" + gv.key + "?hash=" + hash}
		if gv.group == kubevents.Group {
			frontProxyPaths[gv.key] = paths[gv.key]
		}
	}
	var err error
	if o.v2, err = json.Marshal(map[string]any{
		"swagger": "2.0",
		"info":    map[string]any{"title": "kubevents eventsd (described in OpenAPI v3: /openapi/v3)", "version": kubevents.Version},
		"paths":   map[string]any{},
	}); err != nil {
		return nil, err
	}
	if o.index, err = json.Marshal(map[string]any{"paths": paths}); err != nil {
		return nil, err
	}
	o.frontProxyIndex, err = json.Marshal(map[string]any{"paths": frontProxyPaths})
	return o, err
}

// openAPIDoc is the document of one group-version; a read-only one
// (eventsd's own group) describes get, list and watch only.
func openAPIDoc(group, version, prefix string, readOnly bool) map[string]any {
	gvk := map[string]string{"group": group, "version": version, "kind": "Event"}
	param := func(name, in string) map[string]any {
		p := map[string]any{"name": name, "in": in, "schema": map[string]any{"type": "string", "uniqueItems": true}}
		if in == "path" {
			p["required"] = true
		}
		return p
	}
	q := func(names ...string) []any {
		var out []any
		for _, n := range names {
			out = append(out, param(n, "query"))
		}
		return out
	}
	ref := map[string]any{"$ref": "#/components/schemas/Event"}
	body := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref}}}
	resp := func(codes ...string) map[string]any {
		out := map[string]any{}
		for _, c := range codes {
			out[c] = map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": ref}}}
		}
		return out
	}
	op := func(id, action string, params []any, withBody bool, codes ...string) map[string]any {
		o := map[string]any{
			"operationId":                     id,
			"parameters":                      params,
			"responses":                       resp(codes...),
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": gvk,
			"tags":                            []string{strings.TrimSuffix(group+"_"+version, "_")},
			"description":                     action + " Event",
		}
		if withBody {
			o["requestBody"] = body
		}
		return o
	}
	item := prefix + "/namespaces/{namespace}/events/{name}"
	coll := prefix + "/namespaces/{namespace}/events"
	nsName := []any{param("name", "path"), param("namespace", "path")}
	ns := []any{param("namespace", "path")}
	patchBody := map[string]any{"content": map[string]any{
		"application/json-patch+json":            map[string]any{"schema": map[string]any{"type": "object"}},
		"application/merge-patch+json":           map[string]any{"schema": map[string]any{"type": "object"}},
		"application/strategic-merge-patch+json": map[string]any{"schema": map[string]any{"type": "object"}},
		"application/apply-patch+yaml":           map[string]any{"schema": map[string]any{"type": "object"}},
	}}
	patch := op("patchNamespacedEvent", "patch", append(nsName, q("dryRun", "fieldManager", "fieldValidation", "force")...), false, "200")
	patch["requestBody"] = patchBody
	listParams := q("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
	collOps := map[string]any{
		"parameters": ns,
		"get":        op("listNamespacedEvent", "list", listParams, false, "200"),
	}
	itemOps := map[string]any{
		"parameters": nsName,
		"get":        op("readNamespacedEvent", "get", nil, false, "200"),
	}
	if !readOnly {
		collOps["post"] = op("createNamespacedEvent", "post", q("dryRun", "fieldManager", "fieldValidation"), true, "200", "201", "202")
		collOps["delete"] = op("deleteCollectionNamespacedEvent", "deletecollection", q("dryRun", "fieldSelector", "labelSelector", "propagationPolicy"), false, "200")
		itemOps["put"] = op("replaceNamespacedEvent", "put", q("dryRun", "fieldManager", "fieldValidation"), true, "200", "201")
		itemOps["patch"] = patch
		itemOps["delete"] = op("deleteNamespacedEvent", "delete", q("dryRun", "gracePeriodSeconds", "propagationPolicy"), false, "200", "202")
	}
	return map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]any{"title": "Kubernetes", "version": "v1.32.0"},
		"paths": map[string]any{
			coll: collOps,
			item: itemOps,
			prefix + "/events": map[string]any{
				"get": op("listEventForAllNamespaces", "list", listParams, false, "200"),
			},
		},
		"components": map[string]any{"schemas": map[string]any{
			"Event": map[string]any{
				"type":                            "object",
				"description":                     "Event is a report of an event somewhere in the cluster.",
				"x-kubernetes-group-version-kind": []any{gvk},
			},
		}},
	}
}

// serve answers an OpenAPI path; ok=false if p is not one. frontProxy
// says the request came through an authenticating front proxy.
func (o *openAPI) serve(w http.ResponseWriter, r *http.Request, frontProxy bool) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if p == "/openapi/v2" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(o.v2)
		return true
	}
	if p == "/openapi/v3" {
		w.Header().Set("Content-Type", "application/json")
		if frontProxy {
			_, _ = w.Write(o.frontProxyIndex)
			return true
		}
		_, _ = w.Write(o.index)
		return true
	}
	key, ok := strings.CutPrefix(p, "/openapi/v3/")
	doc, found := o.docs[key]
	if !ok || !found {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Etag", `"`+o.etags[key]+`"`)
	_, _ = w.Write(doc)
	return true
}
