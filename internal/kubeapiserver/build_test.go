package kubeapiserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule writes files (path -> content) under a new directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuildFailures: a build whose modules cannot be had is
// ErrUnavailable (the tests skip), a build that does not compile is not
// (it says what failed); neither leaves a binary.
func TestBuildFailures(t *testing.T) {
	t.Run("modules unavailable", func(t *testing.T) {
		src := writeModule(t, map[string]string{
			"go.mod": "module example.com/wrapper\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v1.37.2\n",
		})
		t.Setenv("GOPROXY", "off")
		t.Setenv("GOFLAGS", "-mod=mod")
		t.Setenv("GOMODCACHE", t.TempDir())
		out := filepath.Join(t.TempDir(), "kube-apiserver")
		err := goBuild(src, "v1.37.2", out)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "GOPROXY=off") {
			t.Fatalf("build without the modules: %v, want ErrUnavailable saying why", err)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("a binary was left: %v", serr)
		}
	})
	t.Run("compile error", func(t *testing.T) {
		// A module standing for k8s.io/kubernetes whose kube-apiserver
		// does not compile: everything resolves, the build fails.
		src := writeModule(t, map[string]string{
			"go.mod":                     "module k8s.io/kubernetes\n\ngo 1.26.0\n",
			"cmd/kube-apiserver/main.go": "package main\n\nfunc main() { var x int = \"not an int\" }\n",
		})
		out := filepath.Join(t.TempDir(), "kube-apiserver")
		err := goBuild(src, "v1.37.2", out)
		if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not an int") {
			t.Fatalf("build of code that does not compile: %v, want a build error with the compiler's message", err)
		}
	})
}

// TestVersionAndFlags: the version comes from the wrapper's go.mod and
// the ldflags set what /version reports in both version packages.
func TestVersionAndFlags(t *testing.T) {
	src, err := sourceDir()
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := version(goMod)
	if err != nil || !strings.HasPrefix(v, "v1.") {
		t.Fatalf("version of tools/kube-apiserver: %q, %v", v, err)
	}
	if _, err := version([]byte("module x\n")); err == nil {
		t.Error("a go.mod without k8s.io/kubernetes has a version")
	}
	flags := LDFlags("v1.37.2")
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.37.2",
		"-X k8s.io/component-base/version.gitMinor=37",
		"-X k8s.io/client-go/pkg/version.gitMajor=1",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("ldflags %q lack %q", flags, want)
		}
	}
}
