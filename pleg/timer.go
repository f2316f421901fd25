package pleg

import (
	"time"

	"k8s.io/utils/clock"
)

// armSlack is how far the clock may move while a timer is armed before
// the timer is armed again: a timer armed for d after reading the clock
// fires d after the clock's time at arming, so a clock that moved in
// between (a fake clock stepped by another goroutine) would make it late
// by as much, possibly for ever in a test that steps only once. A real
// clock moves microseconds here.
const armSlack = time.Millisecond

// deadlineTimer returns a timer on clk that fires when clk reads t, or nil
// if t has come.
func deadlineTimer(clk clock.Clock, t time.Time) clock.Timer {
	for {
		before := clk.Now()
		d := t.Sub(before)
		if d <= 0 {
			return nil
		}
		timer := clk.NewTimer(d)
		if clk.Since(before) <= armSlack {
			return timer
		}
		timer.Stop()
	}
}
