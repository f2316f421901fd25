package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// printReport writes rep as markdown.
func printReport(w io.Writer, rep *runReport) {
	m := rep.Machine
	fmt.Fprintf(w, "## eventsd vs echo, client-go load\n\n")
	fmt.Fprintf(w, "- Machine: %d CPUs (nproc), %s, Linux %s, %.1f GiB RAM; data dirs on %s\n",
		m.NProc, m.CPUModel, m.Kernel, float64(m.MemTotal)/(1<<30), m.DataFS)
	fmt.Fprintf(w, "- Go: %s (eventsbench; GOMAXPROCS %d)\n", m.GoVersion, m.GOMAXPROCS)
	fmt.Fprintf(w, "- Command: `%s`\n", rep.Command)
	fmt.Fprintf(w, "- eventsd: `%s` (--event-ttl=24h, otherwise defaults; fsync per commit group)\n", rep.Eventsd)
	fmt.Fprintf(w, "- Started %s, took %s; load average %s at the start, %s at the end\n", rep.Started.Format(time.RFC3339),
		time.Duration(rep.ElapsedS*float64(time.Second)).Round(time.Second), rep.LoadAvgStart, rep.LoadAvgEnd)
	if rep.Error != "" {
		fmt.Fprintf(w, "- **Run failed**: %s\n", firstLine(rep.Error))
	}

	if len(rep.Create) > 0 {
		s := rep.Settings
		fmt.Fprintf(w, "\n### Creates: client-go typed Create of core/v1 Events, one clientset and connection per client (%vs measured after %vs warmup)\n\n",
			s["duration_s"], s["warmup_s"])
		fmt.Fprintln(w, "| wire | clients | server | creates/s | p50 ms | p90 ms | p99 ms | server CPU ms/req | server cores | client CPU ms/req | other cores | conns | errors |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, p := range rep.Create {
			for _, row := range []struct {
				name string
				r    *createResult
			}{{"echo", p.Echo}, {"eventsd", p.Eventsd}} {
				r := row.r
				if r == nil {
					continue
				}
				fmt.Fprintf(w, "| %s | %d | %s | %.0f | %.3f | %.3f | %.3f | %s | %s | %.3f | %.2f | %d | %d |\n",
					p.Wire, p.Clients, row.name, r.CreatesPerSec, r.P50Ms, r.P90Ms, r.P99Ms,
					fmtPtr(r.ServerCPUMsPerReq, 4), fmtPtr(r.ServerCPUCores, 2), r.ClientCPUMsPerReq, r.OtherCores, r.Connections, r.Errors)
			}
			if p.Echo != nil && p.Eventsd != nil {
				fmt.Fprintf(w, "| %s | %d | **eventsd / echo** | **%.2f** | %.2f | | %.2f | %s | | | | | |\n",
					p.Wire, p.Clients, p.RatioCreatesPerSec, p.RatioP50, p.RatioP99, fmtPtr(p.RatioServerCPU, 2))
			}
		}
	}

	if len(rep.Create) > 0 {
		fmt.Fprintln(w, "\nServer CPU is the server process's utime+stime over the measured interval per request; client CPU the load generator's;"+
			" other cores is the rest of the machine's busy CPU (kernel networking, other processes).")
	}

	if len(rep.Storage) > 0 {
		fmt.Fprintf(w, "\n### Stored events: fill, list one pod's events (kubectl's field selector, %v lists), RSS, disk\n\n", rep.Settings["list_repeat"])
		fmt.Fprintln(w, "| stored | fill creates/s (clients) | fill server CPU ms/event | when | list first ms | list p50 ms | list p99 ms | items | RSS | disk | disk B/event |")
		fmt.Fprintln(w, "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, sp := range rep.Storage {
			fill, fcpu := "-", "-"
			if f := sp.Fill; f != nil {
				fill = fmt.Sprintf("%.0f (%d)", f.PerSec, f.Clients)
				fcpu = fmtPtr(f.ServerCPUMsPerEvent, 4)
			}
			if l := sp.ListAfterFill; l != nil {
				fmt.Fprintf(w, "| %d | %s | %s | right after fill | %.2f | %.2f | %.2f | %d | %s | %s | %.0f |\n",
					sp.Events, fill, fcpu, l.FirstMs, l.P50Ms, l.P99Ms, l.Items, mib(sp.RSSAfterFill), mib(sp.DiskAfterFill.Bytes),
					float64(sp.DiskAfterFill.Bytes)/float64(sp.Events))
			}
			if l := sp.ListSettled; l != nil {
				fmt.Fprintf(w, "| %d | | | settled (%.0fs later) | %.2f | %.2f | %.2f | %d | %s (peak %s) | %s | %.0f |\n",
					sp.Events, sp.SettleS, l.FirstMs, l.P50Ms, l.P99Ms, l.Items, mib(sp.RSSSettled), mib(sp.PeakRSS),
					mib(sp.DiskSettled.Bytes), sp.DiskBytesPerEvent)
			}
		}
		last := rep.Storage[len(rep.Storage)-1]
		if last.RSSSettled > 0 {
			fmt.Fprintf(w, "\nWith %d stored: %.0f bytes of RSS and %.0f bytes of disk per event (settled).\n",
				last.Events, last.RSSBytesPerEvent, last.DiskBytesPerEvent)
		}
	}

	if len(rep.Goals) > 0 {
		fmt.Fprintln(w, "\n### Goals")
		fmt.Fprintln(w, "\n| goal | target | eventsd | upstream (kube-apiserver+etcd, kind) | met |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, g := range rep.Goals {
			met := "yes"
			if !g.Pass {
				met = "**no**"
			}
			if g.Note != "" {
				met += " (" + g.Note + ")"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", g.Goal, g.Target, g.Measured, g.Upstream, met)
		}
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "- %s\n", firstLine(n))
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
