package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is the path the page is served under.
const Prefix = "/ui/"

//go:embed assets
var embedded embed.FS

// Assets returns the page's files (index.html, the JavaScript modules and
// the stylesheet) at the root of the returned file system.
func Assets() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		// The directory is embedded at build time: it is always there.
		panic(err)
	}
	return sub
}

// contentSecurityPolicy lets the page load only its own files and talk
// only to the server that served it: no inline script, nothing from
// elsewhere, not framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the page under Prefix: GET and HEAD of its files, /ui
// redirected to /ui/. The files hold no data and are served to anyone;
// the API requests the page makes carry the user's token.
func Handler() http.Handler {
	files := http.StripPrefix(Prefix, http.FileServerFS(Assets()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary: never kept from an older one.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
