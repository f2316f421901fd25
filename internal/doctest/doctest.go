// Package doctest reads the command blocks of the project's Markdown
// pages (README.md, docs/) and runs them as a reader would: with bash,
// stopping at the first failing command. test/readme runs them against a
// kube-apiserver without nodes, test/cluster against a real cluster; the
// pages' text is the single source of the commands both run.
package doctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// fence is a fenced block at a line's start: its language and its text.
var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// heading is a Markdown heading line: its level and its text.
var heading = regexp.MustCompile(`(?m)^(#+) (.*)$`)

// Root is the repository's root, found from this file's location.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Read is the text of the page at path (from the repository root).
func Read(path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(Root(), path))
	if err != nil {
		return "", fmt.Errorf("doctest: %w", err)
	}
	return string(b), nil
}

// Blocks are the fenced blocks of md in language lang ("sh", "console",
// "yaml"...), in order.
func Blocks(md, lang string) []string {
	var out []string
	for _, m := range fence.FindAllStringSubmatch(md, -1) {
		if m[1] == lang {
			out = append(out, m[2])
		}
	}
	return out
}

// Section is the part of md under the heading whose text is title, up to
// the next heading of the same level or above (headings inside fenced
// blocks are not headings).
func Section(md, title string) (string, error) {
	// Headings are looked for in md with its blocks blanked, the same
	// length, so that offsets are md's.
	blanked := fence.ReplaceAllStringFunc(md, func(b string) string { return strings.Repeat(" ", len(b)) })
	hs := heading.FindAllStringSubmatchIndex(blanked, -1)
	for i, h := range hs {
		if md[h[4]:h[5]] != title {
			continue
		}
		level := h[3] - h[2]
		end := len(md)
		for _, next := range hs[i+1:] {
			if next[3]-next[2] <= level {
				end = next[0]
				break
			}
		}
		return md[h[1]:end], nil
	}
	return "", fmt.Errorf("doctest: no heading %q", title)
}

// Command is one block to run.
type Command struct {
	// Block is the block's text.
	Block string
	// Dir is the working directory.
	Dir string
	// Env is the environment (os.Environ() when nil).
	Env []string
}

// Run runs the block with bash -c under `set -euo pipefail`, and returns
// what it printed (stdout and stderr, interleaved) with the error of the
// first failing command. What the block started in the background (a
// `kubectl port-forward ... &`) ends with the block, as when a terminal
// is closed: the block's process group is killed once bash exits, or
// when ctx ends.
func Run(ctx context.Context, c Command) (string, error) {
	// A file, not a pipe: a background command holding the output open
	// must not keep Run waiting after bash exits.
	out, err := os.CreateTemp("", "doctest-out-")
	if err != nil {
		return "", fmt.Errorf("doctest: %w", err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+c.Block)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = out, out
	killGroup := setProcessGroup(cmd)
	cmd.Cancel = func() error { killGroup(cmd.Process.Pid); return nil }
	runErr := cmd.Run()
	if cmd.Process != nil {
		killGroup(cmd.Process.Pid)
	}
	printed, err := os.ReadFile(out.Name())
	if err != nil {
		return "", fmt.Errorf("doctest: %w", err)
	}
	if runErr != nil {
		return string(printed), fmt.Errorf("doctest: the block failed: %w", runErr)
	}
	return string(printed), nil
}

// Terminal is a block left running, as in a terminal of its own: a
// server started in the foreground (`go run ./cmd/eventsd ...`) that the
// page's next blocks use.
type Terminal struct {
	cmd  *exec.Cmd
	out  *os.File
	done chan struct{}
	err  error
	kill func(pid int)
}

// Start runs the block in the background under `set -euo pipefail` and
// returns at once. Stop ends it (its whole process group).
func Start(c Command) (*Terminal, error) {
	out, err := os.CreateTemp("", "doctest-terminal-")
	if err != nil {
		return nil, fmt.Errorf("doctest: %w", err)
	}
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+c.Block)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = out, out
	kill := setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		os.Remove(out.Name())
		return nil, fmt.Errorf("doctest: %w", err)
	}
	t := &Terminal{cmd: cmd, out: out, done: make(chan struct{}), kill: kill}
	go func() {
		t.err = cmd.Wait()
		close(t.done)
	}()
	return t, nil
}

// PID is the process id of the block's shell: the parent of the block's
// commands, for a test that signals one of them alone (Ctrl-C reaches a
// terminal's foreground command, not the jobs it runs in the
// background).
func (t *Terminal) PID() int { return t.cmd.Process.Pid }

// Output is what the block printed so far.
func (t *Terminal) Output() string {
	b, _ := os.ReadFile(t.out.Name())
	return string(b)
}

// WaitFor waits until the block has printed want, failing when it exits
// first or ctx ends (the error has what it printed).
func (t *Terminal) WaitFor(ctx context.Context, want string) error {
	for {
		if strings.Contains(t.Output(), want) {
			return nil
		}
		select {
		case <-t.done:
			if strings.Contains(t.Output(), want) {
				return nil
			}
			return fmt.Errorf("doctest: the block ended (%v) without printing %q; it printed:\n%s", t.err, want, t.Output())
		case <-ctx.Done():
			return fmt.Errorf("doctest: the block did not print %q: %w; it printed:\n%s", want, ctx.Err(), t.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the block: SIGTERM to its process group (as Ctrl-C would end
// a foreground server, which then shuts down), SIGKILL after grace, and
// returns what it printed.
func (t *Terminal) Stop(grace time.Duration) string {
	select {
	case <-t.done:
	default:
		terminate(t.cmd.Process.Pid)
		select {
		case <-t.done:
		case <-time.After(grace):
		}
	}
	t.kill(t.cmd.Process.Pid)
	<-t.done
	out := t.Output()
	t.out.Close()
	os.Remove(t.out.Name())
	return out
}
