package refdoc

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Check compares the committed page at path with got, the page the code
// renders now, and fails t naming regenerate (the command that rewrites
// it) when they differ; with update it writes got to path instead.
func Check(t testing.TB, path string, got []byte, update bool, regenerate string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("refdoc: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("refdoc: %v; create it with `%s`", err, regenerate)
	}
	if bytes.Equal(want, got) {
		return
	}
	line, committed, generated := firstDiff(want, got)
	t.Errorf("%s is not what the code generates (first difference at line %d: committed %q, generated %q); regenerate it with `%s` and commit it",
		path, line, committed, generated, regenerate)
}

// firstDiff returns the first line (1-based) at which a and b differ, and
// both versions of it.
func firstDiff(a, b []byte) (int, string, string) {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || i >= len(la) || i >= len(lb) {
			return i + 1, x, y
		}
	}
}
