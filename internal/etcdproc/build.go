package etcdproc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/kubevents/kubevents/internal/buildcache"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// serverModule is the module whose main package is the etcd server, at
// the version go.mod requires.
const serverModule = "go.etcd.io/etcd/server/v3"

// buildPrefix starts the name of each cached build's directory, followed
// by its key.
const buildPrefix = "etcd-"

// ErrNoModule is Binary's error when go cannot find the etcd server
// module without a download (it is not in the module cache), so that it
// cannot be built.
var ErrNoModule = errors.New("the etcd server module is not available")

// binary is the outcome of the one build of a test binary.
type binary struct {
	once sync.Once
	path string
	err  error
}

// built is the test binary's build of etcd: per process, as eventsdtest's
// build of eventsd is.
var built binary

// Binary returns the path of an etcd server binary built from go.mod's
// go.etcd.io/etcd/server/v3, building it once per test binary into the
// user's cache directory when no build of that version and toolchain is
// there yet. When the module is not in the module cache the error wraps
// ErrNoModule and says how to fetch it.
func Binary() (string, error) {
	built.once.Do(func() { built.path, built.err = buildCached() })
	return built.path, built.err
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// moduleInfo is the version go.mod requires of serverModule and its
// directory in the module cache ("" when it is not there).
func moduleInfo() (version, dir string, err error) {
	cmd := exec.Command(buildcache.GoTool(), "list", "-m", "-f", "{{.Version}} {{.Dir}}", serverModule)
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", "", fmt.Errorf("go list -m %s: %w\n%s", serverModule, err, ee.Stderr)
		}
		return "", "", fmt.Errorf("go list -m %s: %w", serverModule, err)
	}
	version, dir, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return version, dir, nil
}

// cacheKey identifies a build: the etcd version and the toolchain and
// platform that build it.
func cacheKey(version string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s %s %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)))
	return version + "-" + hex.EncodeToString(h[:])[:12]
}

func buildCached() (string, error) {
	version, dir, err := moduleInfo()
	if err != nil {
		// go cannot resolve the module without a download it may not
		// make (an empty module cache, GOPROXY=off, GOFLAGS=-mod=vendor).
		return "", fmt.Errorf("etcdproc: %w: %w", ErrNoModule, err)
	}
	return buildcache.Get(buildcache.Root(), buildPrefix, cacheKey(version), "etcd", func(out string) error {
		if dir == "" {
			return fmt.Errorf("etcdproc: %s %s: %w: it is not in the module cache (go mod download %s fetches it)", serverModule, version, ErrNoModule, serverModule)
		}
		cmd := exec.Command(buildcache.GoTool(), "build", "-o", out, serverModule)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("etcdproc: go build %s %s: %w\n%s", serverModule, version, err, out)
		}
		return nil
	})
}
