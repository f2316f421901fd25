package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// logLine writes a progress line, stamped with the time of day, to w (if
// not nil): every mode's logf.
func logLine(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// latencies summarises a set of samples.
type latencies struct {
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// summarize sorts samples (in place) and returns their nearest-rank
// percentiles.
func summarize(samples []time.Duration) latencies {
	if len(samples) == 0 {
		return latencies{}
	}
	slices.Sort(samples)
	return latencies{
		P50Ms: ms(percentile(samples, 50)),
		P90Ms: ms(percentile(samples, 90)),
		P99Ms: ms(percentile(samples, 99)),
		MaxMs: ms(samples[len(samples)-1]),
	}
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// round3 keeps three decimals, enough for the JSON and tables.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
