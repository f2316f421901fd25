package server

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubevents/kubevents/eventapi"
)

// kubeventsPrefix is the path of eventsd's own group's resources.
var kubeventsPrefix = "/apis/" + eventapi.KubeventsGroupVersion.String() + "/"

// verb is what a request asks the events resource to do.
type verb string

const (
	verbCreate           verb = "create"
	verbGet              verb = "get"
	verbList             verb = "list"
	verbWatch            verb = "watch"
	verbUpdate           verb = "update"
	verbPatch            verb = "patch"
	verbDelete           verb = "delete"
	verbDeleteCollection verb = "deletecollection"
)

// resourceRequest is a parsed request for the events resource.
type resourceRequest struct {
	verb      verb
	version   eventapi.Version
	namespace string // empty: all namespaces
	name      string // empty: the collection
	// query is the request's query, parsed once (resolveVerb) for
	// everything that reads it.
	query url.Values
	// scope is what the request is served from: the root's, or a fleet
	// cluster's (cluster.go).
	scope *scope
}

// parseResourcePath recognises
//
//	/api/v1[/watch][/namespaces/{ns}]/events[/{name}]
//	/apis/events.k8s.io/v1[/watch][/namespaces/{ns}]/events[/{name}]
//	/apis/events.kubevents.io/v1[/watch][/namespaces/{ns}]/events[/{name}]
//
// and returns ok=false for anything else. watchPath reports the deprecated
// /watch/ form.
func parseResourcePath(p string) (rr resourceRequest, watchPath, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(p, "/api/v1/"):
		rr.version, rest = eventapi.CoreV1, p[len("/api/v1/"):]
	case strings.HasPrefix(p, "/apis/events.k8s.io/v1/"):
		rr.version, rest = eventapi.EventsV1, p[len("/apis/events.k8s.io/v1/"):]
	case strings.HasPrefix(p, kubeventsPrefix):
		rr.version, rest = eventapi.KubeventsV1, p[len(kubeventsPrefix):]
	default:
		return rr, false, false
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if len(parts) > 0 && parts[0] == "watch" {
		watchPath, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if parts[1] == "" {
			return rr, false, false
		}
		rr.namespace, parts = parts[1], parts[2:]
	}
	switch {
	case len(parts) == 1 && parts[0] == "events":
	case len(parts) == 2 && parts[0] == "events" && parts[1] != "":
		rr.name = parts[1]
	default:
		return rr, false, false
	}
	return rr, watchPath, true
}

// resolveVerb maps the HTTP method (and watch flags) to a verb, and
// parses the query into rr.query; ok=false means the method is not
// allowed on this path.
func resolveVerb(r *http.Request, rr *resourceRequest, watchPath bool) bool {
	rr.query = r.URL.Query()
	watchParam, _ := queryBool(rr.query, "watch")
	isWatch := watchPath || watchParam
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case isWatch:
			rr.verb = verbWatch
		case rr.name != "":
			rr.verb = verbGet
		default:
			rr.verb = verbList
		}
	case http.MethodPost:
		rr.verb = verbCreate
		return rr.name == "" && rr.namespace != "" && !watchPath
	case http.MethodPut:
		rr.verb = verbUpdate
		return rr.name != "" && rr.namespace != "" && !watchPath
	case http.MethodPatch:
		rr.verb = verbPatch
		return rr.name != "" && rr.namespace != "" && !watchPath
	case http.MethodDelete:
		rr.verb = verbDelete
		if rr.name == "" {
			rr.verb = verbDeleteCollection
		}
		return rr.namespace != "" && !watchPath
	default:
		return false
	}
	return true
}

// queryBool reads a boolean query parameter as kube-apiserver converts
// every one (apimachinery's Convert_Slice_string_To_bool): "0" and "false"
// in any case are false, any other value, empty included, is true; so the
// Python client's watch=True is a watch. present reports whether the
// parameter was given at all.
func queryBool(q url.Values, key string) (value, present bool) {
	vals, present := q[key]
	// The conversion uses no scope and cannot fail.
	_ = runtime.Convert_Slice_string_To_bool(&vals, &value, nil)
	return value, present
}
