package kubeapiserver

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// mainPackage is upstream's kube-apiserver command, built unchanged.
const mainPackage = "k8s.io/kubernetes/cmd/kube-apiserver"

// kubernetesModule is the module whose version the wrapper module pins.
const kubernetesModule = "k8s.io/kubernetes"

// buildPrefix starts the name of each cached build's directory, followed
// by its key.
const buildPrefix = "kube-apiserver-"

// moduleDir is tools/kube-apiserver relative to the repository root.
var moduleDir = filepath.Join("tools", "kube-apiserver")

// moduleSources are the files of tools/kube-apiserver a build depends on:
// go.sum pins every module the build reads.
var moduleSources = []string{"go.mod", "go.sum"}

// ErrUnavailable is Binary's error when the modules kube-apiserver is
// built from cannot be had (not in the module cache, and the Go toolchain
// cannot download them: no network, GOPROXY=off, GOFLAGS=-mod=vendor...),
// or the wrapper module's sources are not on this machine. Tests skip on
// it; any other build failure is a defect of the wrapper module.
var ErrUnavailable = errors.New("kube-apiserver cannot be built here")

// Build is one build of kube-apiserver.
type Build struct {
	// Path is the binary, in the build cache.
	Path string
	// Version is the Kubernetes version built (k8s.io/kubernetes'
	// version in tools/kube-apiserver/go.mod), which /version reports.
	Version string
}

// built is the test binary's build: per process, as etcdproc's is.
var built struct {
	once  sync.Once
	build Build
	err   error
}

// Binary returns kube-apiserver built from tools/kube-apiserver (the
// repository's source found from this file, else from the working
// directory up), building it when no build of those sources and this Go
// toolchain is in the user cache directory yet (buildcache: one build at a
// time across processes, older builds removed). The first build takes
// minutes; later ones none. The error wraps ErrUnavailable when the
// sources or the modules cannot be had.
func Binary() (Build, error) {
	built.once.Do(func() {
		built.build, built.err = buildCached()
	})
	return built.build, built.err
}

// sourceDir finds tools/kube-apiserver: beside this file's package in
// the repository (go test, go run), else in the working directory or one
// above it (a binary built with -trimpath, run from a clone).
func sourceDir() (string, error) {
	dir, err := buildcache.ModuleDir(moduleDir)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return dir, nil
}

// version is the version of k8s.io/kubernetes that go.mod requires.
func version(goMod []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == kubernetesModule {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no requirement of %s in %s/go.mod", kubernetesModule, filepath.ToSlash(moduleDir))
}

// LDFlags are the linker flags of a Kubernetes component built at
// version: they set what /version reports, as Kubernetes' release builds do
// (hack/lib/version.sh); -s -w leave out the symbol tables.
func LDFlags(version string) string {
	major, rest, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	flags := []string{"-s", "-w"}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+version,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean",
		)
	}
	return strings.Join(flags, " ")
}

// cacheKey identifies a build: the wrapper module's sources (go.mod and
// go.sum pin every module), the flags and the toolchain and platform.
func cacheKey(src, version string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, LDFlags(version))
	for _, name := range moduleSources {
		f, err := os.Open(filepath.Join(src, name))
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return version + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// located is where a build of tools/kube-apiserver is, or would be, in
// the build cache.
type located struct {
	src, version, key string
}

// path is the cached binary's path.
func (l located) path() string {
	return filepath.Join(buildcache.Root(), buildPrefix+l.key, "kube-apiserver")
}

// locate finds tools/kube-apiserver and its build's cache key.
func locate() (located, error) {
	src, err := sourceDir()
	if err != nil {
		return located{}, err
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return located{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	v, err := version(goMod)
	if err != nil {
		return located{}, err
	}
	key, err := cacheKey(src, v)
	if err != nil {
		return located{}, err
	}
	return located{src: src, version: v, key: key}, nil
}

// Cached reports whether Binary has a build to return without building:
// the version tools/kube-apiserver pins, and whether it is built.
func Cached() (version string, ok bool) {
	l, err := locate()
	if err != nil {
		return "", false
	}
	fi, err := os.Stat(l.path())
	return l.version, err == nil && fi.Mode().IsRegular()
}

func buildCached() (Build, error) {
	l, err := locate()
	if err != nil {
		return Build{}, err
	}
	path, err := buildcache.Get(buildcache.Root(), buildPrefix, l.key, "kube-apiserver", func(out string) error {
		return goBuild(l.src, l.version, out)
	})
	if err != nil {
		return Build{}, err
	}
	return Build{Path: path, Version: l.version}, nil
}

// goBuild builds kube-apiserver from the module in src into out: first
// every package it needs is resolved (downloading modules missing from the
// module cache), so that a failure to get the modules (ErrUnavailable)
// is told apart from a failure to compile them.
func goBuild(src, version, out string) error {
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(buildcache.GoTool(), args...)
		cmd.Dir = src
		// Like Kubernetes' release builds; and no C compiler needed.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.CombinedOutput()
	}
	if b, err := run("list", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", mainPackage); err != nil {
		return fmt.Errorf("%w: the modules %s %s needs cannot be had (go list -deps in %s: %w):\n%s", ErrUnavailable, mainPackage, version, src, err, buildcache.LastLines(b, 30))
	}
	if b, err := run("build", "-trimpath", "-ldflags", LDFlags(version), "-o", out, mainPackage); err != nil {
		return fmt.Errorf("kubeapiserver: go build %s %s in %s: %w\n%s", mainPackage, version, src, err, buildcache.LastLines(b, 60))
	}
	return nil
}
