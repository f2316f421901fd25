package main

import (
	"bytes"
	"testing"

	"github.com/kubevents/kubevents/internal/buildinfo"
)

// TestVersionFlag: fakecri --version prints its name and this build's
// version (internal/buildinfo), and runs nothing.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	cmd := newCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "fakecri " + buildinfo.String(buildinfo.Get()) + "\n"; out.String() != want {
		t.Errorf("fakecri --version printed %q, want %q", out.String(), want)
	}
}
