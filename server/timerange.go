package server

import (
	"fmt"
	"net/url"
	"time"

	"github.com/kubevents/kubevents/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The query parameters of a list's time range, an extension of eventsd's:
// the events last observed at or after since and before until. Each is an
// RFC 3339 time (2026-11-29T09:00:00Z) or a duration back from now (1h,
// 90m, 2h30m), as kubectl logs takes --since-time and --since.
const (
	sinceParam = "since"
	untilParam = "until"
)

// parseTimeRange reads the since and until parameters of q into sel.
// They apply to lists (and to summaries of lists): a watch reports changes
// as they happen, so it refuses them rather than ignore them.
func (s *Server) parseTimeRange(q url.Values, rr resourceRequest, sel *storage.Selector) *apierrors.StatusError {
	now := s.cfg.Clock.Now()
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{sinceParam, &sel.Since}, {untilParam, &sel.Until}} {
		vals, ok := q[p.name]
		if !ok {
			continue
		}
		if s.cfg.DisableExtensions {
			return apierrors.NewBadRequest(fmt.Sprintf("the %s parameter is an extension of eventsd's, and extensions are disabled (--extensions=false)", p.name))
		}
		if rr.verb == verbWatch {
			return apierrors.NewBadRequest(fmt.Sprintf("%s applies to lists: a watch reports changes from its resourceVersion on; list with %s, then watch from the list's resourceVersion", p.name, p.name))
		}
		if len(vals) != 1 {
			return apierrors.NewBadRequest(fmt.Sprintf("%s: %d values given, at most one is allowed", p.name, len(vals)))
		}
		t, err := parseTimeBound(vals[0], now)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("%s: %v", p.name, err))
		}
		*p.dst = t
	}
	if !sel.Since.IsZero() && !sel.Until.IsZero() && !sel.Until.After(sel.Since) {
		return apierrors.NewBadRequest(fmt.Sprintf("until (%s) must be after since (%s)", sel.Until.Format(time.RFC3339), sel.Since.Format(time.RFC3339)))
	}
	return nil
}

// parseTimeBound parses a time range's bound: an RFC 3339 time, or a
// duration (0s: now) (time.ParseDuration's syntax, such as 1h or 15m) back
// from now.
func parseTimeBound(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid value %q: give an RFC 3339 time (2006-01-02T15:04:05Z) or a duration back from now (1h, 15m)", v)
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("invalid value %q: a duration back from now must not be negative", v)
	}
	return now.Add(-d), nil
}
