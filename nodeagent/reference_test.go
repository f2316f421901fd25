package nodeagent

import (
	"flag"
	"io"
	"path/filepath"
	"testing"

	"github.com/kubevents/kubevents/internal/refdoc"
)

var update = flag.Bool("update", false, "rewrite docs/reference/nodeagent.md from the code")

// TestReferenceDoc: docs/reference/nodeagent.md lists every flag of
// nodeagent as the code has them now (-update rewrites it).
func TestReferenceDoc(t *testing.T) {
	const regenerate = "go test ./nodeagent -run TestReferenceDoc -update"
	page := refdoc.Commands(NewCommand(io.Discard), regenerate)
	refdoc.Check(t, filepath.Join("..", "docs", "reference", "nodeagent.md"), page, *update, regenerate)
}
