package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// TestMain finds (or builds) kubectl and builds eventsd before any test
// starts, so that no test's own time limit is spent building them.
func TestMain(m *testing.M) {
	if err := eventsdtest.Prepare(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
