package recordermetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
)

// Dropper counts the events or occurrences a broadcaster gives up on, by
// cause, and logs them rate-limited: at most one line per interval per log
// key, carrying how many lines it stands for. Every counter and limiter is
// made by NewDropper, then only read, so a drop takes no lock of the
// Dropper's own and resolves no label.
type Dropper struct {
	dropped  map[string]prometheus.Counter
	limiters map[string]*ratelog.Limiter
}

// NewDropper returns a Dropper counting into m.Dropped, whose children it
// resolves now: register m (RegisterShared may replace m.Dropped) first.
// Its log keys are the Causes, each limiting its own lines, and keys, for
// lines that must not be suppressed by (or suppress) those of their cause,
// or for a caller that rate-limits every cause under one key; each admits
// one line per interval on clk.
func NewDropper(m *Metrics, clk clock.PassiveClock, interval time.Duration, keys ...string) *Dropper {
	d := &Dropper{dropped: make(map[string]prometheus.Counter), limiters: make(map[string]*ratelog.Limiter)}
	for _, cause := range Causes {
		d.dropped[cause] = m.Dropped.WithLabelValues(cause)
		d.limiters[cause] = ratelog.New(clk, interval)
	}
	for _, key := range keys {
		d.limiters[key] = ratelog.New(clk, interval)
	}
	return d
}

// Drop counts n drops under cause and logs msg as an error with err,
// rate-limited under key, with kv followed by "cause", cause, "dropped",
// n and, when lines under key were suppressed since the last one,
// "suppressedSinceLastLog" and their number. Nothing happens when n <= 0.
// cause is one of Causes; key one of the Dropper's log keys.
func (d *Dropper) Drop(logger klog.Logger, key, cause string, n int, err error, msg string, kv ...any) {
	if n <= 0 {
		return
	}
	d.Count(cause, n)
	ok, suppressed := d.limiter(key).Allow()
	if !ok {
		return
	}
	kv = append(kv, "cause", cause, "dropped", n)
	if suppressed > 0 {
		kv = append(kv, "suppressedSinceLastLog", suppressed)
	}
	logger.Error(err, msg, kv...)
}

// Count counts n drops under cause (one of Causes) without logging.
func (d *Dropper) Count(cause string, n int) {
	d.dropped[cause].Add(float64(n))
}

// Log logs msg rate-limited under key (one of the Dropper's log keys): as
// an error with err at verbosity 0, else at V(verbosity) with "err", err
// after kv, and not at all (nor counted as suppressed) when that
// verbosity is disabled. When lines under key were suppressed since the
// last one, "suppressedSinceLastLog" and their number follow kv.
func (d *Dropper) Log(logger klog.Logger, key string, verbosity int, err error, msg string, kv ...any) {
	if verbosity > 0 && !logger.V(verbosity).Enabled() {
		return
	}
	ok, suppressed := d.limiter(key).Allow()
	if !ok {
		return
	}
	if suppressed > 0 {
		kv = append(kv, "suppressedSinceLastLog", suppressed)
	}
	if verbosity > 0 {
		logger.V(verbosity).Info(msg, append(kv, "err", err)...)
		return
	}
	logger.Error(err, msg, kv...)
}

// limiter is key's limiter; an unknown key is a programming error.
func (d *Dropper) limiter(key string) *ratelog.Limiter {
	l := d.limiters[key]
	if l == nil {
		panic("recordermetrics: unknown drop log key " + key)
	}
	return l
}
