// Package ui is eventsd's web timeline, served at /ui/: an overview of
// the namespaces and the objects with the most Warning events in the
// last hour, and per object a timeline of every event where it is the
// regarding or the related object, kept live with a watch; for an object
// that owns others (a Deployment and its ReplicaSets and Pods), its family:
// one lane per object of eventsd's ownership lineage, indented under its
// owner, deleted objects marked, zoomable over time.
//
// The page is static HTML, CSS and JavaScript modules embedded in the
// binary (no build step, nothing downloaded at run time). It holds no
// data: it reads the events.k8s.io/v1 API of the server that serves it,
// with the user's bearer token when the API asks for one, so what a user
// sees is what the API's authentication and authorization let them read.
// The assets themselves are served without authentication.
//
// The page's logic that can be tested without a browser lives in
// assets/model.js; its unit tests (testdata/model_test.js) and the
// end-to-end tests of the page run in a real headless Chromium driven by
// chromedp.
package ui
