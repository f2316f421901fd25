package nodeagent

import (
	"bytes"
	"testing"
)

// --live-series-counts is on by default and can be switched off.
func TestLiveSeriesCountsFlag(t *testing.T) {
	var stderr bytes.Buffer
	cmd := NewCommand(&stderr)
	f := cmd.Flags().Lookup("live-series-counts")
	if f == nil || f.DefValue != "true" {
		t.Fatalf("flag %+v, want one defaulting to true", f)
	}
	if err := cmd.Flags().Parse([]string{"--live-series-counts=false"}); err != nil {
		t.Fatal(err)
	}
	if f.Value.String() != "false" {
		t.Fatalf("after --live-series-counts=false: %s", f.Value)
	}
}
