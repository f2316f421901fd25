package doctest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const page = "# Title\n\nintro\n\n## Install\n\n```sh\necho one\n```\n\n### Detail\n\n```sh\necho two\n```\n\n```console\n## not a heading\n```\n\n## Next\n\n```sh\necho three\n```\n"

func TestSection(t *testing.T) {
	for _, tc := range []struct {
		title string
		want  []string // its sh blocks
	}{
		{"Install", []string{"echo one\n", "echo two\n"}},
		{"Detail", []string{"echo two\n"}},
		{"Next", []string{"echo three\n"}},
		{"Title", []string{"echo one\n", "echo two\n", "echo three\n"}},
	} {
		sec, err := Section(page, tc.title)
		if err != nil {
			t.Fatal(err)
		}
		if got := Blocks(sec, "sh"); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("Section(%q)'s sh blocks: %q, want %q", tc.title, got, tc.want)
		}
	}
	if _, err := Section(page, "not a heading"); err == nil {
		t.Error("a line in a fenced block was taken for a heading")
	}
}

func TestRunStopsAtFailureAndEndsBackgroundJobs(t *testing.T) {
	ctx := context.Background()
	out, err := Run(ctx, Command{Block: "echo before\nfalse\necho after\n"})
	if err == nil || out != "before\n" {
		t.Errorf("a failing command: %q, %v; want the output before it and an error", out, err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	out, err = Run(ctx, Command{Block: "sleep 300 &\necho $! >" + pidFile + "\necho done\n"})
	if err != nil || out != "done\n" {
		t.Fatalf("%q, %v", out, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Run waited %v for a background job", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	// Killed: gone, or a zombie until its reaper collects it.
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		st, _ := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(b)), "stat"))
		if strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the block's background sleep (pid %d) outlived it", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTerminal(t *testing.T) {
	term, err := Start(Command{Block: "echo starting\ntrap 'echo stopping; exit 0' TERM\nsleep 300 & wait\n"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := term.WaitFor(ctx, "starting"); err != nil {
		t.Fatal(err)
	}
	if out := term.Stop(10 * time.Second); !strings.Contains(out, "stopping") {
		t.Errorf("Stop did not end the block with SIGTERM first: %q", out)
	}
	ended, err := Start(Command{Block: "echo bye\nexit 3\n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ended.WaitFor(ctx, "never printed"); err == nil || !strings.Contains(err.Error(), "bye") {
		t.Errorf("WaitFor on a block that ended: %v", err)
	}
	ended.Stop(time.Second)
}
