package readme

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// docsAddr is the address the pages' commands name: eventsd's default
// --listen. The test's eventsd listens on a free port instead (tests of
// other packages run beside it) and the commands are run with that
// address in its place.
const docsAddr = "127.0.0.1:8080"

// notChecked, on the line before a ```console fence, leaves that
// transcript out of TestTranscripts; the comment says why.
const notChecked = "<!-- not checked:"

// transcript is one ```console block: commands after "$ " (a line ending
// in a backslash goes on to the next) and the output each printed.
type transcript struct {
	file  string
	steps []consoleStep
}

// consoleStep is one command of a transcript and the lines it printed. A line
// "..." in the output stands for any number of lines.
type consoleStep struct {
	command string
	output  []string
}

// consoleRE matches a ```console block with the line before its fence.
var consoleRE = regexp.MustCompile("(?ms)^([^\n]*)\n```console\n(.*?)^```")

// transcripts returns the checked ```console blocks of README.md and
// docs/.
func transcripts(t *testing.T) []transcript {
	t.Helper()
	var out []transcript
	for _, p := range pages(t) {
		for _, m := range consoleRE.FindAllStringSubmatch(p.text, -1) {
			if strings.HasPrefix(strings.TrimSpace(m[1]), notChecked) {
				continue
			}
			tr := transcript{file: p.name}
			lines := strings.Split(strings.TrimSuffix(m[2], "\n"), "\n")
			for i := 0; i < len(lines); i++ {
				line := lines[i]
				if cmd, ok := strings.CutPrefix(line, "$ "); ok {
					for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
						i++
						cmd += "\n" + lines[i]
					}
					tr.steps = append(tr.steps, consoleStep{command: cmd})
					continue
				}
				if len(tr.steps) == 0 {
					t.Errorf("%s: a ```console block must start with a command (\"$ \"), not %q", p.name, line)
					break
				}
				last := &tr.steps[len(tr.steps)-1]
				last.output = append(last.output, line)
			}
			out = append(out, tr)
		}
	}
	return out
}

// Parts of an output that change from run to run, each replaced by a
// placeholder in both the expected and the actual output: times, ages,
// the counts of series that go on while the demo runs, and the time in
// event names.
var variable = []struct {
	re   *regexp.Regexp
	with string
}{
	// Event names end in the hex nanoseconds of their first time.
	{regexp.MustCompile(`\.[0-9a-f]{16}\b`), ".<hex>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\b\d+[smhd](\d+[smh])?\b`), "<age>"},
	{regexp.MustCompile(`\bx\d+\b`), "x<n>"},
}

// normalize is a line's fields with its variable parts replaced: columns
// are as wide as their widest value, which changes with the ages.
func normalize(line string) string {
	for _, v := range variable {
		line = v.re.ReplaceAllString(line, v.with)
	}
	return strings.Join(strings.Fields(line), " ")
}

// matchOutput reports whether got is the output want shows, "..."
// standing for any number of lines.
func matchOutput(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchOutput(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && normalize(want[0]) == normalize(got[0]) && matchOutput(want[1:], got[1:])
}

// TestTranscripts runs every ```console block of README.md and docs/ as
// a user would, in a shell at the repository root, against an eventsd
// started with --demo (the story the pages' examples tell), with that
// eventsd, evctl and kubectl on PATH, and checks that each command prints
// what the page shows, up to times, ages and live counts.
func TestTranscripts(t *testing.T) {
	trs := transcripts(t)
	if len(trs) == 0 {
		t.Fatal("no ```console transcripts in README.md or docs/: the quick start shows one")
	}
	bin := t.TempDir()
	build := exec.Command(buildcache.GoTool(), "build", "-o", bin+string(filepath.Separator), "./cmd/eventsd", "./cmd/evctl")
	build.Dir = root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building eventsd and evctl: %v\n%s", err, out)
	}
	kubectl := eventsdtest.Kubectl(t)
	addr := startDemo(t, filepath.Join(bin, "eventsd"))

	// HOME stays (go run needs its caches). KUBECONFIG is the one the
	// pages have users make for the demo (docs/why-did-my-pod-restart.md):
	// its server, namespace shop; commands that name --server use that
	// instead.
	kubeconfig := filepath.Join(t.TempDir(), "eventsd.kubeconfig")
	kc := fmt.Sprintf(demoKubeconfig, addr)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kubeconfig, "NO_COLOR=1")
	for _, tr := range trs {
		for _, s := range tr.steps {
			command := strings.ReplaceAll(s.command, docsAddr, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-c", command)
			cmd.Dir = root()
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			cancel()
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(out) == 0 {
				got = nil
			}
			if err != nil {
				t.Errorf("%s: $ %s\nfailed: %v\n%s", tr.file, s.command, err, out)
				continue
			}
			if !matchOutput(s.output, got) {
				t.Errorf("%s: $ %s\nprinted:\n%s\nthe page shows:\n%s", tr.file, s.command, out, strings.Join(s.output, "\n"))
			}
		}
	}
}

// demoKubeconfig is what docs/why-did-my-pod-restart.md's kubectl config
// commands write, for the demo's address.
const demoKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: eventsd
  cluster: {server: "http://%s"}
contexts:
- name: eventsd
  context: {cluster: eventsd, namespace: shop}
current-context: eventsd
`

// startDemo runs eventsd --demo on a free loopback port until the test
// ends and returns its address once the story is written.
func startDemo(t *testing.T, eventsd string) string {
	t.Helper()
	addr := eventsdtest.FreeAddr(t)
	cmd := exec.Command(eventsd, "--demo", "--listen", addr)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	written := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "demo: wrote the story's events") {
				close(written)
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	select {
	case <-written:
	case <-time.After(2 * time.Minute):
		t.Fatalf("eventsd --demo did not write its story within 2 minutes")
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/readyz", addr))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("eventsd --demo is not ready: %v %v", resp, err)
	}
	resp.Body.Close()
	return addr
}

// TestMatchOutput: what the transcripts' check lets vary (times, ages,
// live counts, column widths, elided lines) and what it does not.
func TestMatchOutput(t *testing.T) {
	want := []string{
		"LAST SEEN   TYPE      REASON    OBJECT",
		"13s (x41 over 11m)   Warning   BackOff   pod/web-1",
		"...",
		"2026-11-29T01:22:52Z   x5   Pulled",
	}
	for _, c := range []struct {
		got  []string
		want bool
	}{
		{[]string{"LAST SEEN TYPE REASON OBJECT", "2m5s (x44 over 12m)      Warning BackOff pod/web-1", "2027-01-02T03:04:05Z x6 Pulled"}, true},
		{[]string{"LAST SEEN TYPE REASON OBJECT", "1s (x41 over 11m) Warning BackOff pod/web-1", "more", "lines", "2026-11-29T01:22:52Z x5 Pulled"}, true},
		{[]string{"LAST SEEN TYPE REASON OBJECT", "13s (x41 over 11m) Warning BackOff pod/web-2", "2026-11-29T01:22:52Z x5 Pulled"}, false},
		{[]string{"LAST SEEN TYPE REASON OBJECT", "13s (x41 over 11m) Normal BackOff pod/web-1", "2026-11-29T01:22:52Z x5 Pulled"}, false},
		{[]string{"LAST SEEN TYPE REASON OBJECT", "13s (x41 over 11m) Warning BackOff pod/web-1"}, false},
		{[]string{"LAST SEEN TYPE REASON OBJECT", "13s (x41 over 11m) Warning BackOff pod/web-1", "2026-11-29T01:22:52Z x5 Pulled", "extra"}, false},
	} {
		if got := matchOutput(want, c.got); got != c.want {
			t.Errorf("matchOutput(%q) = %v, want %v", c.got, got, c.want)
		}
	}
}
