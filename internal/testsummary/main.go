// Command testsummary reads the output of `go test -json` on its standard
// input and prints what `go test` without -json prints (each package's
// result, the output of failed tests, build errors), then every skipped
// test with the reason it gave, and the totals. `go test` alone prints
// nothing about skips unless -v floods the log with every test's output;
// .ci/run uses this so that a test that skips (no chromium, no containerd,
// no root) says so in every CI log.
//
//	go test -race -json ./... | go run ./internal/testsummary
//
// It exits 1 when a test, a package or a build failed (as go test does), 2
// when its input cannot be read, and 0 otherwise; a line that is not a
// test event is printed as it is.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	s := newSummary(os.Stdout)
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: reading go test -json output: %v\n", err)
		os.Exit(2)
	}
	s.report()
	if s.failed() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json's TestEvent, and the
// build events of `go help buildjson`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail events
}

// testID names one test (or subtest) of one package.
type testID struct{ pkg, test string }

// skip is a skipped test and what it printed before skipping.
type skip struct {
	testID
	reason []string
}

// summary follows a stream of test events.
type summary struct {
	out io.Writer

	// pending holds each running test's output until it ends: printed
	// if it fails, searched for the reason if it skips, dropped if it
	// passes.
	pending map[testID][]string
	skips   []skip

	passed, failedTests, skipped int
	packages, noTests            int
	failedPkgs, failedBuilds     int
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, pending: map[testID][]string{}}
}

// read consumes the stream to its end.
func (s *summary) read(r io.Reader) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.line(line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// line handles one line of input.
func (s *summary) line(line []byte) {
	var e event
	if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
		s.out.Write(line)
		return
	}
	switch e.Action {
	case "build-output":
		io.WriteString(s.out, e.Output)
	case "build-fail":
		s.failedBuilds++
	default:
		if e.Test == "" {
			s.packageEvent(e)
		} else {
			s.testEvent(e)
		}
	}
}

// testEvent handles an event of one test.
func (s *summary) testEvent(e event) {
	id := testID{e.Package, e.Test}
	switch e.Action {
	case "output":
		s.pending[id] = append(s.pending[id], e.Output)
	case "pass":
		s.passed++
		delete(s.pending, id)
	case "fail":
		s.failedTests++
		s.flush(id)
	case "skip":
		s.skipped++
		s.skips = append(s.skips, skip{testID: id, reason: reason(s.pending[id])})
		delete(s.pending, id)
	}
}

// packageEvent handles an event of a package as a whole: its result
// lines are printed as go test prints them.
func (s *summary) packageEvent(e event) {
	switch e.Action {
	case "output":
		// -json runs tests verbosely; go test without it prints no
		// PASS line of its own for a package that passed.
		if e.Output != "PASS\n" {
			io.WriteString(s.out, e.Output)
		}
	case "pass":
		s.packages++
	case "skip": // no test files
		s.packages++
		s.noTests++
	case "fail":
		s.packages++
		s.failedPkgs++
		// Tests that never ended (a panic, a timeout) explain the failure.
		for id := range s.pending {
			if id.pkg == e.Package {
				s.flush(id)
			}
		}
	}
}

// flush prints a test's pending output (without the === framing lines
// verbose mode adds) and forgets it.
func (s *summary) flush(id testID) {
	for _, o := range s.pending[id] {
		if !strings.HasPrefix(strings.TrimLeft(o, " "), "=== ") {
			io.WriteString(s.out, o)
		}
	}
	delete(s.pending, id)
}

// reason returns what a skipped test printed: its t.Skip message and
// anything logged before it, without the framing lines.
func reason(output []string) []string {
	var r []string
	for _, line := range strings.Split(strings.Join(output, ""), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		r = append(r, t)
	}
	return r
}

// report prints the skipped tests and the totals.
func (s *summary) report() {
	if len(s.skips) == 0 {
		fmt.Fprintln(s.out, "\nNo test skipped.")
	} else {
		fmt.Fprintf(s.out, "\nSkipped tests (%d), with the reasons they gave:\n", len(s.skips))
	}
	for _, sk := range s.skips {
		fmt.Fprintf(s.out, "SKIP %s %s\n", sk.pkg, sk.test)
		if len(sk.reason) == 0 {
			fmt.Fprintln(s.out, "    (no reason given)")
		}
		for _, r := range sk.reason {
			fmt.Fprintf(s.out, "    %s\n", r)
		}
	}
	fmt.Fprintf(s.out, "tests and subtests: %d passed, %d failed, %d skipped; packages: %d (%d without tests), %d failed, %d builds failed\n",
		s.passed, s.failedTests, s.skipped, s.packages, s.noTests, s.failedPkgs, s.failedBuilds)
}

// failed reports whether anything failed.
func (s *summary) failed() bool {
	return s.failedTests > 0 || s.failedPkgs > 0 || s.failedBuilds > 0
}
