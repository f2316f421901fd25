package server

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// openAPI serves the OpenAPI v3 documents kubectl reads before `create -f`
// with its default --validate=strict: it looks, in the group-version's
// document, for a PATCH operation tagged with the object's
// group-version-kind that declares the fieldValidation parameter, and then
// lets the server validate. The documents describe the events endpoints
// and their parameters; they do not carry schemas.
type openAPI struct {
	index []byte
	docs  map[string][]byte // "api/v1", "apis/events.k8s.io/v1"
	etags map[string]string
}

func newOpenAPI() (*openAPI, error) {
	o := &openAPI{docs: map[string][]byte{}, etags: map[string]string{}}
	type entry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	paths := map[string]entry{}
	for _, gv := range []struct{ key, group, version, prefix string }{
		{"api/v1", "", "v1", "/api/v1"},
		{"apis/events.k8s.io/v1", "events.k8s.io", "v1", "/apis/events.k8s.io/v1"},
	} {
		doc, err := json.Marshal(openAPIDoc(gv.group, gv.version, gv.prefix))
		if err != nil {
			return nil, err
		}
		sum := sha512.Sum512(doc)
		hash := strings.ToUpper(hex.EncodeToString(sum[:]))
		o.docs[gv.key] = doc
		o.etags[gv.key] = hash
		paths[gv.key] = entry{ServerRelativeURL: "/openapi/v3/" + gv.key + "?hash=" + hash}
	}
	var err error
	o.index, err = json.Marshal(map[string]any{"paths": paths})
	return o, err
}

func openAPIDoc(group, version, prefix string) map[string]any {
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
	return map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]any{"title": "Kubernetes", "version": "v1.32.0"},
		"paths": map[string]any{
			coll: map[string]any{
				"parameters": ns,
				"get":        op("listNamespacedEvent", "list", q("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"), false, "200"),
				"post":       op("createNamespacedEvent", "post", q("dryRun", "fieldManager", "fieldValidation"), true, "200", "201", "202"),
				"delete":     op("deleteCollectionNamespacedEvent", "deletecollection", q("dryRun", "fieldSelector", "labelSelector", "propagationPolicy"), false, "200"),
			},
			item: map[string]any{
				"parameters": nsName,
				"get":        op("readNamespacedEvent", "get", nil, false, "200"),
				"put":        op("replaceNamespacedEvent", "put", q("dryRun", "fieldManager", "fieldValidation"), true, "200", "201"),
				"patch":      patch,
				"delete":     op("deleteNamespacedEvent", "delete", q("dryRun", "gracePeriodSeconds", "propagationPolicy"), false, "200", "202"),
			},
			prefix + "/events": map[string]any{
				"get": op("listEventForAllNamespaces", "list", q("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion", "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch"), false, "200"),
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

func (o *openAPI) serve(w http.ResponseWriter, r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	if p == "/openapi/v3" {
		w.Header().Set("Content-Type", "application/json")
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
