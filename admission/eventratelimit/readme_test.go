package eventratelimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsExample: the example configuration in
// docs/folding-and-rate-limits.md loads, with the four limit types.
func TestDocsExample(t *testing.T) {
	const page = "docs/folding-and-rate-limits.md"
	readme, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	// The example is the file the section's first block writes
	// (cat >admission.yaml <<'EOF' ... EOF), which test/readme runs.
	const section, heredoc = "## Event rate limits", "cat >admission.yaml <<'EOF'\n"
	_, rest, ok := strings.Cut(string(readme), section)
	if ok {
		_, rest, ok = strings.Cut(rest, heredoc)
	}
	example, _, closed := strings.Cut(rest, "\nEOF\n")
	if !ok || !closed {
		t.Fatalf("%s has no admission.yaml written under %q", page, section)
	}
	p := filepath.Join(t.TempDir(), "admission.yaml")
	if err := os.WriteFile(p, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := LoadAdmissionConfigFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Limits) != len(limitTypes) {
		t.Errorf("the example has %d limits, want one of each of the %d types", len(c.Limits), len(limitTypes))
	}
	if _, err := New(c, Options{}); err != nil {
		t.Fatal(err)
	}
}
