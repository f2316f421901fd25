// Package servertest serves an eventsd API server on loopback for tests
// of the packages that talk to one (the server's own, the web page's,
// the demo's).
package servertest

import (
	"context"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/server"
)

// Serve runs a server of cfg on loopback until the test ends, then shuts
// it down, waits for its handlers and closes cfg.Store. It returns the
// server's URL and a client-go clientset for it without client-side rate
// limits.
func Serve(t testing.TB, cfg server.Config) (string, kubernetes.Interface) {
	t.Helper()
	return serve(t, cfg, false)
}

// ServeTLS is Serve over HTTPS, with httptest's self-signed certificate
// (the clientset trusts it): client-go sends a kubeconfig's credentials
// only over TLS, so tests of authentication through a kubeconfig or
// kubectl's flags need it.
func ServeTLS(t testing.TB, cfg server.Config) (string, kubernetes.Interface) {
	t.Helper()
	return serve(t, cfg, true)
}

func serve(t testing.TB, cfg server.Config, useTLS bool) (string, kubernetes.Interface) {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	rc := &rest.Config{QPS: -1}
	if useTLS {
		hs.StartTLS()
		rc.TLSClientConfig.Insecure = true // httptest's own certificate
	} else {
		hs.Start()
	}
	rc.Host = hs.URL
	t.Cleanup(func() {
		srv.BeginShutdown()
		hs.Close()
		_ = srv.Drain(context.Background())
		_ = cfg.Store.Close()
	})
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return hs.URL, cs
}
