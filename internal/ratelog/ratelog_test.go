package ratelog

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestLimiter(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := New(clk, 10*time.Second)
	if ok, n := l.Allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := 0; i < 4; i++ {
		if ok, _ := l.Allow(); ok {
			t.Fatal("allowed within the interval")
		}
	}
	clk.Step(10 * time.Second)
	if ok, n := l.Allow(); !ok || n != 4 {
		t.Fatalf("after the interval: %v, %d suppressed; want true, 4", ok, n)
	}
}
