package readme

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/doctest"
)

// pageReader runs a page's blocks as a reader of the page would, in a shell
// of their own: in dir (standing for the clone's root), with HOME a
// directory of the test's own (the reader's ~/.kube/config), the tools
// the page names on PATH, and the test's substitutions applied to each
// block (each named, with why, where the test adds it).
type pageReader struct {
	t      *testing.T
	page   string
	blocks map[string]string
	dir    string
	home   string
	env    []string
	subs   []string // old, new pairs, applied in order
}

// newPageReader is a reader of the page whose blocks are blocks, with
// bin (commandsBin) first on PATH; files are paths from the repository
// root copied into its directory, as the clone has them.
func newPageReader(t *testing.T, page string, blocks map[string]string, bin string, files ...string) *pageReader {
	t.Helper()
	r := &pageReader{t: t, page: page, blocks: blocks, dir: t.TempDir(), home: t.TempDir()}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root(), f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(r.dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The reader's shell (main's reader: HOME, no KUBECONFIG, bin on
	// PATH), with a temporary directory of the test's own (eventsd
	// --demo keeps its store in one) and no colours.
	r.env = append(newReader(t, r.dir, bin, r.home).env, "TMPDIR="+t.TempDir(), "NO_COLOR=1")
	return r
}

// substitute replaces old with new in every block run from now on.
func (r *pageReader) substitute(old, new string) { r.subs = append(r.subs, old, new) }

// block is the block starting with first, with the substitutions made.
func (r *pageReader) block(first string) string {
	r.t.Helper()
	b, ok := r.blocks[first]
	if !ok {
		r.t.Fatalf("%s has no block starting %q", r.page, first)
	}
	return r.replace(b)
}

// replace is text with the substitutions made: a block, or a command the
// page's prose gives.
func (r *pageReader) replace(text string) string { return strings.NewReplacer(r.subs...).Replace(text) }

// run runs the block starting with first and returns what it printed,
// failing the test when a command of it fails.
func (r *pageReader) run(first string) string {
	r.t.Helper()
	out, err := r.try(first)
	if err != nil {
		r.t.Fatalf("%s's block %q: %v\n%s", r.page, first, err, out)
	}
	return out
}

// try runs the block starting with first and returns what it printed
// and whether a command of it failed.
func (r *pageReader) try(first string) (string, error) {
	r.t.Helper()
	block := r.block(first)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	out, err := doctest.Run(ctx, doctest.Command{Block: block, Dir: r.dir, Env: r.env})
	r.t.Logf("$ %s(%v, %v)\n%s", block, time.Since(start).Round(time.Millisecond), err, out)
	return out, err
}

// start runs the block starting with first as in a terminal of its own
// (a server in the foreground), waits until it printed ready, and stops
// it (as Ctrl-C would) when the test ends, or with the returned stop,
// which returns what it printed.
func (r *pageReader) start(first, ready string) (stop func() string) {
	r.t.Helper()
	_, stop = r.startText(r.block(first), ready)
	return stop
}

// startText is start for a command given as text (substitutions made),
// and also returns its terminal.
func (r *pageReader) startText(text, ready string) (*doctest.Terminal, func() string) {
	r.t.Helper()
	term, err := doctest.Start(doctest.Command{Block: text, Dir: r.dir, Env: r.env})
	if err != nil {
		r.t.Fatal(err)
	}
	var out string
	stopped := false
	stop := func() string {
		if !stopped {
			stopped = true
			out = term.Stop(10 * time.Second)
			r.t.Logf("$ %s(stopped)\n%s", text, out)
		}
		return out
	}
	r.t.Cleanup(func() { stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := term.WaitFor(ctx, ready); err != nil {
		r.t.Fatalf("%s's %q: %v", r.page, text, err)
	}
	return term, stop
}

// needs skips the test when a command the page's blocks use is missing.
func needs(t *testing.T, commands ...string) {
	t.Helper()
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("the page's commands need %s: %v", c, err)
		}
	}
}
