package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUIFlag: the web timeline is served at /ui/ by default, and not with
// --ui=false.
func TestUIFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, http.StatusOK},
		{[]string{"--ui=false"}, http.StatusNotFound},
	} {
		addr, stop := runEventsd(t, append([]string{"--data-dir", t.TempDir()}, c.args...)...)
		resp, err := http.Get("http://" + addr + "/ui/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		stop()
		if resp.StatusCode != c.code {
			t.Errorf("%v: GET /ui/: %d, want %d", c.args, resp.StatusCode, c.code)
		}
		if c.code == http.StatusOK && !strings.Contains(string(body), "<title>kubevents</title>") {
			t.Errorf("%v: GET /ui/ is not the page: %.200s", c.args, body)
		}
	}
}
