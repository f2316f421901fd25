package evctl

import (
	"io"
	"testing"
)

// TestSinceInDays: --since in days, on every command that takes it, is
// refused with the length in hours before anything is asked of a server.
func TestSinceInDays(t *testing.T) {
	for _, sub := range []string{"get", "watch"} {
		cmd := NewCommand(io.Discard, io.Discard)
		cmd.SetArgs([]string{sub, "--server", "http://127.0.0.1:1", "--since", "7d"})
		err := cmd.Execute()
		want := `invalid argument "7d" for "--since" flag: "7d": use hours, e.g. 168h`
		if err == nil || err.Error() != want {
			t.Errorf("evctl %s --since 7d: %v; want %s", sub, err, want)
		}
	}
}
