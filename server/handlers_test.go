package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// do sends a request to e's server and returns the status code and body.
func (e *env) do(method, path, contentType, accept, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUnproducibleResponseWritesNothing: a write whose response cannot be
// produced (an Accept header eventsd cannot satisfy, or a Table with an
// unknown includeObject) is refused before it is stored.
func TestUnproducibleResponseWritesNothing(t *testing.T) {
	const (
		events  = "/api/v1/namespaces/default/events"
		unknown = "application/unknown"
		table   = "application/json;as=Table;v=v1;g=meta.k8s.io"
	)
	body := func(name, message string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"involvedObject":{"namespace":"default"},"reason":"Started","message":%q}`, name, message)
	}
	e := newEnv(t, time.Hour)

	for _, tc := range []struct {
		what, method, path, query, accept string
		code                              int
	}{
		{"POST with an unknown Accept", http.MethodPost, events, "", unknown, http.StatusNotAcceptable},
		{"PUT creating with an unknown Accept", http.MethodPut, events + "/put", "", unknown, http.StatusNotAcceptable},
		{"POST of a Table with a bad includeObject", http.MethodPost, events, "?includeObject=Everything", table, http.StatusBadRequest},
	} {
		name := "post"
		if tc.method == http.MethodPut {
			name = "put"
		}
		if code, resp := e.do(tc.method, tc.path+tc.query, "application/json", tc.accept, body(name, "new")); code != tc.code {
			t.Fatalf("%s: %d %s, want %d", tc.what, code, resp, tc.code)
		}
		if code, resp := e.do(http.MethodGet, events+"/"+name, "", "", ""); code != http.StatusNotFound {
			t.Fatalf("%s: then GET: %d %s, want 404: the event was created", tc.what, code, resp)
		}
	}

	created := e.create("a")
	for _, tc := range []struct {
		what, method, contentType, query, accept, body string
		code                                           int
	}{
		{"PATCH with an unknown Accept", http.MethodPatch, "application/merge-patch+json", "", unknown,
			`{"message":"patched"}`, http.StatusNotAcceptable},
		{"PUT updating with an unknown Accept", http.MethodPut, "application/json", "", unknown,
			body("a", "replaced"), http.StatusNotAcceptable},
		{"PATCH of a Table with a bad includeObject", http.MethodPatch, "application/merge-patch+json", "?includeObject=Everything", table,
			`{"message":"patched"}`, http.StatusBadRequest},
	} {
		if code, resp := e.do(tc.method, events+"/a"+tc.query, tc.contentType, tc.accept, tc.body); code != tc.code {
			t.Fatalf("%s: %d %s, want %d", tc.what, code, resp, tc.code)
		}
		got, err := e.cs.CoreV1().Events("default").Get(e.ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != created.ResourceVersion || got.Message != created.Message {
			t.Fatalf("%s: the event changed: resourceVersion %s → %s, message %q → %q",
				tc.what, created.ResourceVersion, got.ResourceVersion, created.Message, got.Message)
		}
	}
}
