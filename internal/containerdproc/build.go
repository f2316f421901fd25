package containerdproc

import (
	"bufio"
	"bytes"
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

	"github.com/kubevents/kubevents/internal/buildcache"
)

// containerdModule is the module whose version tools/containerd pins.
const containerdModule = "github.com/containerd/containerd/v2"

// buildPrefix starts the name of each cached build's directory.
const buildPrefix = "containerd-"

// buildTags leave out the snapshotters that need cgo or host tools.
const buildTags = "no_btrfs no_devmapper no_zfs"

// commands are the binaries built, by name, from their main packages in
// tools/containerd. containerd comes last: buildcache renames it into
// place once the others are there, so its presence means a whole build.
var commands = []struct{ name, pkg string }{
	{"containerd-shim-runc-v2", containerdModule + "/cmd/containerd-shim-runc-v2"},
	{"ctr", containerdModule + "/cmd/ctr"},
	{"crictl", "sigs.k8s.io/cri-tools/cmd/crictl"},
	{"containerd", containerdModule + "/cmd/containerd"},
}

// moduleDir is tools/containerd relative to the repository root.
var moduleDir = filepath.Join("tools", "containerd")

// ErrUnavailable is Build's error when the sources or modules containerd
// is built from cannot be had here (no tools/containerd, no module
// download possible). Tests skip on it.
var ErrUnavailable = errors.New("containerd cannot be built here")

// Binaries is one build of tools/containerd, all in one directory.
type Binaries struct {
	// Dir holds containerd, containerd-shim-runc-v2, ctr and crictl.
	Dir string
	// Version is containerd's module version (tools/containerd/go.mod).
	Version string
}

// Containerd is the containerd daemon.
func (b Binaries) Containerd() string { return filepath.Join(b.Dir, "containerd") }

// Ctr is containerd's own client.
func (b Binaries) Ctr() string { return filepath.Join(b.Dir, "ctr") }

// Crictl is cri-tools' CRI client.
func (b Binaries) Crictl() string { return filepath.Join(b.Dir, "crictl") }

var built struct {
	once sync.Once
	bin  Binaries
	err  error
}

// Build returns the build of tools/containerd in the user cache directory
// (buildcache: one build per sources and toolchain, one builder at a time
// across processes), building it first when there is none: a first build
// takes minutes (`go run ./cmd/devcontainerd --build-only` does it
// ahead of the tests in .ci/run). Once per process.
func Build() (Binaries, error) {
	built.once.Do(func() { built.bin, built.err = buildCached() })
	return built.bin, built.err
}

// Cached reports whether Build would return without building.
func Cached() bool {
	_, version, key, err := locate()
	if err != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(buildcache.Root(), buildPrefix+version+"-"+key, "containerd"))
	return err == nil && fi.Mode().IsRegular()
}

// sourceDir finds tools/containerd from this file's package, else from
// the working directory up.
func sourceDir() (string, error) {
	dir, err := buildcache.ModuleDir(moduleDir)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return dir, nil
}

// locate finds the sources, containerd's version and the build's key: the
// toolchain, platform, tags and tools/containerd's go.mod and go.sum.
func locate() (src, version, key string, err error) {
	if src, err = sourceDir(); err != nil {
		return "", "", "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, buildTags)
	for _, c := range commands {
		fmt.Fprintln(h, c.name, c.pkg)
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", "", "", fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		h.Write(b)
		if name == "go.mod" {
			if version, err = moduleVersion(b); err != nil {
				return "", "", "", err
			}
		}
	}
	return src, version, hex.EncodeToString(h.Sum(nil))[:12], nil
}

// moduleVersion is the version of containerdModule go.mod requires.
func moduleVersion(goMod []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == containerdModule {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no requirement of %s in %s/go.mod", containerdModule, filepath.ToSlash(moduleDir))
}

func buildCached() (Binaries, error) {
	src, version, key, err := locate()
	if err != nil {
		return Binaries{}, err
	}
	path, err := buildcache.Get(buildcache.Root(), buildPrefix, version+"-"+key, "containerd", func(out string) error {
		return goBuild(src, version, filepath.Dir(out), out)
	})
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Dir: filepath.Dir(path), Version: version}, nil
}

// goBuild builds the commands from src: every one but containerd into
// dir, containerd to out. First the packages are resolved (downloading
// what the module cache lacks), so that modules that cannot be had
// (ErrUnavailable) are told apart from a failure to compile them.
func goBuild(src, version, dir, out string) error {
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(buildcache.GoTool(), args...)
		cmd.Dir = src
		// Static binaries, as containerd's releases; no C compiler needed.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.CombinedOutput()
	}
	pkgs := make([]string, len(commands))
	for i, c := range commands {
		pkgs[i] = c.pkg
	}
	args := append([]string{"list", "-tags", buildTags, "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}"}, pkgs...)
	if b, err := run(args...); err != nil {
		return fmt.Errorf("%w: the modules cannot be had (go list -deps in %s: %w):\n%s", ErrUnavailable, src, err, lastLines(b, 30))
	}
	for _, c := range commands {
		dst := filepath.Join(dir, c.name)
		if c.name == "containerd" {
			dst = out
		}
		if b, err := run("build", "-trimpath", "-tags", buildTags, "-ldflags", "-s -w -X "+containerdModule+"/version.Version="+version, "-o", dst, c.pkg); err != nil {
			return fmt.Errorf("containerdproc: go build %s in %s: %w\n%s", c.pkg, src, err, lastLines(b, 60))
		}
	}
	return nil
}

// lastLines is the last n lines of b.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
