package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// TestScaleTiny runs the scale benchmark at a tiny size on both backends:
// a store filled straight through the storage layer (pebble) or with
// batched transactions (etcd: 2,345 events, so that neither the last
// transaction of 125 nor the last lease of 1,000 is full), then eventsd
// started twice over it. Each start must list the target pod's 10 events
// and report every filled event stored, which it can only do if the fill
// wrote what eventsd reads.
func TestScaleTiny(t *testing.T) {
	bin := eventsdtest.Binary(t)
	for _, backend := range []string{backendPebble, backendEtcd} {
		t.Run(backend, func(t *testing.T) {
			const events = 2345
			cfg := scaleConfig{Eventsd: []string{bin}, Backend: backend, Events: []int64{events}, Dir: t.TempDir(), Keep: true,
				FillWorkers: 8, Namespaces: 3, TargetCount: 10, ListRepeat: 5, Restarts: 2, SettleMax: 2 * time.Second,
				EtcdQuotaBytes: 1 << 30, Profile: true, Command: "eventsbench scale (test)", Log: testLog{t}}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rep, err := runScale(ctx, cfg)
			if rep != nil {
				var md bytes.Buffer
				printScale(&md, rep)
				t.Logf("report:\n%s", md.String())
				if !strings.Contains(md.String(), "| "+backend+" | 2345 |") {
					t.Errorf("report lacks the %s row", backend)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Sizes) != 1 {
				t.Fatalf("%d sizes measured, want 1", len(rep.Sizes))
			}
			p := rep.Sizes[0]
			if p.Fill == nil || p.Fill.Created != events || p.Fill.Errors != 0 {
				t.Errorf("fill: %+v", p.Fill)
			}
			if p.Disk.Bytes <= 0 || p.DiskPerEvent <= 0 {
				t.Errorf("disk %+v, %v B/event", p.Disk, p.DiskPerEvent)
			}
			// On etcd the replica's data directory, kept across its
			// starts, holds its on-disk index.
			if (backend == backendEtcd) != (p.IndexDisk != nil && p.IndexDisk.Bytes > 0) {
				t.Errorf("%s: the replica's index directory %+v", backend, p.IndexDisk)
			}
			if len(p.Starts) != 2 {
				t.Fatalf("%d starts, want 2", len(p.Starts))
			}
			for i, s := range p.Starts {
				switch {
				case s.StartS <= 0 || s.RSSReady <= 0 || s.RSSSettled <= 0 || s.PeakRSS < s.RSSSettled:
					t.Errorf("start %d: %+v", i+1, s)
				case s.List == nil || s.List.Items != 10 || s.Settled == nil || s.Settled.Items != 10:
					t.Errorf("start %d: lists %+v, %+v, want 10 items", i+1, s.List, s.Settled)
				case s.Metrics["eventsd_stored_events"] != events:
					t.Errorf("start %d: eventsd reports %v stored events, want %d", i+1, s.Metrics["eventsd_stored_events"], events)
				}
				if fi, err := os.Stat(s.Profile); err != nil || fi.Size() == 0 {
					t.Errorf("start %d: heap profile %q: %v", i+1, s.Profile, err)
				}
			}
		})
	}
}
