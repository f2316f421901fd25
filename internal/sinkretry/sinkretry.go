// Package sinkretry decides what a recorder does when writing an event to
// its sink fails: retry (transport errors, 429 and 5xx answers, with
// exponential backoff, jitter and the server's Retry-After), or drop (other
// API errors, which a retry cannot fix). Upstream's recorders drop 429 and
// 5xx after one attempt; the events redesign asked for "aggressive backoff".
package sinkretry

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
)

// Defaults of Policy. Eight attempts spaced 1, 2, 4, 8, 16, 30, 30 s apart
// (±25%) wait about 90 s in all: upstream's legacy recorder waits 100-110 s
// over 12 attempts, but retries only transport errors.
const (
	DefaultMaxAttempts = 8
	DefaultInitial     = time.Second
	DefaultMax         = 30 * time.Second
	DefaultJitter      = 0.25
)

// Policy is a bounded exponential backoff.
type Policy struct {
	// MaxAttempts is the total number of attempts, the first included.
	MaxAttempts int
	// Initial is the delay after the first failure; each later delay
	// doubles, up to Max.
	Initial, Max time.Duration
	// Jitter spreads each delay uniformly by ±Jitter of itself.
	Jitter float64
}

// WithDefaults fills unset fields with the defaults.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Initial <= 0 {
		p.Initial = DefaultInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	if p.Jitter < 0 {
		p.Jitter = 0
	} else if p.Jitter == 0 {
		p.Jitter = DefaultJitter
	}
	return p
}

// Delay returns how long to wait after the failed attempt number attempt
// (1 for the first), honouring a Retry-After the server gave in err.
func (p Policy) Delay(attempt int, err error) time.Duration {
	d := p.Initial
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if p.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + p.Jitter*(2*rand.Float64()-1)))
	}
	if s, ok := apierrors.SuggestsClientDelay(err); ok {
		d = max(d, time.Duration(s)*time.Second)
	}
	return d
}

// Outcome classifies a failed write.
type Outcome int

const (
	// Retry: the write may succeed later.
	Retry Outcome = iota
	// Drop: the server refused the event; retrying cannot help.
	Drop
)

// Classify says whether a failed write is worth retrying.
func Classify(err error) Outcome {
	var rce *restclient.RequestConstructionError
	if errors.As(err, &rce) {
		return Drop
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		switch code := se.Status().Code; {
		case code == http.StatusTooManyRequests, code >= 500:
			return Retry
		default:
			return Drop
		}
	}
	return Retry // transport errors, unexpected answers
}
