package demo_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that Run leaves no goroutine behind once its context
// ends (the clients' idle keep-alive connections aside).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
