package buildcache

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBuild writes an executable standing for a build and counts builds.
func fakeBuild(n *atomic.Int32, content string) func(string) error {
	return func(out string) error {
		n.Add(1)
		return os.WriteFile(out, []byte(content), 0o755)
	}
}

// TestCachedBuildReused: the first run builds into the cache, later runs
// reuse the build; a new key builds again and removes the old build; a
// failed build leaves nothing behind.
func TestCachedBuildReused(t *testing.T) {
	root := t.TempDir()
	var builds atomic.Int32
	bin, err := Get(root, "kubectl-", "aaaa", "kubectl", fakeBuild(&builds, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if bin != filepath.Join(root, "kubectl-aaaa", "kubectl") {
		t.Errorf("built at %s", bin)
	}
	again, err := Get(root, "kubectl-", "aaaa", "kubectl", fakeBuild(&builds, "v1"))
	if err != nil || again != bin || builds.Load() != 1 {
		t.Fatalf("second run: %s, %v, %d builds; want the first build reused", again, err, builds.Load())
	}

	newer, err := Get(root, "kubectl-", "bbbb", "kubectl", fakeBuild(&builds, "v2"))
	if err != nil || builds.Load() != 2 {
		t.Fatalf("new key: %v, %d builds", err, builds.Load())
	}
	if b, _ := os.ReadFile(newer); string(b) != "v2" {
		t.Errorf("new build holds %q", b)
	}
	if _, err := os.Stat(filepath.Dir(bin)); !os.IsNotExist(err) {
		t.Errorf("the old build is still there: %v", err)
	}

	boom := errors.New("compile error")
	if _, err := Get(root, "kubectl-", "cccc", "kubectl", func(out string) error {
		os.WriteFile(out, []byte("half"), 0o755)
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failed build: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "kubectl-cccc"))
	if len(entries) != 0 {
		t.Errorf("a failed build left %v", entries)
	}
	if _, err := os.Stat(newer); err != nil {
		t.Errorf("a failed build removed the good one: %v", err)
	}
}

// TestCachedBuildConcurrent: test binaries asking at once each get a
// complete binary, and only one of them builds it (the others wait for
// the lock, each with its own open file as another process would have).
func TestCachedBuildConcurrent(t *testing.T) {
	root := t.TempDir()
	var builds atomic.Int32
	slow := func(out string) error {
		// Long enough for every caller to find no build and reach the
		// lock before the first build is in place.
		time.Sleep(200 * time.Millisecond)
		return fakeBuild(&builds, "complete")(out)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			bin, err := Get(root, "kubectl-", "aaaa", "kubectl", slow)
			if err != nil {
				t.Error(err)
				return
			}
			if b, err := os.ReadFile(bin); err != nil || string(b) != "complete" {
				t.Errorf("read %q, %v", b, err)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "kubectl-aaaa"))
	if len(entries) != 1 {
		t.Errorf("cache holds %d files, want the one binary", len(entries))
	}
}

// TestModuleKey: a module's key is the same for the same files and
// flags, and changes with a file's content or the flags; a missing file
// is an error naming the module.
func TestModuleKey(t *testing.T) {
	src := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("go.sum", "a\n")
	files := []string{"go.mod", "go.sum"}
	key := func(extra string) string {
		t.Helper()
		k, err := ModuleKey(src, files, extra)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 16 {
			t.Fatalf("key %q is not 16 hex digits", k)
		}
		return k
	}
	k1 := key("-s -w")
	if k2 := key("-s -w"); k2 != k1 {
		t.Errorf("the same module gave keys %s and %s", k1, k2)
	}
	if k := key("-s"); k == k1 {
		t.Error("other flags gave the same key")
	}
	write("go.sum", "b\n")
	if k := key("-s -w"); k == k1 {
		t.Error("another go.sum gave the same key")
	}
	if _, err := ModuleKey(src, []string{"go.mod", "missing"}, ""); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want an error wrapping ErrNotExist", err)
	}
}
