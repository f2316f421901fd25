// Package ratelog limits how often a recurring condition is logged: one
// line per interval, carrying the number of occurrences it stands for, so
// that a storm of drops or refusals cannot flood the log.
package ratelog

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Limiter admits one log line per interval for its condition.
type Limiter struct {
	clock    clock.PassiveClock
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// New returns a Limiter admitting one line per interval on clk.
func New(clk clock.PassiveClock, interval time.Duration) *Limiter {
	return &Limiter{clock: clk, interval: interval}
}

// Allow reports whether a line may be logged now and, if so, how many
// occurrences were suppressed since the last line.
func (l *Limiter) Allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}
