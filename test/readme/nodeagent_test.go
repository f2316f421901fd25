package readme

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// nodeagentDoc is the page whose commands TestNodeagentPage runs.
const nodeagentDoc = "docs/nodeagent.md"

// TestNodeagentPage runs docs/nodeagent.md's commands on fakecri as a
// reader would, with eventsd started as the page's prose says, and checks
// what the page says they show: kubectl's watch printing count changes,
// evctl showing the three series about Pod crash (Started, Exited with
// code 1, BackOff) ongoing, the agent's metrics counting them, and, after
// Ctrl-C of nodeagent (and the block's `kill %1` of fakecri), the same
// series unknown.
func TestNodeagentPage(t *testing.T) {
	t.Parallel()
	const (
		agent   = "fakecri --listen /tmp/fakecri.sock --scenario crashloop --time-scale 10 &"
		watch   = "kubectl --server http://127.0.0.1:8080 get events -w"
		evctl   = "evctl --server http://127.0.0.1:8080 get --for pod/crash"
		metrics = "curl -s 127.0.0.1:9470/metrics | grep nodeagent_events"
	)
	needs(t, "curl")
	blocks := pageBlocks(t, nodeagentDoc, []string{agent, watch, evctl, metrics}, map[string]string{
		"nodeagent --runtime-endpoint /run/containerd/containerd.sock --server http://127.0.0.1:8080 \\": "it follows the node's containerd at /run/containerd/containerd.sock and keeps its state under /var/lib: a real node's, as root",
		"sudo go run ./cmd/devcontainerd --crashloop":                                                    "it needs root, overlayfs and cgroups, and builds containerd 2.x on its first run (about 12 minutes on two busy cores)",
	})
	r := newPageReader(t, nodeagentDoc, blocks, commandsBin(t, "evctl", "nodeagent", "fakecri"))
	addr, metricsAddr := eventsdtest.FreeAddr(t), eventsdtest.FreeAddr(t)
	socket := filepath.Join(t.TempDir(), "fakecri.sock")
	// The commands are built once and on PATH, as the page's "built once"
	// has them. eventsd listens on a free port instead of 8080, and
	// nodeagent serves its metrics on one instead of 9470: another test
	// may hold either; the blocks reach them there. fakecri's socket is
	// the test's own: another fakecri (of another test, or the reader's)
	// may serve on /tmp/fakecri.sock.
	r.substitute("go run ./cmd/eventsd", "eventsd --listen "+addr)
	r.substitute("127.0.0.1:8080", addr)
	r.substitute("127.0.0.1:9470", metricsAddr)
	r.substitute("/tmp/fakecri.sock", socket)
	r.substitute("nodeagent --runtime-endpoint", "nodeagent --metrics-addr "+metricsAddr+" --runtime-endpoint")

	// "With eventsd running (`go run ./cmd/eventsd`, on 127.0.0.1:8080)".
	r.startText(r.replace("go run ./cmd/eventsd"), "eventsd serving")
	term, stopAgent := r.startText(r.block(agent), "Recording pod lifecycle events")
	_, stopWatch := r.startText(r.block(watch), "pod/crash")
	// Long enough for a series' first count update (at 10 s of age).
	time.Sleep(15 * time.Second)

	out := r.run(evctl)
	for _, want := range []string{"Started container app", "Container app exited with code 1 (Error)", "Back-off restarting failed container app"} {
		if !strings.Contains(out, want) {
			t.Errorf("evctl shows no series %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, ", ongoing)"); n != 3 {
		t.Errorf("evctl shows %d ongoing series, want 3:\n%s", n, out)
	}
	out = r.run(metrics)
	for _, reason := range []string{"Started", "Exited", "BackOff"} {
		if !strings.Contains(out, `nodeagent_events_recorded_total{reason="`+reason+`"}`) {
			t.Errorf("the agent's metrics count no %s:\n%s", reason, out)
		}
	}
	watched := stopWatch()
	if n := strings.Count(watched, "Container app exited with code 1"); n < 2 {
		t.Errorf("kubectl -w printed %d lines of the Exited series, want its count changes (2 or more):\n%s", n, watched)
	}

	// Ctrl-C reaches the terminal's foreground command, nodeagent; the
	// block then kills fakecri (kill %1) and ends.
	pid := childNamed(t, term.PID(), "nodeagent")
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// fakecri, sent SIGTERM by kill %1, may finish after the block's
	// shell has ended (as after the reader's prompt came back): its log
	// is waited for in the block's output.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(term.Output(), "scenario ended"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("after Ctrl-C of nodeagent, the block's kill %%1 did not stop fakecri:\n%s", term.Output())
			break
		}
	}
	if out := stopAgent(); !strings.Contains(out, "Stopping; writing pending event counts") {
		t.Errorf("nodeagent did not write its pending counts at Ctrl-C:\n%s", out)
	}
	out = r.run(evctl)
	if n := strings.Count(out, ", unknown)"); n != 3 {
		t.Errorf("after Ctrl-C of nodeagent evctl shows %d series unknown, want 3:\n%s", n, out)
	}
}

// childNamed is the process id of parent's child whose command is name,
// from /proc.
func childNamed(t *testing.T, parent int, name string) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ...
		stat := string(b)
		open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(stat[closing+1:])
		if stat[open+1:closing] != name || len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(stat[:open]))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	t.Fatalf("no process %s is a child of %d (the block's shell)", name, parent)
	return 0
}
