package server

import (
	"log/slog"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/internal/ratelog"
)

// Defaults of kube-apiserver's --max-requests-inflight and
// --max-mutating-requests-inflight: beyond them a request is refused with
// 429 and Retry-After rather than queued, so a storm of clients cannot
// pile up unbounded work (and memory) in the server.
const (
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
)

// inflight bounds concurrent requests of one class.
type inflight chan struct{}

func newInflight(n int) inflight {
	if n <= 0 {
		return nil // unlimited
	}
	return make(inflight, n)
}

func (f inflight) tryAcquire() bool {
	if f == nil {
		return true
	}
	select {
	case f <- struct{}{}:
		return true
	default:
		return false
	}
}

func (f inflight) release() {
	if f != nil {
		<-f
	}
}

// logLimiter logs a recurring condition at most once per interval, with
// the number of occurrences since the last line, so that a storm cannot
// flood the log.
type logLimiter struct {
	limit *ratelog.Limiter
	log   *slog.Logger
}

func newLogLimiter(clk clock.PassiveClock, log *slog.Logger, interval time.Duration) *logLimiter {
	return &logLimiter{limit: ratelog.New(clk, interval), log: log}
}

// Warn logs msg at warning level unless it was logged less than an
// interval ago; then it only counts it.
func (l *logLimiter) Warn(msg string, args ...any) {
	if ok, n := l.limit.Allow(); ok {
		l.log.Warn(msg, append(args, "similarSinceLastLog", n)...)
	}
}

func isMutating(v verb) bool {
	switch v {
	case verbCreate, verbUpdate, verbPatch, verbDelete, verbDeleteCollection:
		return true
	}
	return false
}

// tooManyRequests is kube-apiserver's answer when a request class is full.
func tooManyRequests(w http.ResponseWriter) {
	// The Status carries no details (apierrors.NewTooManyRequests would add
	// retryAfterSeconds): the retry hint is the Retry-After header.
	w.Header().Set("Retry-After", "1")
	writeStatus(w, newStatus(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "Too many requests, please try again later."))
}
