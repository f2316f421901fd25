// Package helmbin finds helm for the tests that render and lint the chart
// under deploy/helm: the helm on PATH, or helm built from the
// helm.sh/helm/v4 module that tools/helm pins (its own module, so that
// helm's dependencies stay out of the project's go.mod), kept in the user
// cache directory (buildcache) and reused until tools/helm or the Go
// toolchain changes. A first build takes minutes (see Binary).
package helmbin

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// Env names the environment variable choosing which helm the tests use:
// a path, or "build" to build it from tools/helm even when helm is on
// PATH. Unset: the helm on PATH, else the build.
const Env = "KUBEVENTS_TEST_HELM"

// mainPackage is upstream's helm command, built unchanged.
const mainPackage = "helm.sh/helm/v4/cmd/helm"

// helmModule is the module whose version tools/helm pins.
const helmModule = "helm.sh/helm/v4"

// buildPrefix starts the name of each cached build's directory.
const buildPrefix = "helm-"

// moduleDir is tools/helm relative to the repository root.
var moduleDir = filepath.Join("tools", "helm")

// moduleSources are the files of tools/helm a build depends on.
var moduleSources = []string{"go.mod", "go.sum"}

var found struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the helm to use (see Env), building it on first use. The
// build runs `go build helm.sh/helm/v4/cmd/helm` in tools/helm, with the
// version stamped as helm's release builds do.
func Binary() (string, error) {
	found.once.Do(func() {
		found.path, found.err = find()
	})
	return found.path, found.err
}

func find() (string, error) {
	override := os.Getenv(Env)
	if override != "" && override != "build" {
		return override, nil
	}
	if p, err := exec.LookPath("helm"); err == nil && override == "" {
		return p, nil
	}
	src, err := sourceDir()
	if err != nil {
		return "", err
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("helm: %w", err)
	}
	version, err := Version(goMod)
	if err != nil {
		return "", err
	}
	key, err := cacheKey(src)
	if err != nil {
		return "", err
	}
	return buildcache.Get(buildcache.Root(), buildPrefix, key, "helm", func(out string) error {
		cmd := exec.Command(buildcache.GoTool(), "build", "-trimpath", "-ldflags", ldflags(version), "-o", out, mainPackage)
		cmd.Dir = src
		// As tools/kube-apiserver is built (internal/kubeapiserver), so
		// that the Kubernetes packages both compile are shared in the
		// Go build cache; and no C compiler needed.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("no helm on PATH, and building it from %s failed: %w\n%s", helmModule, err, b)
		}
		return nil
	})
}

// ldflags stamp the version as helm's Makefile does; -s -w leave out the
// symbol tables.
func ldflags(version string) string {
	return "-s -w -X helm.sh/helm/v4/internal/version.version=" + version + " -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
}

// Version is the version of helm.sh/helm/v4 that tools/helm's go.mod
// requires.
func Version(goMod []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == helmModule {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("helm: no requirement of %s in %s/go.mod", helmModule, filepath.ToSlash(moduleDir))
}

// sourceDir finds tools/helm in the repository.
func sourceDir() (string, error) {
	dir, err := buildcache.ModuleDir(moduleDir)
	if err != nil {
		return "", fmt.Errorf("helm: %w", err)
	}
	return dir, nil
}

// cacheKey identifies a build: tools/helm's go.mod and go.sum (which pin
// every module), the flags, the toolchain and the platform.
func cacheKey(src string) (string, error) {
	return buildcache.ModuleKey(src, moduleSources, ldflags(""))
}

// FirstBuildTime is how much of a test binary's time a first build of
// helm may take: about 12 CPU-minutes from an empty Go build cache (6 on
// two idle cores), with room for a loaded machine; far less when the Go
// build cache holds the Kubernetes packages of a kube-apiserver build.
const FirstBuildTime = 15 * time.Minute

// Cached reports whether Binary returns at once: helm is chosen by Env or
// found on PATH, or its build for the current sources and toolchain is in
// the cache.
func Cached() bool {
	override := os.Getenv(Env)
	if override != "" && override != "build" {
		return true
	}
	if _, err := exec.LookPath("helm"); err == nil && override == "" {
		return true
	}
	src, err := sourceDir()
	if err != nil {
		return false
	}
	key, err := cacheKey(src)
	if err != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(buildcache.Root(), buildPrefix+key, "helm"))
	return err == nil && fi.Mode().IsRegular()
}

// ForTest returns helm for a test, building it when it is not built yet
// and the test binary has time left for a first build (FirstBuildTime);
// otherwise the test is skipped, saying how to build it once.
func ForTest(t testing.TB) string {
	t.Helper()
	if !Cached() {
		if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
			if d, ok := dl.Deadline(); ok && time.Until(d) < FirstBuildTime {
				t.Skipf("helm is not built yet, and a first build (up to %v on two cores) does not fit in the %v this test binary has left: build it once with `go run ./internal/helmbin/buildhelm` (.ci/run does), or give go test -timeout 30m",
					FirstBuildTime, time.Until(d).Round(time.Second))
			}
		}
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Run runs helm (ForTest) with args, with caches and configuration in
// the test's temporary directory (none of the user's), and returns its
// stdout; it fails the test on an error, with helm's output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	bin := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}
