package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
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
