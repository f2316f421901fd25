package ociregistry

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/helmbin"
)

// chartDir is the project's chart, from this package's directory.
var chartDir = filepath.Join("..", "..", "deploy", "helm", "eventsd")

// helmCmd runs helm with args in env and returns its stdout and stderr.
func helmCmd(t *testing.T, bin string, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// helmEnv is the environment of a helm run by a test: this process's,
// with helm's caches and configuration and Docker's credentials in a
// temporary directory (none of the user's), and then extra.
func helmEnv(t *testing.T, extra ...string) []string {
	home := t.TempDir()
	env := append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"DOCKER_CONFIG="+filepath.Join(home, "docker"))
	return append(env, extra...)
}

// TestHelmPullsTheChartByTheRegistryName runs helm as the README's line
// would be run: oci://ghcr.io/... unchanged, helm's own OCI client,
// through the proxy, trusting the CA from SSL_CERT_FILE.
func TestHelmPullsTheChartByTheRegistryName(t *testing.T) {
	bin := helmbin.ForTest(t)
	pkgDir := t.TempDir()
	if out, errOut, err := helmCmd(t, bin, helmEnv(t), "package", chartDir, "--destination", pkgDir); err != nil {
		t.Fatalf("helm package: %v\n%s%s", err, out, errOut)
	}
	tgzs, err := filepath.Glob(filepath.Join(pkgDir, "eventsd-*.tgz"))
	if err != nil || len(tgzs) != 1 {
		t.Fatalf("helm package wrote %v (%v), want one eventsd-<version>.tgz", tgzs, err)
	}
	served, err := os.ReadFile(tgzs[0])
	if err != nil {
		t.Fatal(err)
	}

	s := newServer(t, Options{NoProxy: []string{"172.31.0.0/16"}})
	c, err := s.AddChart("kubevents/charts/eventsd", tgzs[0])
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(tgzs[0]) != "eventsd-"+c.Version+".tgz" {
		t.Fatalf("chart version %q, but helm package named the archive %s", c.Version, filepath.Base(tgzs[0]))
	}
	env := helmEnv(t, s.Env()...)
	ref := "oci://ghcr.io/kubevents/charts/eventsd"

	// helm pull: the archive arrives byte for byte.
	dest := t.TempDir()
	out, errOut, err := helmCmd(t, bin, env, "pull", ref, "--version", c.Version, "--destination", dest)
	if err != nil {
		t.Fatalf("helm pull %s --version %s: %v\n%s%s", ref, c.Version, err, out, errOut)
	}
	if !strings.Contains(out+errOut, "Digest: "+c.ManifestDigest) {
		t.Errorf("helm pull does not report the served manifest's digest %s:\n%s%s", c.ManifestDigest, out, errOut)
	}
	pulled, err := os.ReadFile(filepath.Join(dest, "eventsd-"+c.Version+".tgz"))
	if err != nil {
		t.Fatalf("helm pull: %v\n%s%s", err, out, errOut)
	}
	if !bytes.Equal(pulled, served) {
		t.Fatalf("helm pulled %d bytes (%s), not the %d bytes served (%s)", len(pulled), sha(pulled), len(served), sha(served))
	}

	// helm show chart without --version lists the tags to pick the
	// latest; it prints Chart.yaml.
	out, errOut, err = helmCmd(t, bin, env, "show", "chart", ref)
	if err != nil {
		t.Fatalf("helm show chart %s: %v\n%s%s", ref, err, out, errOut)
	}
	for _, want := range []string{"name: eventsd\n", "version: " + c.Version + "\n", "apiVersion: v2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm show chart prints no %q:\n%s", want, out)
		}
	}
	if r := s.Refused(); len(r) != 0 {
		t.Fatalf("helm tried destinations other than ghcr.io:443: %q", r)
	}

	// A version that is not served: helm fails, saying so.
	out, errOut, err = helmCmd(t, bin, env, "pull", ref, "--version", "9.9.9", "--destination", t.TempDir())
	if err == nil || !strings.Contains(errOut, "ghcr.io/kubevents/charts/eventsd:9.9.9") || !strings.Contains(errOut, "not found") {
		t.Errorf("helm pull --version 9.9.9: %v, want a failure saying ghcr.io/kubevents/charts/eventsd:9.9.9 is not found:\n%s%s", err, out, errOut)
	}

	// Any other registry is refused by the proxy: nothing leaves the
	// machine.
	other := "oci://registry.example.com/kubevents/charts/eventsd"
	out, errOut, err = helmCmd(t, bin, env, "pull", other, "--version", c.Version, "--destination", t.TempDir())
	if err == nil || !strings.Contains(errOut, "Forbidden") {
		t.Errorf("helm pull %s: %v, want a failure (403 Forbidden from the proxy):\n%s%s", other, err, out, errOut)
	}
	if r := s.Refused(); !slices.Contains(r, "CONNECT registry.example.com:443") {
		t.Errorf("the proxy refused %q, want CONNECT registry.example.com:443 among them", r)
	}
}
