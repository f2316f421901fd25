package ociregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeChart writes a chart archive as helm package lays it out (the
// chart's files under one directory named after it) holding chartYAML and
// a values.yaml, and returns its path.
func writeChart(t *testing.T, dir, name, chartYAML string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{
		{name + "/Chart.yaml", chartYAML},
		{name + "/values.yaml", "replicas: 1\n"},
		{name + "/charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 9.9.9\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name+"-*.tgz", buf.Bytes())
}

// writeFile writes b to a new file in dir named after pattern
// (os.CreateTemp) and returns its path.
func writeFile(t *testing.T, dir, pattern string, b []byte) string {
	t.Helper()
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

const demoChartYAML = `apiVersion: v2
name: demo
description: A demo chart.
type: application
version: 1.2.3
appVersion: "v1.2.3"
kubeVersion: ">=1.27.0-0"
home: https://example.com/demo
sources:
  - https://example.com/demo/src
  - https://example.com/other
keywords: [a, b]
maintainers:
  - name: Ann
    email: ann@example.com
  - name: Bob
annotations:
  org.opencontainers.image.title: not-the-title
  example.com/extra: yes-it-is
`

// newServer starts a Server closed at the test's end, with a fake clock.
func newServer(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Clock == nil {
		o.Clock = clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 3, 4, 5, 0, time.UTC))
	}
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// client reaches s as a child process with s.Env would: by its host name,
// through the proxy, trusting its CA.
func client(t *testing.T, s *Server) *http.Client {
	t.Helper()
	tr := s.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, c *http.Client, method, url string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestRegistryServesChartAsHelmPushStoresIt(t *testing.T) {
	s := newServer(t, Options{})
	tgz := writeChart(t, t.TempDir(), "demo", demoChartYAML)
	tgzBytes, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.AddChart("example/charts/demo", tgz)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "demo" || c.Version != "1.2.3" || c.Tag != "1.2.3" || c.Repository != "example/charts/demo" || c.ChartDigest != sha(tgzBytes) {
		t.Fatalf("AddChart: %+v", c)
	}
	cl := client(t, s)
	base := "https://ghcr.io/v2/"

	a := do(t, cl, "GET", base)
	if a.status != 200 || string(a.body) != "{}" || a.header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Fatalf("GET /v2/: %d %v %q", a.status, a.header, a.body)
	}

	// The manifest by tag, HEAD then GET, as oras-go resolves then fetches.
	head := do(t, cl, "HEAD", base+"example/charts/demo/manifests/1.2.3")
	get := do(t, cl, "GET", base+"example/charts/demo/manifests/1.2.3")
	for _, a := range []answer{head, get} {
		if a.status != 200 || a.header.Get("Content-Type") != ManifestMediaType ||
			a.header.Get("Docker-Content-Digest") != c.ManifestDigest || a.header.Get("Content-Length") != strconv.Itoa(len(get.body)) {
			t.Fatalf("manifest: %d %v", a.status, a.header)
		}
	}
	if len(head.body) != 0 || sha(get.body) != c.ManifestDigest {
		t.Fatalf("manifest: HEAD body %q, GET body's digest %s, want %s", head.body, sha(get.body), c.ManifestDigest)
	}
	var m struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        descriptor
		Layers        []descriptor
		Annotations   map[string]string
	}
	if err := json.Unmarshal(get.body, &m); err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != 2 || m.MediaType != ManifestMediaType || m.Config.MediaType != ConfigMediaType || m.Config.Digest != c.ConfigDigest ||
		len(m.Layers) != 1 || m.Layers[0] != (descriptor{ChartLayerMediaType, sha(tgzBytes), int64(len(tgzBytes))}) {
		t.Fatalf("manifest: %s", get.body)
	}
	wantAnnotations := map[string]string{
		"org.opencontainers.image.title":       "demo",
		"org.opencontainers.image.version":     "1.2.3",
		"org.opencontainers.image.description": "A demo chart.",
		"org.opencontainers.image.url":         "https://example.com/demo",
		"org.opencontainers.image.source":      "https://example.com/demo/src",
		"org.opencontainers.image.authors":     "Ann (ann@example.com), Bob",
		"org.opencontainers.image.created":     "2026-11-29T03:04:05Z",
		"example.com/extra":                    "yes-it-is",
	}
	if !maps.Equal(m.Annotations, wantAnnotations) {
		t.Fatalf("annotations: %v, want %v", m.Annotations, wantAnnotations)
	}

	// The same manifest by digest.
	byDigest := do(t, cl, "GET", base+"example/charts/demo/manifests/"+c.ManifestDigest)
	if byDigest.status != 200 || !bytes.Equal(byDigest.body, get.body) {
		t.Fatalf("manifest by digest: %d %s", byDigest.status, byDigest.body)
	}

	// The config: Chart.yaml as JSON with helm's chart.Metadata's names
	// and order.
	cfg := do(t, cl, "GET", base+"example/charts/demo/blobs/"+m.Config.Digest)
	wantConfig := `{"name":"demo","home":"https://example.com/demo","sources":["https://example.com/demo/src","https://example.com/other"],"version":"1.2.3","description":"A demo chart.","keywords":["a","b"],"maintainers":[{"name":"Ann","email":"ann@example.com"},{"name":"Bob"}],"apiVersion":"v2","appVersion":"v1.2.3","annotations":{"example.com/extra":"yes-it-is","org.opencontainers.image.title":"not-the-title"},"kubeVersion":"\u003e=1.27.0-0","type":"application"}`
	if cfg.status != 200 || string(cfg.body) != wantConfig || sha(cfg.body) != m.Config.Digest || m.Config.Size != int64(len(cfg.body)) ||
		cfg.header.Get("Docker-Content-Digest") != m.Config.Digest {
		t.Fatalf("config: %d %v\n%s\nwant\n%s", cfg.status, cfg.header, cfg.body, wantConfig)
	}

	// The layer: the .tgz, byte for byte; HEAD says its size.
	layer := do(t, cl, "GET", base+"example/charts/demo/blobs/"+m.Layers[0].Digest)
	if layer.status != 200 || !bytes.Equal(layer.body, tgzBytes) || layer.header.Get("Content-Type") != "application/octet-stream" ||
		layer.header.Get("Docker-Content-Digest") != sha(tgzBytes) {
		t.Fatalf("layer: %d %v, %d bytes, want %d", layer.status, layer.header, len(layer.body), len(tgzBytes))
	}
	lh := do(t, cl, "HEAD", base+"example/charts/demo/blobs/"+m.Layers[0].Digest)
	if lh.status != 200 || len(lh.body) != 0 || lh.header.Get("Content-Length") != strconv.Itoa(len(tgzBytes)) {
		t.Fatalf("layer HEAD: %d %v", lh.status, lh.header)
	}

	tags := do(t, cl, "GET", base+"example/charts/demo/tags/list")
	if tags.status != 200 || string(tags.body) != `{"name":"example/charts/demo","tags":["1.2.3"]}` {
		t.Fatalf("tags: %d %s", tags.status, tags.body)
	}
	if r := s.Refused(); len(r) != 0 {
		t.Fatalf("the proxy refused %v", r)
	}
}

func TestRegistryTagsPages(t *testing.T) {
	s := newServer(t, Options{})
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.2.0", "1.0.0+build.7"} {
		if _, err := s.AddChart("demo", writeChart(t, dir, "demo", "apiVersion: v2\nname: demo\nversion: "+v+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	cl := client(t, s)
	all := do(t, cl, "GET", "https://ghcr.io/v2/demo/tags/list")
	if string(all.body) != `{"name":"demo","tags":["0.1.0","0.2.0","1.0.0_build.7"]}` || all.header.Get("Link") != "" {
		t.Fatalf("tags: %s %v", all.body, all.header)
	}
	first := do(t, cl, "GET", "https://ghcr.io/v2/demo/tags/list?n=2")
	if string(first.body) != `{"name":"demo","tags":["0.1.0","0.2.0"]}` || first.header.Get("Link") != `</v2/demo/tags/list?last=0.2.0&n=2>; rel="next"` {
		t.Fatalf("first page: %s %v", first.body, first.header)
	}
	next := do(t, cl, "GET", "https://ghcr.io/v2/demo/tags/list?last=0.2.0&n=2")
	if string(next.body) != `{"name":"demo","tags":["1.0.0_build.7"]}` || next.header.Get("Link") != "" {
		t.Fatalf("next page: %s %v", next.body, next.header)
	}
	if a := do(t, cl, "GET", "https://ghcr.io/v2/demo/tags/list?n=x"); a.status != 400 {
		t.Fatalf("n=x: %d %s", a.status, a.body)
	}
	// + is _ in a tag, as helm maps it.
	if a := do(t, cl, "HEAD", "https://ghcr.io/v2/demo/manifests/1.0.0_build.7"); a.status != 200 {
		t.Fatalf("1.0.0_build.7: %d", a.status)
	}
}

func TestRegistryAnswersWhatItDoesNotHoldWithOCIErrors(t *testing.T) {
	s := newServer(t, Options{})
	dir := t.TempDir()
	if _, err := s.AddChart("a/demo", writeChart(t, dir, "demo", "apiVersion: v2\nname: demo\nversion: 0.1.0\n")); err != nil {
		t.Fatal(err)
	}
	other, err := s.AddChart("b/other", writeChart(t, dir, "other", "apiVersion: v2\nname: other\nversion: 0.1.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t, s)
	base := "https://ghcr.io/v2/"
	unknownDigest := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "nope/demo/manifests/0.1.0", 404, "NAME_UNKNOWN"},
		{"GET", "nope/demo/tags/list", 404, "NAME_UNKNOWN"},
		{"GET", "a/demo/manifests/0.2.0", 404, "MANIFEST_UNKNOWN"},
		{"GET", "a/demo/manifests/" + unknownDigest, 404, "MANIFEST_UNKNOWN"},
		{"GET", "a/demo/manifests/" + other.ManifestDigest, 404, "MANIFEST_UNKNOWN"}, // another repository's
		{"GET", "a/demo/manifests/sha256:XYZ!", 400, "DIGEST_INVALID"},
		{"GET", "a/demo/blobs/" + unknownDigest, 404, "BLOB_UNKNOWN"},
		{"GET", "a/demo/blobs/" + other.ChartDigest, 404, "BLOB_UNKNOWN"}, // another repository's
		{"GET", "a/demo/blobs/latest", 400, "DIGEST_INVALID"},
		{"GET", "A/Demo/manifests/0.1.0", 400, "NAME_INVALID"},
		{"GET", "a/demo/referrers/" + unknownDigest, 404, "UNSUPPORTED"},
		{"PUT", "a/demo/manifests/0.1.0", 405, "UNSUPPORTED"},
		{"DELETE", "a/demo/manifests/0.1.0", 405, "UNSUPPORTED"},
		{"POST", "a/demo/blobs/uploads/", 405, "UNSUPPORTED"},
		{"PATCH", "a/demo/blobs/uploads/x", 405, "UNSUPPORTED"},
	} {
		a := do(t, cl, tc.method, base+tc.path)
		var e errorBody
		if err := json.Unmarshal(a.body, &e); err != nil || a.status != tc.status || a.header.Get("Content-Type") != "application/json" ||
			len(e.Errors) != 1 || e.Errors[0].Code != tc.code || e.Errors[0].Message == "" {
			t.Errorf("%s %s: %d %q, want %d %s", tc.method, tc.path, a.status, a.body, tc.status, tc.code)
		}
		if tc.status == 405 && a.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, a.header.Get("Allow"))
		}
	}
	// A HEAD has the status without a body.
	if a := do(t, cl, "HEAD", base+"a/demo/manifests/0.2.0"); a.status != 404 || len(a.body) != 0 {
		t.Errorf("HEAD of an unknown tag: %d %q", a.status, a.body)
	}
	if a := do(t, cl, "GET", "https://ghcr.io/elsewhere"); a.status != 404 {
		t.Errorf("GET /elsewhere: %d", a.status)
	}
}

func TestAddChartRejectsBadInput(t *testing.T) {
	r := NewRegistry(RegistryOptions{})
	dir := t.TempDir()
	good := writeChart(t, dir, "demo", "apiVersion: v2\nname: demo\nversion: 0.1.0\n")
	notGzip := writeFile(t, dir, "plain-*.tgz", []byte("not a chart"))
	if _, err := r.AddChart("x/demo", good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo, path, want string
	}{
		{"x/demo", filepath.Join(dir, "missing.tgz"), "no such file"},
		{"x/demo", notGzip, "not a gzipped chart archive"},
		{"x/other", good, `does not end in the chart's name "demo"`},
		{"X/demo", good, "not a valid OCI repository name"},
		{"x/demo", good, "x/demo:0.1.0 is already served"},
		{"y/demo", writeChart(t, dir, "demo", "apiVersion: v2\nname: demo\n"), "needs a name and a version"},
		{"y/demo", writeChart(t, dir, "demo", "name: [\n"), "Chart.yaml"},
		{"y/demo", writeChart(t, dir, "demo", "apiVersion: v2\nname: demo\nversion: 1.0.0~x\n"), "not a valid OCI tag"},
		{"y/demo", writeTar(t, dir, map[string]string{"README": "x", "a/b/Chart.yaml": "name: b\nversion: 1.0.0\n"}), "no <chart>/Chart.yaml"},
		{"y/demo", writeTar(t, dir, map[string]string{"a/Chart.yaml": "name: a\nversion: 1.0.0\n", "b/Chart.yaml": "name: b\nversion: 1.0.0\n"}), "two charts"},
	} {
		_, err := r.AddChart(tc.repo, tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddChart(%q, %s): %v, want an error saying %q", tc.repo, filepath.Base(tc.path), err, tc.want)
		}
	}
}

// writeTar writes a gzipped tar of files (in sorted order) and returns
// its path.
func writeTar(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "*.tgz", buf.Bytes())
}
