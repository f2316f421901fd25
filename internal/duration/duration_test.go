package duration

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestParse: Go durations parse; days, weeks and years are refused with
// the same length in hours; anything else with examples.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "168h", want: 168 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "7d", err: `"7d": use hours, e.g. 168h`},
		{in: "1d12h", err: `"1d12h": use hours, e.g. 36h`},
		{in: "1.5d", err: `"1.5d": use hours, e.g. 36h`},
		{in: "2w", err: `"2w": use hours, e.g. 336h`},
		{in: "30days", err: `"30days": use hours, e.g. 720h`},
		{in: "1y", err: `"1y": use hours, e.g. 8760h`},
		{in: "1d30m", err: `"1d30m": use hours, e.g. 24h30m`},
		{in: "soon", err: `"soon": not a duration: write a number and a unit (h, m, s, ms), e.g. 30s, 5m or 168h (7 days)`},
		{in: "10", err: `"10": not a duration`},
		{in: "d", err: `"d": not a duration`},
	} {
		got, err := Parse(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("Parse(%q) = %v, %v; want the error %s", c.in, got, err, c.err)
		}
	}
}

// TestHintFlags: a duration flag set from a command line takes Go
// durations as before and refuses days with the hint, in pflag's error
// naming the flag; other flags are left as they are.
func TestHintFlags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var ttl time.Duration
	var n int
	fs.DurationVar(&ttl, "event-ttl", time.Hour, "")
	fs.IntVar(&n, "n", 0, "")
	HintFlags(fs)
	HintFlags(fs) // twice wraps once
	if err := fs.Parse([]string{"--event-ttl", "168h"}); err != nil || ttl != 168*time.Hour {
		t.Fatalf("--event-ttl 168h: %v, %v", ttl, err)
	}
	if d, err := fs.GetDuration("event-ttl"); err != nil || d != 168*time.Hour {
		t.Errorf("GetDuration: %v, %v", d, err)
	}
	err := fs.Parse([]string{"--event-ttl", "7d"})
	want := `invalid argument "7d" for "--event-ttl" flag: "7d": use hours, e.g. 168h`
	if err == nil || err.Error() != want {
		t.Errorf("--event-ttl 7d: %v; want %s", err, want)
	}
	if ttl != 168*time.Hour {
		t.Errorf("a refused value changed the flag: %v", ttl)
	}
	if fs.Lookup("event-ttl").Value.Type() != "duration" {
		t.Errorf("the help's type is %q, not duration", fs.Lookup("event-ttl").Value.Type())
	}
	if _, wrapped := fs.Lookup("n").Value.(hinted); wrapped {
		t.Error("an int flag was wrapped")
	}
	if _, twice := fs.Lookup("event-ttl").Value.(hinted).Value.(hinted); twice {
		t.Error("HintFlags wrapped a flag twice")
	}
}
