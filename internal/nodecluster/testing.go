package nodecluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/containerdproc"
)

// StartTest starts a cluster for a test and stops it, with everything it
// made, when the test ends (failing the test if something was left; with
// the components' logs if the test failed). The test skips, saying why,
// where a node cannot run here (CanRun), where a component is not built
// yet (a first build takes tens of minutes, which a test binary does not
// spend inside go test's timeout: BuildCommand does it, as .ci/run does
// before the tests), or where one cannot be built (ErrUnavailable).
func StartTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if err := CanRun(); err != nil {
		t.Skipf("no real cluster: %v", err)
	}
	if missing := Cached(); len(missing) > 0 {
		t.Skipf("no real cluster: not built yet: %s (a first build takes tens of minutes; %s builds and caches them)", strings.Join(missing, "; "), BuildCommand)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Launch(context.Background(), opts)
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the cluster's logs (last lines):\n%s", c.LogTails(60))
			}
			if err := c.Stop(); err != nil {
				t.Errorf("stopping the cluster: %v", err)
			}
		})
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, containerdproc.ErrCannotRun) {
		t.Skipf("no real cluster: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WaitFor polls cond every 250 ms until it holds, failing the test with
// what, the timeout and cond's last state when timeout passes first: a
// cluster's controllers and kubelet act asynchronously.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, timeout, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
