package containerdproc

import (
	"errors"
	"testing"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// BuildCommand builds and caches containerd ahead of the tests.
const BuildCommand = "go run ./cmd/devcontainerd --build-only"

// StartTest starts a containerd for a test and stops it, with everything
// it made, when the test ends (failing the test if something was left).
// The test skips, saying why, where containerd cannot run (CanRun), and
// where it is not built yet: a first build takes minutes, which a test
// binary does not spend inside go test's timeout (BuildCommand does it,
// as .ci/run does before the tests).
func StartTest(t testing.TB) *Containerd {
	t.Helper()
	if err := CanRun(Options{}); err != nil {
		t.Skipf("real containerd not tested: %v", err)
	}
	if !Cached() {
		t.Skipf("real containerd not tested: containerd is not built yet (a first build takes minutes; %s builds and caches it)", BuildCommand)
	}
	c, err := Start(Options{Logf: t.Logf})
	if c != nil {
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Errorf("stopping containerd: %v", err)
			}
		})
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrCannotRun) {
		t.Skipf("real containerd not tested: %v", err)
	}
	if err != nil {
		t.Fatalf("%v\ncontainerd's log:\n%s", err, logsOf(c))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd's log (last lines):\n%s", buildcache.LastLines([]byte(c.Logs()), 80))
		}
	})
	return c
}

func logsOf(c *Containerd) string {
	if c == nil {
		return ""
	}
	return buildcache.LastLines([]byte(c.Logs()), 80)
}
