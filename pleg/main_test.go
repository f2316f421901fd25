package pleg

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventually polls cond until it holds, failing the test after a while.
// It waits for goroutines to catch up, never for time-dependent logic:
// that runs on fake clocks.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", fmt.Sprintf(format, args...))
		}
		time.Sleep(time.Millisecond)
	}
}
