package eventsdtest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKubectlKey: the key changes with tools/kubectl's go.sum.
func TestKubectlKey(t *testing.T) {
	src := t.TempDir()
	for _, name := range kubectlSources {
		if err := os.WriteFile(filepath.Join(src, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k1, err := kubectlKey(src)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := kubectlKey(src); k != k1 {
		t.Errorf("key not stable: %s, %s", k1, k)
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), []byte("k8s.io/kubectl v0.38.0 h1:..."), 0o644); err != nil {
		t.Fatal(err)
	}
	if k2, _ := kubectlKey(src); k2 == k1 {
		t.Error("key unchanged after go.sum changed")
	}
	if _, err := kubectlKey(t.TempDir()); err == nil {
		t.Error("key of a directory without the sources")
	}
	if _, err := kubectlKey(filepath.Join(repoRoot(), "tools", "kubectl")); err != nil {
		t.Errorf("key of tools/kubectl: %v", err)
	}
}
