// Package readme checks that what README.md tells users to type works: its
// Go snippets compile as they stand, and its go build commands can run at
// the repository root.
package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// root is the module root, found from this file's location.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var fenceRE = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// blocks returns README.md's fenced blocks of language lang.
func blocks(t *testing.T, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range fenceRE.FindAllStringSubmatch(string(b), -1) {
		if m[1] == lang {
			out = append(out, m[2])
		}
	}
	return out
}

// TestGoSnippetsCompile builds every ```go block of README.md as a main
// package inside the module, as a user pasting it into a file would.
func TestGoSnippetsCompile(t *testing.T) {
	snippets := blocks(t, "go")
	if len(snippets) < 2 {
		t.Fatalf("found %d Go snippets in README.md, want the two recorder examples", len(snippets))
	}
	for i, src := range snippets {
		if !strings.HasPrefix(src, "package main\n") {
			t.Errorf("snippet %d is not a complete program (package main with its imports):\n%s", i+1, src)
			continue
		}
		// Inside the module, so that its imports resolve; the leading dot
		// keeps ./... patterns run meanwhile away from it.
		dir, err := os.MkdirTemp(root(), ".readme-snippet-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(buildcache.GoTool(), "build", "-o", os.DevNull, ".")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("snippet %d does not compile: %v\n%s\n%s", i+1, err, out, src)
		}
	}
}

// TestGoBuildCommands: `go build ./cmd/X` at the root fails when a
// directory X exists there (evctl, nodeagent, fakecri do), so every go
// build the README gives names its output.
func TestGoBuildCommands(t *testing.T) {
	n := 0
	for _, b := range blocks(t, "sh") {
		for _, line := range strings.Split(b, "\n") {
			if !strings.Contains(line, "go build") {
				continue
			}
			n++
			if !strings.Contains(line, " -o ") {
				t.Errorf("README: %q builds without -o", line)
			}
		}
	}
	if n == 0 {
		t.Error("README gives no go build command: how do users get the binaries?")
	}
}
