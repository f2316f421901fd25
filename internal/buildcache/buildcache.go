// Package buildcache keeps binaries that tests build from this module's
// dependencies (kubectl from tools/kubectl, the etcd server from go.mod)
// in the user's cache directory, one build per key, so that every test run
// reuses the last build until its sources or the Go toolchain change,
// instead of building again or leaving a copy in the temporary directory
// each time.
package buildcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Subdir is where, under the user's cache directory, the builds are kept.
const Subdir = "kubevents"

// Root is the directory builds are cached in: Subdir under the user's
// cache directory (os.UserCacheDir), or under the temporary directory when
// there is none; the same on every run either way.
func Root() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, Subdir)
}

// ModuleDir finds the repository's directory rel (such as
// tools/kube-apiserver, a module of its own holding a go.mod): beside this
// package's source in the repository (go test, go run), else in the
// working directory or one above it (a binary built with -trimpath, run
// from a clone).
func ModuleDir(rel string) (string, error) {
	var candidates []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", rel))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, rel))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range candidates {
		if fileExists(filepath.Join(c, "go.mod")) {
			return filepath.Clean(c), nil
		}
	}
	return "", fmt.Errorf("no %s/go.mod beside this package's source or above the working directory (run from a clone of the repository)", filepath.ToSlash(rel))
}

// ModuleKey identifies a build of the module in src (a tools/ module
// pinning a tool): the Go toolchain and platform, extra (the build's
// flags) and the content of files (go.mod and go.sum, which pin every
// module), as 16 hex digits.
func ModuleKey(src string, files []string, extra string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, extra)
	for _, name := range files {
		f, err := os.Open(filepath.Join(src, name))
		if err != nil {
			return "", fmt.Errorf("hashing the module in %s: %w", src, err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hashing the module in %s: %w", src, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// GoTool is the go command of the toolchain running the tests.
func GoTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Get returns the binary name cached under root in the directory
// prefix+key, calling build to make it (build writes the binary to the
// path it is given) when there is none yet. The binary is put in place by
// a rename, so concurrent test binaries never run a half-written one; the
// builds cached under other keys with the same prefix (older sources or
// toolchains) are removed once the new one is in place. Processes that
// find no build at once take turns (a file lock, root/prefix+"lock", where
// the platform has one): the first builds, the others wait and then use its
// build, so that test binaries of several packages started together build
// a large binary (kube-apiserver) once, not once each.
func Get(root, prefix, key, name string, build func(out string) error) (string, error) {
	dir := filepath.Join(root, prefix+key)
	bin := filepath.Join(dir, name)
	if isBuilt(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(root, prefix+"lock"))
	if err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	defer unlock()
	if isBuilt(bin) {
		// Built by another process while this one waited.
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".building-")
	if err != nil {
		return "", fmt.Errorf("build cache: %w", err)
	}
	tmp.Close()
	if err := build(tmp.Name()); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("build cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("build cache: %w", err)
	}
	removeOthers(root, prefix, filepath.Base(dir))
	return bin, nil
}

// isBuilt reports whether bin is an executable regular file.
func isBuilt(bin string) bool {
	fi, err := os.Stat(bin)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o100 != 0
}

// removeOthers removes the cached builds in root with prefix but keep.
// Failures only leave disk space used: they are ignored.
func removeOthers(root, prefix, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && e.Name() != keep {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// ModuleTool returns the command mainPackage built unchanged with
// `go build -trimpath` and buildFlags (CGO_ENABLED=0) in the repository's
// module directory moduleDir (such as tools/actionlint, which pins it as
// a tool dependency), cached under Root as name in directories starting
// with prefix and keyed on the module's go.mod and go.sum, the flags and
// the toolchain.
func ModuleTool(moduleDir, mainPackage, prefix, name string, buildFlags ...string) (string, error) {
	src, err := ModuleDir(moduleDir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	flags := append([]string{"-trimpath"}, buildFlags...)
	key, err := ModuleKey(src, []string{"go.mod", "go.sum"}, strings.Join(flags, " "))
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return Get(Root(), prefix, key, name, func(out string) error {
		args := append(append([]string{"build"}, flags...), "-o", out, mainPackage)
		cmd := exec.Command(GoTool(), args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s from %s: %w\n%s", name, filepath.ToSlash(moduleDir), err, b)
		}
		return nil
	})
}
