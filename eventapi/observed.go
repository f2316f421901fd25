package eventapi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Occurrences returns how many occurrences ev reports: its series count,
// or its count, and at least 1.
func Occurrences(ev *corev1.Event) int32 {
	n := ev.Count
	if ev.Series != nil {
		n = ev.Series.Count
	}
	return max(n, 1)
}

// LastObserved returns when ev was last observed: its series' last
// observed time, else its lastTimestamp, else its eventTime, else its
// creation. Time ranges (since, until) and facets' time buckets use it.
func LastObserved(ev *corev1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}
