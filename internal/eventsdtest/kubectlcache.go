package eventsdtest

import (
	"crypto/sha256"
	"encoding/hex"

	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// kubectlCacheSubdir is where, under the user's cache directory, kubectl
// built from tools/kubectl is kept: one build (about 100 MB) reused by
// every test run until tools/kubectl or the Go toolchain changes, instead
// of one left in the temporary directory by every run.
const kubectlCacheSubdir = "kubevents"

// kubectlBuildPrefix starts the name of each cached build's directory,
// followed by its key.
const kubectlBuildPrefix = "kubectl-"

// kubectlSources are the files of tools/kubectl a build depends on.
var kubectlSources = []string{"go.mod", "go.sum", "main.go"}

// kubectlCacheRoot is the directory cached kubectl builds go in: the
// user's cache directory (os.UserCacheDir), or the temporary directory
// when there is none; the same on every run either way.
func kubectlCacheRoot() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, kubectlCacheSubdir)
}

// kubectlKey identifies a build of the module in srcDir: the hash of its
// sources (go.sum pins every dependency) and of the toolchain and
// platform that build it.
func kubectlKey(srcDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range kubectlSources {
		f, err := os.Open(filepath.Join(srcDir, name))
		if err != nil {
			return "", fmt.Errorf("hashing the kubectl module: %w", err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hashing the kubectl module: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// cachedBuild returns the binary cached under root for key, calling build
// to make it (build writes the binary to the path it is given) when there
// is none yet. The binary is put in place by a rename, so concurrent test
// binaries never run a half-written one; builds cached under other keys
// (older sources or toolchains) are removed once the new one is in place.
func cachedBuild(root, key, name string, build func(out string) error) (string, error) {
	dir := filepath.Join(root, kubectlBuildPrefix+key)
	bin := filepath.Join(dir, name)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o100 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kubectl cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".building-")
	if err != nil {
		return "", fmt.Errorf("kubectl cache: %w", err)
	}
	tmp.Close()
	if err := build(tmp.Name()); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("kubectl cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("kubectl cache: %w", err)
	}
	removeOtherBuilds(root, filepath.Base(dir))
	return bin, nil
}

// removeOtherBuilds removes the cached builds in root but keep. Failures
// only leave disk space used: they are ignored.
func removeOtherBuilds(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), kubectlBuildPrefix) && e.Name() != keep {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
