// Package ui is eventsd's web timeline, served at /ui/: an overview of
// the namespaces and the objects with the most Warning events in the
// last hour, and per object a timeline of every event where it is the
// regarding or the related object, kept live with a watch; for an object
// that owns others (a Deployment and its ReplicaSets and Pods), its family:
// one lane per object of eventsd's ownership lineage, indented under its
// owner, deleted objects marked, zoomable over time. Its search page
// (search.html) searches every event: a CEL filter with examples and the
// server's errors shown under it, namespace, type, reason, kind and time
// range filters, a histogram of occurrences over time (eventsd's facets)
// that zooms the list, the loudest reasons, kinds and namespaces, and
// the matching events kept live with repaints batched.
//
// The page is static HTML, CSS and JavaScript modules embedded in the
// binary (no build step, nothing downloaded at run time). It holds no
// data: it reads the events.k8s.io/v1 API of the server that serves it,
// with the user's bearer token when the API asks for one, so what a user
// sees is what the API's authentication and authorization let them read.
// The assets themselves are served without authentication.
//
// The pages' logic that can be tested without a browser lives in
// assets/model.js and assets/searchmodel.js; their unit tests
// (testdata/model_test.js, testdata/search_test.js) and the
// end-to-end tests of the page run in a real headless Chromium driven by
// chromedp.
package ui
