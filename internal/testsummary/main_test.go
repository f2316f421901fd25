package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// files of a throwaway module whose tests pass, fail, skip in every way
// (t.Skip, t.Skipf in a subtest, t.SkipNow without a reason, after a
// t.Log, in parallel), and which has a package without tests and one that
// does not build.
var files = map[string]string{
	"go.mod": "module example.com/m\n\ngo 1.22\n",
	"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) { t.Log("passing-log-marker") }

func TestSkip(t *testing.T) { t.Skip("no widget on PATH: install one") }

func TestSub(t *testing.T) {
	t.Run("runs", func(t *testing.T) {})
	t.Run("skipped", func(t *testing.T) { t.Skipf("needs %s", "root") })
}

func TestSkipNow(t *testing.T) { t.SkipNow() }

func TestLogThenSkip(t *testing.T) {
	t.Log("looked for the socket")
	t.Skip("socket absent")
}

func TestParallel(t *testing.T) {
	for _, n := range []string{"p1", "p2", "p3"} {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			t.Skip("parallel skip " + n)
		})
	}
}
`,
	"b/b_test.go": `package b

import "testing"

func TestFail(t *testing.T) { t.Error("failure-marker") }

func TestQuiet(t *testing.T) { t.Log("quiet-marker") }
`,
	"c/c.go": "package c\n",
	"d/d_test.go": `package d

import "testing"

func TestBroken(t *testing.T) { undefinedName() }
`,
}

// goTestJSON runs go test -json on pkgs of the throwaway module, as
// .ci/run runs it on this one, and returns its output.
func goTestJSON(t *testing.T, pkgs ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(buildcache.GoTool(), append([]string{"test", "-json", "-count=1"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("go test %v: %v\n%s", pkgs, err, stderr.Bytes())
	return out
}

func run(t *testing.T, input []byte) (*summary, string) {
	t.Helper()
	var out bytes.Buffer
	s := newSummary(&out)
	if err := s.read(bytes.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	s.report()
	return s, out.String()
}

var skipLineRE = regexp.MustCompile(`(?m)^SKIP (\S+) (\S+)$`)

// TestSummary: on real go test -json output, every skipped test is listed
// once with its reason, failures and build errors are printed, passing
// tests' logs are not, and the totals and the exit decision follow.
func TestSummary(t *testing.T) {
	s, out := run(t, goTestJSON(t, "./..."))
	t.Logf("summary:\n%s", out)

	var listed []string
	for _, m := range skipLineRE.FindAllStringSubmatch(out, -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	want := []string{"TestLogThenSkip", "TestParallel/p1", "TestParallel/p2", "TestParallel/p3", "TestSkip", "TestSkipNow", "TestSub/skipped"}
	for i := range want {
		want[i] = "example.com/m/a " + want[i]
	}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(listed))); diff != "" {
		t.Errorf("skipped tests listed (-want +got):\n%s", diff)
	}
	reasons := map[string][]string{}
	for _, sk := range s.skips {
		reasons[sk.test] = sk.reason
	}
	for test, want := range map[string]string{
		"TestSkip":        `^a_test.go:\d+: no widget on PATH: install one$`,
		"TestSub/skipped": `^a_test.go:\d+: needs root$`,
		"TestParallel/p2": `^a_test.go:\d+: parallel skip p2$`,
	} {
		if r := reasons[test]; len(r) != 1 || !regexp.MustCompile(want).MatchString(r[0]) {
			t.Errorf("reason of %s = %q, want one line matching %s", test, r, want)
		}
	}
	if r := reasons["TestLogThenSkip"]; len(r) != 2 || !strings.HasSuffix(r[0], "looked for the socket") || !strings.HasSuffix(r[1], "socket absent") {
		t.Errorf("reason of TestLogThenSkip = %q, want its log line and its skip message", r)
	}
	if r := reasons["TestSkipNow"]; len(r) != 0 {
		t.Errorf("reason of TestSkipNow = %q, want none", r)
	}
	if !strings.Contains(out, "SKIP example.com/m/a TestSkipNow\n    (no reason given)\n") {
		t.Error("a skip without a reason is not shown as such")
	}

	for _, must := range []string{
		"failure-marker",        // a failed test's output
		"--- FAIL: TestFail",    // and its result line
		"FAIL\texample.com/m/b", // a failed package
		"ok  \texample.com/m/a", // a passed one
		"undefinedName",         // the build error
	} {
		if !strings.Contains(out, must) {
			t.Errorf("summary lacks %q", must)
		}
	}
	for _, mustNot := range []string{"passing-log-marker", "quiet-marker", "=== RUN"} {
		if strings.Contains(out, mustNot) {
			t.Errorf("summary has %q, which go test without -v does not print", mustNot)
		}
	}

	// a: TestPass, TestSub, TestSub/runs, TestParallel; b: TestQuiet.
	if s.passed != 5 || s.failedTests != 1 || s.skipped != 7 {
		t.Errorf("passed, failed, skipped = %d, %d, %d, want 5, 1, 7", s.passed, s.failedTests, s.skipped)
	}
	if s.failedBuilds != 1 || s.noTests != 1 {
		t.Errorf("failed builds, packages without tests = %d, %d, want 1, 1", s.failedBuilds, s.noTests)
	}
	if !s.failed() {
		t.Error("a failed test and a failed build do not fail the summary")
	}
}

// TestSummaryPassing: a run where tests only pass or skip does not fail,
// and input that is not a test event is passed through.
func TestSummaryPassing(t *testing.T) {
	input := append([]byte("not an event\n"), goTestJSON(t, "./a", "./c")...)
	s, out := run(t, input)
	if s.failed() {
		t.Errorf("summary of a passing run fails:\n%s", out)
	}
	if !strings.HasPrefix(out, "not an event\n") {
		t.Errorf("a line that is not an event is not printed as it is:\n%s", out)
	}
	if got := len(skipLineRE.FindAllString(out, -1)); got != 7 {
		t.Errorf("%d skips listed, want 7:\n%s", got, out)
	}
}
