package nodeagent

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCommandRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "http://127.0.0.1:1"}, `--runtime-endpoint is required: unix:///path/to.sock or /path/to.sock`},
		{[]string{"--runtime-endpoint", "tcp://127.0.0.1:1", "--server", "http://127.0.0.1:1"}, `--runtime-endpoint "tcp://127.0.0.1:1": want unix:///path/to.sock or /path/to.sock`},
		{[]string{"--runtime-endpoint", "unix:///run/x.sock", "--server", "http://127.0.0.1:1", "--pleg", "fast"}, `--pleg "fast": want evented or generic`},
		{[]string{"--runtime-endpoint", "unix:///run/x.sock", "--server", "http://127.0.0.1:1", "--log-level", "loud"}, "--log-level"},
		{[]string{"--runtime-endpoint", "unix:///run/x.sock", "--kubeconfig", "/nonexistent/kubeconfig"}, "--kubeconfig"},
		{[]string{"extra"}, `unknown command "extra"`},
		{[]string{"--runtime-endpoint", "unix:///run/x.sock", "--shutdown-timeout", "1d"}, `invalid argument "1d" for "--shutdown-timeout" flag: "1d": use hours, e.g. 24h`},
	} {
		var stderr bytes.Buffer
		cmd := NewCommand(&stderr)
		cmd.SetArgs(tc.args)
		cmd.SetErr(&stderr)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
