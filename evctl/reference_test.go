package evctl

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/kubevents/kubevents/internal/refdoc"
)

// TestReferenceDoc: docs/reference/evctl.md lists every command and flag
// of evctl as the code has them now (-update rewrites it).
func TestReferenceDoc(t *testing.T) {
	const regenerate = "go test ./evctl -run TestReferenceDoc -update"
	page := refdoc.Commands(NewCommand(io.Discard, io.Discard), regenerate)
	refdoc.Check(t, filepath.Join("..", "docs", "reference", "evctl.md"), page, *update, regenerate)
}
