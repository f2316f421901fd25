package ui_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// serveUI serves a server with a token authenticator and the UI on or off.
func serveUI(t *testing.T, on bool) string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := server.ParseTokens(strings.NewReader(testToken + ",alice,1001\n"))
	if err != nil {
		t.Fatal(err)
	}
	url, _ := servertest.Serve(t, server.Config{Store: store, Logger: log, UI: on, Authenticator: bearertoken.New(tokens)})
	return url
}

func get(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestUIServed: the page's files are served without a token, with a
// policy that keeps the page to its own server; the API behind it still
// needs the token; other methods are refused; /ui redirects.
func TestUIServed(t *testing.T) {
	url := serveUI(t, true)
	for _, c := range []struct{ path, contentType, contains string }{
		{"/ui/", "text/html", `<script type="module" src="app.js">`},
		{"/ui/app.js", "text/javascript", "TimelineSession"},
		{"/ui/model.js", "text/javascript", "export function layoutTimeline"},
		{"/ui/style.css", "text/css", "--label-width"},
		{"/ui/search.html", "text/html", `<script type="module" src="search.js">`},
		{"/ui/search.js", "text/javascript", "SearchSession"},
		{"/ui/searchmodel.js", "text/javascript", "export class Batcher"},
	} {
		resp, body := get(t, http.MethodGet, url+c.path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(body, c.contains) {
			t.Errorf("GET %s: %d %s, body has %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contains, strings.Contains(body, c.contains))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, csp)
		}
	}
	if resp, _ := get(t, http.MethodGet, url+"/apis/events.k8s.io/v1/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API without a token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(t, http.MethodPost, url+"/ui/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405", resp.StatusCode)
	}
	if resp, _ := get(t, http.MethodGet, url+"/ui"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d to %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, http.MethodGet, url+"/ui/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nothing.js: %d, want 404", resp.StatusCode)
	}
}

// TestUIOff: without Config.UI, /ui/ is an API path like any other
// (authenticated, then not found).
func TestUIOff(t *testing.T) {
	url := serveUI(t, false)
	if resp, _ := get(t, http.MethodGet, url+"/ui/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/ with the UI off and no token: %d, want 401", resp.StatusCode)
	}
}
