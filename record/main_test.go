package record

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// test shuts its broadcasters down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
