package nodeagent

import (
	"bytes"
	"context"
	"os"
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

// TestCommandNodeNameDefaultsToHostname: without --node-name the agent
// records as this machine's host name (resolved when it runs, so that
// --help and the reference page show no machine's name).
func TestCommandNodeNameDefaultsToHostname(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("this machine's host name is unknown: %v", err)
	}
	var stderr bytes.Buffer
	cmd := NewCommand(&stderr)
	cmd.SetArgs([]string{"--runtime-endpoint", "unix:///nonexistent/cri.sock", "--server", "http://127.0.0.1:1",
		"--metrics-addr", "", "--shutdown-timeout", "1s"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the agent stops as soon as it has started
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("nodeagent: %v\n%s", err, stderr.String())
	}
	if want := "node=" + host; !strings.Contains(stderr.String(), want) {
		t.Errorf("nodeagent logged no %q:\n%s", want, stderr.String())
	}
}
