package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/kubevents/kubevents/internal/refdoc"
)

var update = flag.Bool("update", false, "rewrite docs/reference/fakecri.md from the code")

// TestReferenceDoc: docs/reference/fakecri.md lists every flag of fakecri
// as the code has them now (-update rewrites it).
func TestReferenceDoc(t *testing.T) {
	const regenerate = "go test ./cmd/fakecri -run TestReferenceDoc -update"
	refdoc.Check(t, filepath.Join("..", "..", "docs", "reference", "fakecri.md"), refdoc.Commands(newCommand(), regenerate), *update, regenerate)
}
