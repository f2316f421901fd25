package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// printFleetReport writes rep as markdown.
func printFleetReport(w io.Writer, rep *fleetReport) {
	m := rep.Machine
	fmt.Fprintf(w, "## Fleet: one eventsd for many clusters (issue 34)\n\n")
	fmt.Fprintf(w, "- Machine: %d CPUs (nproc), %s, Linux %s, %.1f GiB RAM; data dirs on %s\n",
		m.NProc, m.CPUModel, m.Kernel, float64(m.MemTotal)/(1<<30), m.DataFS)
	fmt.Fprintf(w, "- Go: %s (GOMAXPROCS %d); everything in one eventsbench process: pebble store, mirrors, fake sources, servers, clients\n", m.GoVersion, m.GOMAXPROCS)
	fmt.Fprintf(w, "- Command: `%s`\n", rep.Command)
	fmt.Fprintf(w, "- Started %s, took %s; load average %s at the start, %s at the end\n", rep.Started.Format(time.RFC3339),
		time.Duration(rep.ElapsedS*float64(time.Second)).Round(time.Second), rep.LoadAvgStart, rep.LoadAvgEnd)
	if rep.Error != "" {
		fmt.Fprintf(w, "- **Run failed**: %s\n", firstLine(rep.Error))
	}
	if len(rep.Mirroring) > 0 {
		r0 := rep.Mirroring[0]
		fmt.Fprintf(w, "\n### Mirroring: fake sources into one pebble store (fsync per commit group), %v changes/s in all, %gs measured after %gs\n\n",
			rep.Settings["rate"], r0.DurationS, r0.WarmupS)
		fmt.Fprintln(w, "Lag: from a change in a source (mirror.FakeSource) to its name and count arriving on a watch of that source's cluster through its view of the store (clusterview.New).")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| round | sources | changes/s made (creates + updates) | late p99 ms | lag p50 ms | p90 | p99 | max | worst source's p99 | seen / changes | process cores | CPU ms/change | machine busy cores | live heap (less sources' buffers) | stacks | heap in use | RSS | goroutines |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range rep.Mirroring {
			worst := "-"
			if r.Worst != nil {
				worst = fmt.Sprintf("%s %.2f", r.Worst.Source, r.Worst.Lag.P99Ms)
			}
			fmt.Fprintf(w, "| %d | %d | %.0f (%d + %d) | %.2f | %.2f | %.2f | **%.2f** | %.2f | %s | %d / %d | %.2f | **%.3f** | %.2f | %s (%s) | %s | %s | %s | %d |\n",
				r.Round, r.Sources, r.AchievedPerSec, r.Creates, r.Updates, r.LateP99Ms, r.Lag.P50Ms, r.Lag.P90Ms, r.Lag.P99Ms, r.Lag.MaxMs, worst,
				r.Seen, r.Changes, r.ProcessCores, r.CPUMsPerChange, r.MachineBusyCores,
				mib(r.HeapLiveBytes), mib(r.HeapLiveBytes-r.SourceBuffersBytes), mib(r.StackBytes), mib(r.HeapInuseBytes), mib(r.RSSBytes), r.Goroutines)
		}
		if rep.MemoryPerSourceBytes != nil {
			fmt.Fprintf(w, "\nMemory per source (last round): live heap and stacks with %v sources less with one, the fake sources' fixed watch buffers (%s each) taken out, over the %d sources added: **%s**.\n",
				rep.Settings["sources"], mib(fakeWatchBuffer), rep.Mirroring[len(rep.Mirroring)-1].Sources-1, kib(*rep.MemoryPerSourceBytes))
		}
		fmt.Fprintln(w, "\nCPU is this whole process's (/proc/self/stat) over the measured interval: the store and the mirrors, and also the fake sources and the lag watches, the same total work in both rows.")
		last := rep.Mirroring[len(rep.Mirroring)-1]
		if len(last.PerSource) > 1 {
			fmt.Fprintf(w, "\nPer source, %d sources (round %d):\n\n", last.Sources, last.Round)
			fmt.Fprintln(w, "| source | changes | seen | lag p50 ms | p90 | p99 | max |")
			fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
			for _, s := range last.PerSource {
				fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", s.Source, s.Changes, s.Seen, s.Lag.P50Ms, s.Lag.P90Ms, s.Lag.P99Ms, s.Lag.MaxMs)
			}
		}
	}
	if l := rep.Lists; l != nil {
		how := fmt.Sprintf("filled in %.0fs, %.0f events/s", l.FillS, l.FillPerSec)
		if l.StoreReused {
			how = fmt.Sprintf("kept from an earlier run (--store-dir; filled in %.0fs then)", l.FillS)
		}
		fmt.Fprintf(w, "\n### One cluster's lists: %v among %v clusters (%d events) against the same %d events alone at a store's root (%s)\n\n",
			rep.Settings["list_cluster"], rep.Settings["clusters"], l.FleetEvents, l.ClusterEvents, how)
		fmt.Fprintf(w, "GET through loopback HTTP, Accept `%v`, each answer read whole (timed to its last byte); %v times on each store, alternating. Fleet: `/clusters/%v/PATH` of a server with Config.Clusters; single: `PATH` of a server of the cluster's events alone. A paged case's sample is the walk of every page.\n\n",
			rep.Settings["accept"], rep.Settings["repeat"], rep.Settings["list_cluster"])
		fmt.Fprintln(w, "| list | items (pages) | fleet p50 ms | p99 | single p50 ms | p99 | fleet / single p50 | first page: fleet p50 / single p50 ms |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range l.Cases {
			first := ""
			if c.FleetFirstPage != nil && c.SingleFirstPage != nil {
				first = fmt.Sprintf("%.2f / %.2f", c.FleetFirstPage.P50Ms, c.SingleFirstPage.P50Ms)
			}
			fmt.Fprintf(w, "| %s | %d (%d) | %.2f | %.2f | %.2f | %.2f | **%.2f** | %s |\n", c.Name, c.Items, c.Pages, c.Fleet.P50Ms, c.Fleet.P99Ms,
				c.Single.P50Ms, c.Single.P99Ms, c.RatioP50, first)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
	printProfiles(w, "Profiles", rep.Profiles)
}

// printProfiles lists the profiles a run wrote (what they cover: their
// path), in the order of what they cover, under title; nothing when there
// are none.
func printProfiles(w io.Writer, title string, profiles map[string]string) {
	if len(profiles) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	keys := make([]string, 0, len(profiles))
	for k := range profiles {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "- %s: %s\n", k, profiles[k])
	}
}

func kib(b float64) string { return fmt.Sprintf("%.0f KiB", b/(1<<10)) }
