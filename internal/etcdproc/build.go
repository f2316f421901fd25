package etcdproc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// serverModule is the module whose main package is the etcd server, at
// the version go.mod requires.
const serverModule = "go.etcd.io/etcd/server/v3"

// buildPrefix starts the name of each cached build's directory, followed
// by its key.
const buildPrefix = "etcd-"

// ErrNoModule is Binary's and Fetch's error when the go command can
// neither find the etcd server module in the module cache nor download it
// (no network, GOPROXY=off, GOFLAGS=-mod=vendor), so that etcd cannot be
// built.
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
// there yet. A module missing from the module cache is downloaded first
// (Fetch); when it cannot be, the error wraps ErrNoModule.
func Binary() (string, error) {
	built.once.Do(func() { built.path, built.err = buildCached() })
	return built.path, built.err
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Fetch makes sure the etcd server module go.mod requires is in the
// module cache, downloading it through the go command (GOPROXY, checked
// against go.sum) when it is not: a clone that has only built what it
// imports (go run ./cmd/devcluster) has the etcd client modules but not
// the server's. It takes a second when the module is there and is what a
// caller that builds more (devcluster, before kube-apiserver's minutes)
// runs first, so that a module that cannot be had fails at once. The
// error wraps ErrNoModule when the module can be neither found nor
// downloaded.
func Fetch() error {
	_, _, err := resolveModule(repoRoot(), nil)
	return err
}

// goModule is what go list -m and go mod download -json say of a module.
type goModule struct {
	Version string
	Dir     string
	Error   any // a string from go mod download, an object from go list
}

// resolveModule returns the version of serverModule that the go.mod in
// root requires and its directory in the module cache, downloading it
// there (go mod download, which fetches through GOPROXY and checks
// go.sum) when it is missing. env, when not nil, is added to the go
// command's environment (GOMODCACHE, GOPROXY in tests).
func resolveModule(root string, env []string) (version, dir string, err error) {
	goCmd := func(args ...string) ([]byte, error) {
		cmd := exec.Command(buildcache.GoTool(), args...)
		cmd.Dir = root
		if env != nil {
			cmd.Env = append(os.Environ(), env...)
		}
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(ee.Stderr))
		} else if err != nil {
			err = fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
		return out, err
	}
	// go list -m needs only go.mod files, never a module's source.
	out, err := goCmd("list", "-m", "-json", serverModule)
	if err != nil {
		return "", "", fmt.Errorf("etcdproc: %w: %w", ErrNoModule, err)
	}
	var m goModule
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", fmt.Errorf("etcdproc: go list -m %s: %w", serverModule, err)
	}
	if m.Dir != "" {
		return m.Version, m.Dir, nil
	}
	out, err = goCmd("mod", "download", "-json", serverModule+"@"+m.Version)
	var d goModule
	if jerr := json.Unmarshal(out, &d); jerr == nil && d.Error != nil {
		err = fmt.Errorf("go mod download %s@%s: %v", serverModule, m.Version, d.Error)
	}
	if err != nil {
		return "", "", fmt.Errorf("etcdproc: %s %s is not in the module cache and cannot be downloaded: %w: %w", serverModule, m.Version, ErrNoModule, err)
	}
	if d.Dir == "" {
		return "", "", fmt.Errorf("etcdproc: go mod download %s@%s named no directory: %w", serverModule, m.Version, ErrNoModule)
	}
	return m.Version, d.Dir, nil
}

// cacheKey identifies a build: the etcd version and the toolchain and
// platform that build it.
func cacheKey(version string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s %s %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)))
	return version + "-" + hex.EncodeToString(h[:])[:12]
}

func buildCached() (string, error) {
	version, _, err := resolveModule(repoRoot(), nil)
	if err != nil {
		return "", err
	}
	return buildcache.Get(buildcache.Root(), buildPrefix, cacheKey(version), "etcd", func(out string) error {
		// The modules the server imports are downloaded by go build as
		// it needs them (go.sum pins them).
		cmd := exec.Command(buildcache.GoTool(), "build", "-o", out, serverModule)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("etcdproc: go build %s %s: %w\n%s", serverModule, version, err, out)
		}
		return nil
	})
}
