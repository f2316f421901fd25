// Package buildinfotest checks a command's --version flag, for the tests
// of each of the project's commands.
package buildinfotest

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubevents/kubevents/internal/buildinfo"
)

// CheckVersionFlag runs cmd with --version and fails t unless it printed
// name and this build's version (buildinfo.String) and nothing else.
func CheckVersionFlag(t testing.TB, cmd *cobra.Command, name string) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := name + " " + buildinfo.String(buildinfo.Get()) + "\n"; out.String() != want {
		t.Errorf("%s --version printed %q, want %q", name, out.String(), want)
	}
}
