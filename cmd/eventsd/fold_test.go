package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/fold"
)

// TestFoldConfigFlag: a bad or missing --fold-config keeps eventsd from
// starting, with an error naming the flag, the file, and the rule and
// field at fault.
func TestFoldConfigFlag(t *testing.T) {
	bad := writeFile(t, "fold.yaml", `apiVersion: eventsd.kubevents.io/v1alpha1
kind: FoldConfiguration
rules:
- reasons: [BackOff]
  window: 10m
- types: [Warning]
  window: 1d
`)
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		file string
		want []string
	}{
		{bad, []string{"--fold-config", bad, "rules[1].window", `"1d"`}},
		{missing, []string{"--fold-config", missing}},
	} {
		cmd := newCommand()
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "error", "--fold-config", tc.file})
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%s: eventsd accepted it", tc.file)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %s", err, w)
			}
		}
	}
}

// TestLogFoldRules: the start-up log names each rule as its metrics do
// (an unnamed rule by its index), and says so when a configuration has
// no rules, rather than starting with folding silently off.
func TestLogFoldRules(t *testing.T) {
	for _, tc := range []struct {
		rules string
		want  []string
	}{
		{"rules: []\n", []string{"level=WARN", "no rules: no create is folded"}},
		{"rules:\n- {name: backoff, reasons: [BackOff], window: 10m}\n- {window: 1m}\n", []string{"rule=backoff window=10m reasons=BackOff", "rule=1 window=1m"}},
	} {
		c, err := fold.Decode([]byte("apiVersion: eventsd.kubevents.io/v1alpha1\nkind: FoldConfiguration\n" + tc.rules))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		logFoldRules(slog.New(slog.NewTextHandler(&out, nil)), c)
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: the log\n%s\nlacks %q", tc.rules, out.String(), w)
			}
		}
	}
}
