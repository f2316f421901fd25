// Package workflows_test lints the GitHub Actions workflows under
// .github/workflows, which cannot run here, with actionlint (the version
// tools/actionlint pins, built once into the user cache directory by
// internal/actionlintbin): their syntax, expressions, contexts, action
// inputs and, when shellcheck is on PATH (.ci/run installs it), the
// shell of their run steps.
package workflows_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/actionlintbin"
)

// repo is the repository root.
func repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// actionlint runs actionlint on the workflow files from dir, returning
// its output and whether it found nothing.
func actionlint(t *testing.T, dir string, files ...string) (string, bool) {
	t.Helper()
	bin, err := actionlintbin.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-no-color", "-oneline"}, files...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		// 1: findings; anything else is a failure to run.
		return string(out), false
	}
	if err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
	return string(out), true
}

// TestWorkflows: every workflow lints clean, and both the CI and the
// release workflow are there.
func TestWorkflows(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repo(), ".github", "workflows", "*.y*ml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if strings.Join(names, " ") != "ci.yml release.yml" {
		t.Errorf("the workflows are %v, want ci.yml and release.yml", names)
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("shellcheck is not on PATH (apt-get install shellcheck; .ci/run installs it): the run steps' shell is not checked")
	}
	if out, ok := actionlint(t, repo(), files...); !ok {
		t.Errorf("actionlint found problems in .github/workflows:\n%s", out)
	}
}

// TestActionlintFinds: a workflow with an unknown context and a missing
// runs-on gets findings, so a clean result above means something.
func TestActionlintFinds(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte(`on: push
jobs:
  build:
    steps:
      - run: echo "${{ github.no_such_field }}"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := actionlint(t, dir, bad)
	if ok || !strings.Contains(out, "runs-on") || !strings.Contains(out, "no_such_field") {
		t.Errorf("actionlint on a broken workflow: clean %v, output:\n%s", ok, out)
	}
}
