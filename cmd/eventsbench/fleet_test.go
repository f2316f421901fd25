package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestFleetFlags: bad flags of the fleet mode are refused, each with an
// error naming the flag, before anything starts.
func TestFleetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--phases", "mirror,bogus"}, `"bogus"`},
		{[]string{"--sources", "1"}, "--sources 1"},
		{[]string{"--rate", "5"}, "--rate 5"},
		{[]string{"--phases", "list", "--clusters", "4", "--list-cluster", "4"}, "--list-cluster 4"},
		{[]string{"--phases", "list", "--reason", "Nope"}, `--reason "Nope"`},
		{[]string{"--phases", "list", "--cluster-events", "3"}, "--cluster-events 3"},
		{[]string{"--duration", "0s"}, "--duration"},
	} {
		var out bytes.Buffer
		cmd := newRootCommand()
		cmd.SetArgs(append([]string{"fleet"}, tc.args...))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fleet %v: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

// TestFleetSmoke runs the fleet mode tiny (2 sources, 1 s; 2 clusters of
// 1,000 events) and checks its report: every change mirrored and seen on
// its cluster's watch, and every list the same on both stores.
func TestFleetSmoke(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	out := filepath.Join(dir, "fleet.json")
	storeDir := filepath.Join(dir, "stores")
	args := []string{"fleet", "--sources", "2", "--rate", "200", "--duration", "1s", "--warmup", "200ms", "--drain", "10s",
		"--clusters", "2", "--cluster-events", "1000", "--list-cluster", "1", "--repeat", "2", "--page-size", "100",
		"--store-dir", storeDir, "--profile-dir", filepath.Join(dir, "prof"), "--data-parent", dir, "--out", out}
	var markdown string
	run := func() *fleetReport {
		var stdout, stderr bytes.Buffer
		cmd := newRootCommand()
		cmd.SetArgs(args)
		cmd.SetOut(&stdout)
		cmd.SetErr(&stderr)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("fleet: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		markdown = stdout.String()
		if !strings.Contains(stdout.String(), "## Fleet: one eventsd for many clusters") {
			t.Errorf("the markdown report lacks its title:\n%s", stdout.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep fleetReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("report: %v\n%s", err, b)
		}
		return &rep
	}
	rep := run()
	if rep.Error != "" {
		t.Fatalf("report error: %s", rep.Error)
	}
	if len(rep.Mirroring) != 2 || rep.Mirroring[0].Sources != 1 || rep.Mirroring[1].Sources != 2 {
		t.Fatalf("mirroring runs %+v: want one of 1 source then one of 2", rep.Mirroring)
	}
	for _, r := range rep.Mirroring {
		// 200/s for 1 s: about 200 changes, half of them creates.
		if r.Changes < 150 || r.Changes > 250 || r.Seen != r.Changes || r.Missing != 0 || r.Creates == 0 || r.Updates == 0 {
			t.Errorf("%d sources: %d changes (%d creates, %d updates), %d seen, %d missing: want about 200, all seen", r.Sources, r.Changes, r.Creates, r.Updates, r.Seen, r.Missing)
		}
		if len(r.PerSource) != r.Sources || r.Lag.P99Ms <= 0 || r.CPUMsPerChange <= 0 || r.HeapLiveBytes <= 0 || r.StackBytes <= 0 {
			t.Errorf("%d sources: %d per-source lags, lag %+v, CPU %v ms/change, heap %d, stacks %d", r.Sources, len(r.PerSource), r.Lag, r.CPUMsPerChange, r.HeapLiveBytes, r.StackBytes)
		}
		for _, s := range r.PerSource {
			if s.Seen == 0 || s.Seen != s.Changes {
				t.Errorf("%d sources: source %s: %d of %d changes seen", r.Sources, s.Source, s.Seen, s.Changes)
			}
		}
	}
	if rep.MemoryPerSourceBytes == nil {
		t.Error("no memory per source")
	}
	l := rep.Lists
	if l == nil || len(l.Cases) != 8 || l.StoreReused {
		t.Fatalf("lists %+v: want 8 cases on freshly filled stores", l)
	}
	// Namespace bench-0 holds a tenth of the cluster's 1,000 events; the
	// reason BackOff one in seven of them (lifecycle).
	want := map[string]int{"/api/v1/namespaces/bench-0/events": 100, "/api/v1/events": 1000}
	for _, c := range l.Cases {
		path, _, _ := strings.Cut(c.Path, "?")
		n := want[path]
		if strings.Contains(c.Path, "reason%3DBackOff") {
			if c.Items == 0 || c.Items >= n/4 {
				t.Errorf("%s: %d items, want about a seventh of %d", c.Name, c.Items, n)
			}
		} else if c.Items != n {
			t.Errorf("%s: %d items, want %d", c.Name, c.Items, n)
		}
		if c.Paged && c.Items > 100 && c.Pages < 2 {
			t.Errorf("%s: %d items in %d pages of 100", c.Name, c.Items, c.Pages)
		}
		if c.Fleet.P50Ms <= 0 || c.Single.P50Ms <= 0 {
			t.Errorf("%s: no timings: %+v %+v", c.Name, c.Fleet, c.Single)
		}
	}
	if len(rep.Profiles) != 5 {
		t.Errorf("profiles %v: want 2 CPU and 2 heap profiles of the mirroring and one of the lists", rep.Profiles)
	}
	for what, path := range rep.Profiles {
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %s: %v", what, path, err)
		}
		if !strings.Contains(markdown, "- "+what+": "+path+"\n") {
			t.Errorf("the markdown report does not list profile %q", what)
		}
	}

	// Run again on the kept stores: reused, the same lists.
	args = append(args, "--phases", "list")
	again := run()
	if again.Lists == nil || !again.Lists.StoreReused || len(again.Lists.Cases) != 8 || again.Lists.Cases[2].Items != l.Cases[2].Items {
		t.Errorf("second run's lists %+v: want the kept stores reused, the same items", again.Lists)
	}
}
