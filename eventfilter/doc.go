// Package eventfilter compiles and evaluates CEL filters over Events: the
// `filter` query parameter of a list or a watch, an expression over
// `object`, the event in the shape of the request's group (core/v1's
// message, involvedObject, count, lastTimestamp; events.k8s.io/v1's note,
// regarding, series, eventTime), that must evaluate to a bool.
//
// It uses the CEL environment kube-apiserver uses for
// ValidatingAdmissionPolicy: k8s.io/apiserver/pkg/cel/environment's base
// environment at the current compatibility version (its string, regex,
// list, URL, quantity, IP and timestamp libraries), `object` declared
// from the Event's OpenAPI schema (the models eventsd embeds, see
// eventapi/fieldmanager) through k8s.io/apiserver/pkg/cel/common, the
// library cost estimator of k8s.io/apiserver/pkg/cel/library, and values
// converted from the typed Event with common.TypedToVal.
//
// A Compiler (built once, by the server) holds the environments and the
// limits; Compile is the one-shot form.
//
// Cost is bounded three ways (Limits): the expression's length; its
// estimated cost on one event, checked at Compile (an expression whose
// worst case is too dear is refused before it runs); and its actual cost,
// per event (the CEL runtime cost limit) and summed over one request (a
// Run), so that a filter cheap on each event still cannot scan without
// bound.
package eventfilter
