package robustness

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

var (
	flagDuration = flag.Duration("robustness.duration", 0,
		"long profile: run each scenario in rounds for this long, each round with a new random seed (0: the short profile, fixed seeds plus one random)")
	flagRound = flag.Duration("robustness.round", 4*time.Second, "traffic time of one round (the fault is injected at a third of it and removed at two thirds)")
	flagSeed  = flag.Uint64("robustness.seed", 0, "run only this seed (to replay a failure)")
)

// TestMain builds eventsd before any test starts, and checks that the
// in-process scenarios leave no goroutine behind.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := eventsdtest.Prepare(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// client-go's watch decoders end just after their stream closes.
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"))
}
