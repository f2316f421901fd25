package ociregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"
)

// Media types of a Helm chart in an OCI registry, as helm push writes them
// (helm.sh/helm/v4/pkg/registry).
const (
	// ManifestMediaType is the chart's manifest's: an OCI image manifest.
	ManifestMediaType = "application/vnd.oci.image.manifest.v1+json"
	// ConfigMediaType is the manifest's config's: Chart.yaml as JSON.
	ConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	// ChartLayerMediaType is the manifest's one layer's: the chart's .tgz.
	ChartLayerMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// Error codes of the OCI distribution specification that the registry
// answers with.
const (
	codeNameInvalid     = "NAME_INVALID"
	codeNameUnknown     = "NAME_UNKNOWN"
	codeManifestUnknown = "MANIFEST_UNKNOWN"
	codeBlobUnknown     = "BLOB_UNKNOWN"
	codeDigestInvalid   = "DIGEST_INVALID"
	codeUnsupported     = "UNSUPPORTED"
)

// maxChartYAML bounds how much of a chart's Chart.yaml is read.
const maxChartYAML = 1 << 20

var (
	// nameRE is a repository name (distribution spec, "Pulling manifests").
	nameRE = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	// tagRE is a tag (distribution spec).
	tagRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
	// digestRE is a digest (image spec, "Digests").
	digestRE = regexp.MustCompile(`^[a-z0-9]+([+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`)
)

// RegistryOptions configure NewRegistry.
type RegistryOptions struct {
	// Clock gives the time a chart is added, which its manifest's
	// org.opencontainers.image.created annotation says (as helm push's
	// does); the real clock when nil.
	Clock clock.PassiveClock
}

// Registry is a read-only OCI distribution API (an http.Handler) serving
// Helm charts, each stored as helm push stores it. It answers GET and
// HEAD on /v2/, /v2/<name>/manifests/<tag or digest>,
// /v2/<name>/blobs/<digest> and /v2/<name>/tags/list, 404 with the
// specification's error JSON for what it does not hold, and 405 to every
// write. Its methods are safe for concurrent use.
type Registry struct {
	clock clock.PassiveClock

	mu    sync.RWMutex
	repos map[string]*repository
}

// repository is what the registry holds under one name.
type repository struct {
	tags      map[string]string // tag to manifest digest
	manifests map[string][]byte // by digest
	blobs     map[string][]byte // by digest
}

// Chart is a chart the registry serves.
type Chart struct {
	// Repository is its repository name, such as kubevents/charts/eventsd.
	Repository string
	// Name and Version are the chart's, from its Chart.yaml.
	Name, Version string
	// Tag is its tag: Version with any + as _ (OCI tags have no +; helm
	// maps them so).
	Tag string
	// ManifestDigest, ConfigDigest and ChartDigest are the digests of its
	// manifest, its config (Chart.yaml as JSON) and its layer (the .tgz).
	ManifestDigest, ConfigDigest, ChartDigest string
}

// NewRegistry is an empty registry.
func NewRegistry(o RegistryOptions) *Registry {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Registry{clock: o.Clock, repos: map[string]*repository{}}
}

// AddChart serves the chart packaged in the .tgz at tgzPath (as `helm
// package` writes it) in repository repo (such as kubevents/charts/eventsd,
// whose last element must be the chart's name, as helm push requires),
// tagged with the chart's version from its Chart.yaml. A tag is added
// once: adding the same repository and version again is an error.
func (r *Registry) AddChart(repo, tgzPath string) (Chart, error) {
	data, err := os.ReadFile(tgzPath)
	if err != nil {
		return Chart{}, fmt.Errorf("ociregistry: chart: %w", err)
	}
	c, err := r.addChart(repo, data)
	if err != nil {
		return Chart{}, fmt.Errorf("ociregistry: chart %s: %w", tgzPath, err)
	}
	return c, nil
}

func (r *Registry) addChart(repo string, tgz []byte) (Chart, error) {
	if !nameRE.MatchString(repo) {
		return Chart{}, fmt.Errorf("%q is not a valid OCI repository name (lower-case path components of letters, digits and separators)", repo)
	}
	meta, configJSON, err := chartMetadata(tgz)
	if err != nil {
		return Chart{}, err
	}
	if path.Base(repo) != meta.Name {
		return Chart{}, fmt.Errorf("repository %q does not end in the chart's name %q (helm push requires it, and helm pull names the file after the chart)", repo, meta.Name)
	}
	tag := strings.ReplaceAll(meta.Version, "+", "_")
	if !tagRE.MatchString(tag) {
		return Chart{}, fmt.Errorf("the chart's version %q is not a valid OCI tag", meta.Version)
	}
	config := descriptorOf(ConfigMediaType, configJSON)
	layer := descriptorOf(ChartLayerMediaType, tgz)
	m := manifest{
		SchemaVersion: 2,
		MediaType:     ManifestMediaType,
		Config:        config,
		Layers:        []descriptor{layer},
		Annotations:   annotations(meta, r.clock.Now()),
	}
	manifestJSON, err := json.Marshal(m)
	if err != nil {
		return Chart{}, fmt.Errorf("manifest: %w", err)
	}
	manifestDigest := digestOf(manifestJSON)

	r.mu.Lock()
	defer r.mu.Unlock()
	rp := r.repos[repo]
	if rp == nil {
		rp = &repository{tags: map[string]string{}, manifests: map[string][]byte{}, blobs: map[string][]byte{}}
		r.repos[repo] = rp
	}
	if _, ok := rp.tags[tag]; ok {
		return Chart{}, fmt.Errorf("%s:%s is already served", repo, tag)
	}
	rp.tags[tag] = manifestDigest
	rp.manifests[manifestDigest] = manifestJSON
	rp.blobs[config.Digest] = configJSON
	rp.blobs[layer.Digest] = tgz
	return Chart{
		Repository:     repo,
		Name:           meta.Name,
		Version:        meta.Version,
		Tag:            tag,
		ManifestDigest: manifestDigest,
		ConfigDigest:   config.Digest,
		ChartDigest:    layer.Digest,
	}, nil
}

// metadata is a chart's Chart.yaml, with the fields and JSON names of
// helm's chart.Metadata (helm.sh/helm/v4/pkg/chart/v2) in its order, so
// that its JSON is the config helm push writes.
type metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []*maintainer     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []*dependency     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// maintainer is helm's chart.Maintainer.
type maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// dependency is helm's chart.Dependency, as Chart.yaml gives it.
type dependency struct {
	Name         string   `json:"name"`
	Version      string   `json:"version,omitempty"`
	Repository   string   `json:"repository"`
	Condition    string   `json:"condition,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	Enabled      bool     `json:"enabled,omitempty"`
	ImportValues []any    `json:"import-values,omitempty"`
	Alias        string   `json:"alias,omitempty"`
}

// chartMetadata reads the Chart.yaml at the top of a chart archive (in
// its one top-level directory, as helm's loader takes it) and returns it
// and its JSON.
func chartMetadata(tgz []byte) (*metadata, []byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, nil, fmt.Errorf("not a gzipped chart archive: %w", err)
	}
	tr := tar.NewReader(zr)
	var raw []byte
	found := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the chart archive: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		dir, file, ok := strings.Cut(name, "/")
		if !ok || file != "Chart.yaml" || dir == "" {
			continue
		}
		if found != "" {
			return nil, nil, fmt.Errorf("the archive holds two charts' Chart.yaml (%s and %s)", found, name)
		}
		found = name
		raw, err = io.ReadAll(io.LimitReader(tr, maxChartYAML+1))
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if len(raw) > maxChartYAML {
			return nil, nil, fmt.Errorf("%s is larger than %d bytes", name, maxChartYAML)
		}
	}
	if found == "" {
		return nil, nil, errors.New("no <chart>/Chart.yaml in the archive (is it a chart packaged by helm package?)")
	}
	var meta metadata
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", found, err)
	}
	if meta.Name == "" || meta.Version == "" {
		return nil, nil, fmt.Errorf("%s: the chart needs a name and a version", found)
	}
	js, err := json.Marshal(&meta)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", found, err)
	}
	return &meta, js, nil
}

// annotations are the manifest's, as helm push makes them: the OCI
// annotations from Chart.yaml, then the chart's own annotations except
// any that would replace the title or version.
func annotations(meta *metadata, created time.Time) map[string]string {
	a := map[string]string{}
	add := func(k, v string) {
		if strings.TrimSpace(v) != "" {
			a[k] = v
		}
	}
	add("org.opencontainers.image.description", meta.Description)
	add("org.opencontainers.image.title", meta.Name)
	add("org.opencontainers.image.version", meta.Version)
	add("org.opencontainers.image.url", meta.Home)
	add("org.opencontainers.image.created", created.UTC().Format(time.RFC3339))
	if len(meta.Sources) > 0 {
		add("org.opencontainers.image.source", meta.Sources[0])
	}
	if len(meta.Maintainers) > 0 {
		var names []string
		for _, m := range meta.Maintainers {
			s := m.Name
			if m.Email != "" {
				s += " (" + m.Email + ")"
			}
			names = append(names, s)
		}
		add("org.opencontainers.image.authors", strings.Join(names, ", "))
	}
	for k, v := range meta.Annotations {
		if k != "org.opencontainers.image.title" && k != "org.opencontainers.image.version" {
			a[k] = v
		}
	}
	return a
}

// manifest is an OCI image manifest.
type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func descriptorOf(mediaType string, b []byte) descriptor {
	return descriptor{MediaType: mediaType, Digest: digestOf(b), Size: int64(len(b))}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ServeHTTP answers the OCI distribution API's pull requests.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	p := req.URL.Path
	if p != "/v2" && !strings.HasPrefix(p, "/v2/") {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, req, http.StatusMethodNotAllowed, codeUnsupported, "this registry is read-only: "+req.Method+" is not supported")
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, "/v2"), "/")
	if rest == "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "2")
		if req.Method == http.MethodGet {
			_, _ = io.WriteString(w, "{}")
		}
		return
	}
	if name, ok := strings.CutSuffix(rest, "/tags/list"); ok {
		r.serveTags(w, req, name)
		return
	}
	mi := strings.LastIndex(rest, "/manifests/")
	bi := strings.LastIndex(rest, "/blobs/")
	switch {
	case mi >= 0 && mi > bi:
		r.serveManifest(w, req, rest[:mi], rest[mi+len("/manifests/"):])
	case bi >= 0:
		r.serveBlob(w, req, rest[:bi], rest[bi+len("/blobs/"):])
	default:
		writeError(w, req, http.StatusNotFound, codeUnsupported, "no such endpoint: "+p)
	}
}

// repository looks up name, answering the error itself when it is not
// served.
func (r *Registry) repository(w http.ResponseWriter, req *http.Request, name string) *repository {
	if !nameRE.MatchString(name) {
		writeError(w, req, http.StatusBadRequest, codeNameInvalid, fmt.Sprintf("invalid repository name %q", name))
		return nil
	}
	r.mu.RLock()
	rp := r.repos[name]
	r.mu.RUnlock()
	if rp == nil {
		writeError(w, req, http.StatusNotFound, codeNameUnknown, fmt.Sprintf("repository %q is not served here", name))
	}
	return rp
}

func (r *Registry) serveManifest(w http.ResponseWriter, req *http.Request, name, ref string) {
	rp := r.repository(w, req, name)
	if rp == nil {
		return
	}
	r.mu.RLock()
	digest := ref
	if !strings.Contains(ref, ":") {
		digest = rp.tags[ref]
	}
	body := rp.manifests[digest]
	r.mu.RUnlock()
	switch {
	case strings.Contains(ref, ":") && !digestRE.MatchString(ref):
		writeError(w, req, http.StatusBadRequest, codeDigestInvalid, fmt.Sprintf("invalid digest %q", ref))
		return
	case !strings.Contains(ref, ":") && !tagRE.MatchString(ref):
		writeError(w, req, http.StatusNotFound, codeManifestUnknown, fmt.Sprintf("%q is not a valid tag", ref))
		return
	case body == nil:
		writeError(w, req, http.StatusNotFound, codeManifestUnknown, fmt.Sprintf("manifest %s:%s is not served here", name, ref))
		return
	}
	h := w.Header()
	h.Set("Content-Type", ManifestMediaType)
	h.Set("Docker-Content-Digest", digest)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("ETag", `"`+digest+`"`)
	if req.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

func (r *Registry) serveBlob(w http.ResponseWriter, req *http.Request, name, digest string) {
	rp := r.repository(w, req, name)
	if rp == nil {
		return
	}
	if !digestRE.MatchString(digest) {
		writeError(w, req, http.StatusBadRequest, codeDigestInvalid, fmt.Sprintf("invalid digest %q", digest))
		return
	}
	r.mu.RLock()
	body := rp.blobs[digest]
	r.mu.RUnlock()
	if body == nil {
		writeError(w, req, http.StatusNotFound, codeBlobUnknown, fmt.Sprintf("blob %s is not in repository %s", digest, name))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Docker-Content-Digest", digest)
	h.Set("ETag", `"`+digest+`"`)
	// ServeContent answers HEAD and Range requests and sets Content-Length.
	http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(body))
}

// tagList is the body of a tags/list answer.
type tagList struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

func (r *Registry) serveTags(w http.ResponseWriter, req *http.Request, name string) {
	rp := r.repository(w, req, name)
	if rp == nil {
		return
	}
	q := req.URL.Query()
	n := -1
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeError(w, req, http.StatusBadRequest, codeUnsupported, fmt.Sprintf("invalid n %q: not a non-negative integer", s))
			return
		}
		n = v
	}
	last := q.Get("last")
	r.mu.RLock()
	tags := make([]string, 0, len(rp.tags))
	for t := range rp.tags {
		if last == "" || t > last {
			tags = append(tags, t)
		}
	}
	r.mu.RUnlock()
	slices.Sort(tags)
	if n >= 0 && n < len(tags) {
		tags = tags[:n]
		if n > 0 {
			next := url.Values{"n": {strconv.Itoa(n)}, "last": {tags[n-1]}}
			w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?%s>; rel="next"`, name, next.Encode()))
		}
	}
	body, err := json.Marshal(tagList{Name: name, Tags: tags})
	if err != nil {
		writeError(w, req, http.StatusInternalServerError, codeUnsupported, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if req.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// errorBody is the distribution specification's error answer.
type errorBody struct {
	Errors []errorEntry `json:"errors"`
}

type errorEntry struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, req *http.Request, status int, code, message string) {
	body, _ := json.Marshal(errorBody{Errors: []errorEntry{{Code: code, Message: message}}}) // cannot fail: strings only
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if req.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
