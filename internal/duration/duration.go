// Package duration reads the durations eventsd's flags and configuration
// files take, Go's (time.ParseDuration: 30s, 5m, 168h), with errors that
// say what to write instead: "7d": use hours, e.g. 168h. Go durations
// have no days, weeks or years, the units retention is thought in, and
// pflag's own error ("must be a duration like "30s" or "5m"") does not
// say so.
package duration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// longUnits are the units people write that Go's durations lack, in
// hours.
var longUnits = map[string]float64{"d": 24, "w": 7 * 24, "y": 365 * 24}

// longUnit matches a number with one of longUnits' units (or their
// spelled-out forms: 7days, 2 weeks), so that it can be turned into hours.
var longUnit = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*(days?|weeks?|years?|d|w|y)`)

// Parse is time.ParseDuration with an error that quotes s and says how to
// write it: in hours, with the equivalent, when s counts days, weeks or
// years (7d: 168h), else with examples.
func Parse(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	return 0, Error(s)
}

// Error is Parse's error for s, which time.ParseDuration refused: s
// quoted, then Hint's advice.
func Error(s string) error {
	return fmt.Errorf("%q: %s", s, Hint(s))
}

// Hint says how to write s, which time.ParseDuration refused, as a Go
// duration: for field errors, which quote the value themselves.
func Hint(s string) string {
	if h, ok := inHours(s); ok {
		return "use hours, e.g. " + h
	}
	return "not a duration: write a number and a unit (h, m, s, ms), e.g. 30s, 5m or 168h (7 days)"
}

// inHours rewrites s's days, weeks and years as hours and, when the
// result is a Go duration, returns it written as one: "1d12h" is "36h".
func inHours(s string) (string, bool) {
	found := false
	rewritten := longUnit.ReplaceAllStringFunc(strings.TrimSpace(s), func(m string) string {
		sub := longUnit.FindStringSubmatch(m)
		n, err := strconv.ParseFloat(sub[1], 64)
		if err != nil {
			return m
		}
		found = true
		return strconv.FormatFloat(n*longUnits[sub[2][:1]], 'f', -1, 64) + "h"
	})
	if !found {
		return "", false
	}
	d, err := time.ParseDuration(strings.ReplaceAll(rewritten, " ", ""))
	if err != nil || d <= 0 {
		return "", false
	}
	return format(d), true
}

// format writes d without its zero minutes and seconds: 168h, 36h30m.
func format(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// hinted is a duration flag's value whose Set fails with Parse's error.
type hinted struct {
	pflag.Value
}

// Set implements pflag.Value.
func (h hinted) Set(s string) error {
	if _, err := time.ParseDuration(s); err != nil {
		return Error(s)
	}
	return h.Value.Set(s)
}

// HintFlags makes every duration flag of fs (pflag's DurationVar, type
// "duration") fail a bad value with Parse's error: --event-ttl 7d says
// `"7d": use hours, e.g. 168h`. Call it once the flags are defined.
func HintFlags(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "duration" {
			if _, done := f.Value.(hinted); !done {
				f.Value = hinted{f.Value}
			}
		}
	})
}
