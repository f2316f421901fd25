package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// TestSecondEventsdOnSameDataDir: a second eventsd on a data directory in
// use exits 1 with a message naming the directory, its lock file and the
// pid of the eventsd holding it.
func TestSecondEventsdOnSameDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := eventsdtest.Start(t, eventsdtest.Options{DataDir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, eventsdtest.Binary(t), "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("second eventsd: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{
		"data directory " + dir + " is in use by another eventsd",
		"lock file " + dir + "/LOCK",
		fmt.Sprintf("held by pid %d", p.PID()),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second eventsd says %q; want it to say %q", out, want)
		}
	}
}
