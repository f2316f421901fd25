package etcdproc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// serverModule is the module whose main package is the etcd server, at
// the version go.mod requires.
const serverModule = "go.etcd.io/etcd/server/v3"

// cacheSubdir is where, under the user's cache directory, built etcd
// binaries are kept (beside eventsdtest's kubectl): one build, which
// takes a minute on a cold Go build cache, reused by every test run until
// go.mod's etcd version or the Go toolchain changes.
const cacheSubdir = "kubevents"

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

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// moduleInfo is the version go.mod requires of serverModule and its
// directory in the module cache ("" when it is not there).
func moduleInfo() (version, dir string, err error) {
	cmd := exec.Command(goTool(), "list", "-m", "-f", "{{.Version}} {{.Dir}}", serverModule)
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
	root, err := os.UserCacheDir()
	if err != nil {
		root = os.TempDir()
	}
	root = filepath.Join(root, cacheSubdir)
	bdir := filepath.Join(root, buildPrefix+cacheKey(version))
	bin := filepath.Join(bdir, "etcd")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o100 != 0 {
		return bin, nil
	}
	if dir == "" {
		return "", fmt.Errorf("etcdproc: %s %s: %w: it is not in the module cache (go mod download %s fetches it)", serverModule, version, ErrNoModule, serverModule)
	}
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		return "", fmt.Errorf("etcdproc: cache: %w", err)
	}
	// Built beside its final name and renamed into place, so that test
	// binaries building at once never run a half-written one.
	tmp, err := os.CreateTemp(bdir, "etcd.building-")
	if err != nil {
		return "", fmt.Errorf("etcdproc: cache: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(goTool(), "build", "-o", tmp.Name(), serverModule)
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("etcdproc: go build %s %s: %w\n%s", serverModule, version, err, out)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", fmt.Errorf("etcdproc: cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", fmt.Errorf("etcdproc: cache: %w", err)
	}
	removeOtherBuilds(root, filepath.Base(bdir))
	return bin, nil
}

// removeOtherBuilds removes the cached etcd builds in root but keep.
// Failures only leave disk space used: they are ignored.
func removeOtherBuilds(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), buildPrefix) && e.Name() != keep {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
