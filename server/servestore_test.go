package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage"
)

// serveStore serves store with a default server on loopback until the
// test ends (then the server shuts down and the store closes), returning
// its URL and a client-go clientset for it.
func serveStore(t *testing.T, store storage.Interface) (string, kubernetes.Interface) {
	t.Helper()
	return servertest.Serve(t, server.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
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
