package etcdproc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// TestResolveModuleDownloads: with the etcd server module missing from
// the module cache (a new, empty GOMODCACHE), resolving it downloads it
// through the module proxy, checked against go.sum, instead of failing
// "not in the module cache"; a second resolution finds it there. The
// proxy is this machine's module cache's download directory when it holds
// the module (GOPROXY=file://..., fast and offline), else the configured
// proxy.
func TestResolveModuleDownloads(t *testing.T) {
	out, err := exec.Command(buildcache.GoTool(), "env", "GOMODCACHE", "GOPROXY", "GOFLAGS").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("go env: %q", out)
	}
	version, _, err := resolveModule(repoRoot(), nil)
	if err != nil {
		t.Fatalf("resolving %s in this machine's module cache: %v", serverModule, err)
	}
	proxy := lines[1]
	downloads := filepath.Join(lines[0], "cache", "download")
	if _, err := os.Stat(filepath.Join(downloads, serverModule, "@v", version+".zip")); err == nil {
		proxy = "file://" + filepath.ToSlash(downloads)
	}
	cache := t.TempDir()
	env := []string{"GOMODCACHE=" + cache, "GOPROXY=" + proxy, "GOFLAGS=" + lines[2] + " -modcacherw"}
	v, dir, err := resolveModule(repoRoot(), env)
	if err != nil {
		t.Fatalf("resolving %s with an empty module cache (GOPROXY=%s): %v", serverModule, proxy, err)
	}
	if v != version || !strings.HasPrefix(dir, cache+string(filepath.Separator)) {
		t.Errorf("resolved %s %s in %s; want %s in %s", serverModule, v, dir, version, cache)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcdmain")); err != nil {
		t.Errorf("the downloaded module has no etcdmain package: %v", err)
	}
	// Found, not downloaded again: with the proxy off it still resolves.
	off := []string{"GOMODCACHE=" + cache, "GOPROXY=off", "GOFLAGS=" + lines[2] + " -modcacherw"}
	if _, again, err := resolveModule(repoRoot(), off); err != nil || again != dir {
		t.Errorf("resolving again from the module cache: %s, %v; want %s", again, err, dir)
	}
	// Neither in the cache nor downloadable: ErrNoModule, saying why.
	_, _, err = resolveModule(repoRoot(), []string{"GOMODCACHE=" + t.TempDir(), "GOPROXY=off", "GOFLAGS=" + lines[2] + " -modcacherw"})
	if !errors.Is(err, ErrNoModule) || !strings.Contains(err.Error(), "GOPROXY=off") {
		t.Errorf("with an empty module cache and GOPROXY=off: %v; want ErrNoModule saying GOPROXY=off", err)
	}
}
