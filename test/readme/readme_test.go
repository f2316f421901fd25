// Package readme checks that what README.md and the pages under docs/
// tell users to type works: their Go snippets compile as they stand, their
// go build commands can run at the repository root, their configuration
// examples decode, their links lead somewhere, and their examples do not
// go stale or contradict each other. Their commands run as a reader would
// run them: the ```console transcripts against eventsd --demo, and each
// page's ```sh blocks in a test of that page (install_test.go,
// export_test.go, ...), every block run or listed with why it cannot run
// here (pageBlocks).
package readme

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/refdoc"
)

// root is the module root, found from this file's location.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var fenceRE = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```")

// page is one Markdown file users read.
type page struct {
	// name is its path from the repository root, with slashes.
	name string
	text string
}

// pages returns README.md and every Markdown file under docs/.
func pages(t *testing.T) []page {
	t.Helper()
	names := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root(), "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root(), p)
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []page
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root(), filepath.FromSlash(n)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page{name: n, text: string(b)})
	}
	return out
}

// block is one fenced block of a page.
type block struct {
	// file is the page's name; lang the fence's language.
	file, lang string
	text       string
}

// allBlocks returns the fenced blocks of every page.
func allBlocks(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, p := range pages(t) {
		for _, m := range fenceRE.FindAllStringSubmatch(p.text, -1) {
			out = append(out, block{file: p.name, lang: m[1], text: m[2]})
		}
	}
	return out
}

// blocks returns the fenced blocks of language lang of every page.
func blocks(t *testing.T, lang string) []block {
	t.Helper()
	var out []block
	for _, b := range allBlocks(t) {
		if b.lang == lang {
			out = append(out, b)
		}
	}
	return out
}

// TestGoSnippetsCompile builds every ```go block of README.md and docs/
// as a main package inside the module, as a user pasting it into a file
// would.
func TestGoSnippetsCompile(t *testing.T) {
	snippets := blocks(t, "go")
	if len(snippets) < 2 {
		t.Fatalf("found %d Go snippets in README.md and docs/, want the two recorder examples at least", len(snippets))
	}
	for i, s := range snippets {
		if !strings.HasPrefix(s.text, "package main\n") {
			t.Errorf("%s: Go snippet %d is not a complete program (package main with its imports):\n%s", s.file, i+1, s.text)
			continue
		}
		// Inside the module, so that its imports resolve; the leading dot
		// keeps ./... patterns run meanwhile away from it.
		dir, err := os.MkdirTemp(root(), ".readme-snippet-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(s.text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(buildcache.GoTool(), "build", "-o", os.DevNull, ".")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: Go snippet %d does not compile: %v\n%s\n%s", s.file, i+1, err, out, s.text)
		}
	}
}

// TestGoBuildCommands: `go build ./cmd/X` at the root fails when a
// directory X exists there (evctl, nodeagent, fakecri do), so every go
// build README.md and docs/ give names its output.
func TestGoBuildCommands(t *testing.T) {
	n := 0
	for _, b := range blocks(t, "sh") {
		for _, line := range strings.Split(b.text, "\n") {
			if !strings.Contains(line, "go build") {
				continue
			}
			n++
			if !strings.Contains(line, " -o ") {
				t.Errorf("%s: %q builds without -o", b.file, line)
			}
		}
	}
	if n == 0 {
		t.Error("README.md and docs/ give no go build command: how do users get the binaries?")
	}
}

// fixedDateRE matches a timestamp such as 2026-11-20T10:00:00Z.
var fixedDateRE = regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\dT[0-2]\d:[0-5]\d`)

// TestNoFixedDates: an example with a fixed date goes stale (a week
// later `--since 10m` finds nothing and the web page's last hour is
// empty), so README.md and the pages under docs/ give none: events
// carry the time a shown `date` command prints, or none. The generated
// reference pages are the code's, and checked by its tests; a
// transcript's output is checked by TestTranscripts.
func TestNoFixedDates(t *testing.T) {
	for _, p := range pages(t) {
		if strings.HasPrefix(p.name, "docs/reference/") {
			continue
		}
		inConsole := false
		for i, line := range strings.Split(p.text, "\n") {
			switch {
			case line == "```console":
				inConsole = true
			case inConsole && line == "```":
				inConsole = false
			}
			// A transcript's output shows the times of the run it was
			// taken from; TestTranscripts checks it with any times.
			if inConsole && !strings.HasPrefix(line, "$ ") {
				continue
			}
			if m := fixedDateRE.FindString(line); m != "" {
				t.Errorf("%s:%d: a fixed date (%s) goes stale; use $(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ) or leave the time out: %s", p.name, i+1, m, line)
			}
		}
	}
}

// writtenFileRE matches a heredoc writing a file, `cat >NAME <<'EOF'`
// (or <<EOF), and its body.
var writtenFileRE = regexp.MustCompile(`(?s)cat >\s*(\S+)\s+<<'?EOF'?\n(.*?)\nEOF\n`)

// TestWrittenFilesAreOne: two examples that write different contents
// under one file name (two ev.yaml) leave a user who follows both with
// the wrong one.
func TestWrittenFilesAreOne(t *testing.T) {
	type written struct{ file, body string }
	seen := map[string]written{}
	for _, b := range allBlocks(t) {
		for _, m := range writtenFileRE.FindAllStringSubmatch(b.text, -1) {
			name, body := m[1], m[2]
			if prev, ok := seen[name]; ok && prev.body != body {
				t.Errorf("%s and %s both write a file %s, with different contents: give one another name", prev.file, b.file, name)
				continue
			}
			seen[name] = written{b.file, body}
		}
	}
}

// linkRE matches a Markdown link or image, [text](target), capturing the
// target.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCodeRE matches an inline code span.
var inlineCodeRE = regexp.MustCompile("`[^`\n]*`")

// TestRelativeLinks: every relative link of README.md and docs/ points at
// a file or directory that exists, and its #anchor, if any, at a heading
// of that file.
func TestRelativeLinks(t *testing.T) {
	anchors := map[string][]string{}
	all := pages(t)
	for _, p := range all {
		anchors[p.name] = headingAnchors(p.text)
	}
	n := 0
	for _, p := range all {
		prose := inlineCodeRE.ReplaceAllString(fenceRE.ReplaceAllString(p.text, ""), "")
		for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			dest := p.name
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.name), file)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s: link %q leaves the repository", p.name, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root(), filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s: link %q: %s does not exist", p.name, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			have, ok := anchors[dest]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root(), filepath.FromSlash(dest)))
				if err != nil || !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor into %s, which is not a Markdown page", p.name, target, dest)
					continue
				}
				have = headingAnchors(string(b))
				anchors[dest] = have
			}
			if !slices.Contains(have, anchor) {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s (it has %s)", p.name, target, dest, anchor, strings.Join(have, ", "))
			}
		}
	}
	if n == 0 {
		t.Error("found no relative link at all: is the link pattern broken?")
	}
}

// headingRE matches an ATX heading line; linkTextRE a link, whose text
// alone counts in a heading's anchor.
var (
	headingRE  = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	linkTextRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown page, in order, a repeated one with -1, -2, ... appended.
func headingAnchors(md string) []string {
	var out []string
	count := map[string]int{}
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(md, ""), -1) {
		a := refdoc.Anchor(linkTextRE.ReplaceAllString(m[1], "$1"))
		if n := count[a]; n > 0 {
			count[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			count[a] = 1
		}
		out = append(out, a)
	}
	return out
}

// indentedFenceRE matches a fence indented (inside a list item, say).
var indentedFenceRE = regexp.MustCompile("(?m)^[ \t]+```")

// TestFencesAtLineStart: the checks here (and a reader copying a block)
// see fenced blocks that start at the beginning of a line; an indented
// one would escape them all.
func TestFencesAtLineStart(t *testing.T) {
	for _, p := range pages(t) {
		for _, loc := range indentedFenceRE.FindAllStringIndex(p.text, -1) {
			line := strings.Count(p.text[:loc[0]], "\n") + 1
			t.Errorf("%s:%d: an indented fenced block, which test/readme does not check: start it at the beginning of a line", p.name, line)
		}
	}
}
