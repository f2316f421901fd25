package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// serveStore serves store with a default server on loopback until the
// test ends (then the server shuts down and the store closes), returning
// its URL and a client-go clientset for it.
func serveStore(t *testing.T, store storage.Interface) (string, kubernetes.Interface) {
	t.Helper()
	srv, err := server.New(server.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.BeginShutdown()
		hs.Close()
		_ = srv.Drain(context.Background())
		_ = store.Close()
	})
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return hs.URL, cs
}

// readyz is the status and body of url's /readyz.
func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
