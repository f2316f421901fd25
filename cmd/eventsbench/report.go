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
		withEtcd := false
		for _, p := range rep.Create {
			withEtcd = withEtcd || p.EventsdEtcd != nil
		}
		etcdCol, etcdSep := "", ""
		if withEtcd {
			etcdCol, etcdSep = " of which etcd ms/req |", "---:|"
		}
		fmt.Fprintf(w, "\n### Creates: client-go typed Create of core/v1 Events, one clientset and connection per client (%vs measured after %vs warmup)\n\n",
			s["duration_s"], s["warmup_s"])
		fmt.Fprintln(w, "| wire | clients | server | creates/s | p50 ms | p90 ms | p99 ms | server CPU ms/req |"+etcdCol+" server cores | client CPU ms/req | other cores | conns | errors |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|"+etcdSep+"---:|---:|---:|---:|---:|")
		for _, p := range rep.Create {
			for _, row := range []struct {
				name string
				r    *createResult
			}{{"echo", p.Echo}, {"eventsd", p.Eventsd}, {"eventsd on etcd", p.EventsdEtcd}, {"kube-apiserver on etcd", p.KubeAPIServer}} {
				r := row.r
				if r == nil {
					continue
				}
				be := ""
				if withEtcd {
					be = " " + fmtPtr(r.BackendCPUMsPerReq, 4) + " |"
				}
				fmt.Fprintf(w, "| %s | %d | %s | %.0f | %.3f | %.3f | %.3f | %s |%s %s | %.3f | %.2f | %d | %d |\n",
					p.Wire, p.Clients, row.name, r.CreatesPerSec, r.P50Ms, r.P90Ms, r.P99Ms,
					fmtPtr(r.ServerCPUMsPerReq, 4), be, fmtPtr(r.ServerCPUCores, 2), r.ClientCPUMsPerReq, r.OtherCores, r.Connections, r.Errors)
			}
			blank := ""
			if withEtcd {
				blank = " |"
			}
			if p.Echo != nil && p.Eventsd != nil {
				fmt.Fprintf(w, "| %s | %d | **eventsd / echo** | **%.2f** | %.2f | | %.2f | %s |%s | | | | |\n",
					p.Wire, p.Clients, p.RatioCreatesPerSec, p.RatioP50, p.RatioP99, fmtPtr(p.RatioServerCPU, 2), blank)
			}
			if p.Echo != nil && p.EventsdEtcd != nil {
				fmt.Fprintf(w, "| %s | %d | **eventsd on etcd / echo** | **%.2f** | | | | |%s | | | | |\n", p.Wire, p.Clients, p.RatioEtcdCreatesPerSec, blank)
			}
			if p.KubeAPIServer != nil && p.EventsdEtcd != nil {
				fmt.Fprintf(w, "| %s | %d | **eventsd on etcd / kube-apiserver** | **%.2f** | | | | |%s | | | | |\n", p.Wire, p.Clients, p.RatioEtcdKubeAPIServerCreatesPerSec, blank)
			}
			if p.Eventsd != nil && p.EventsdEtcd != nil {
				fmt.Fprintf(w, "| %s | %d | **eventsd on etcd / on pebble** | **%.2f** | | | | |%s | | | | |\n", p.Wire, p.Clients, p.RatioEtcdPebbleCreatesPerSec, blank)
			}
		}
		if withEtcd {
			fmt.Fprintf(w, "\neventsd on etcd: `--storage-backend=etcd`, etcd %v; its server CPU is eventsd's plus etcd's.\n", s["etcd"])
			if ka, ok := s["kube_apiserver"]; ok {
				fmt.Fprintf(w, "\nkube-apiserver on etcd: `%v`, %v; its events in the same etcd as eventsd on etcd's, its server CPU is kube-apiserver's plus that etcd's (its main etcd is not counted).\n",
					ka, s["kube_apiserver_flags"])
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

	if es := rep.Etcd; es != nil {
		printEtcdStorage(w, rep, es)
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

// printEtcdStorage writes the etcd phase's sections.
func printEtcdStorage(w io.Writer, rep *runReport, es *etcdStorage) {
	fmt.Fprintf(w, "\n### eventsd on etcd with %d events stored: one replica's list latency and memory (kubectl's field selector, %v lists)\n\n",
		es.Events, rep.Settings["list_repeat"])
	fmt.Fprintf(w, "- etcd: %v\n", rep.Settings["etcd"])
	if f := es.Fill; f != nil {
		fmt.Fprintf(w, "- Fill: %s; %d events (%d about the listed pod, 50 per other pod) in %.0fs, %.0f/s, etcd CPU %s ms/event\n",
			es.FillMethod, f.Created, f.TargetCount, f.DurationS, f.PerSec, fmtPtr(f.ServerCPUMsPerEvent, 4))
	}
	fmt.Fprintf(w, "- etcd after the fill: data dir %s (%.0f B/event), RSS %s\n", mib(es.EtcdDisk.Bytes), float64(es.EtcdDisk.Bytes)/float64(max(es.Events, 1)), mib(es.EtcdRSS))
	fmt.Fprintln(w, "\n| replica | when | list first ms | list p50 ms | list p99 ms | items | RSS | RSS B/event over baseline |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| empty etcd (baseline) | settled, after lists | | | | 0 | %s | |\n", mib(es.BaselineRSS))
	if l := es.ListFirst; l != nil {
		fmt.Fprintf(w, "| %d events | ready (exec to ready %.1fs, index built) | %.2f | %.2f | %.2f | %d | %s | %.0f |\n",
			es.Events, es.StartS, l.FirstMs, l.P50Ms, l.P99Ms, l.Items, mib(es.RSSReady), float64(es.RSSReady-es.BaselineRSS)/float64(max(es.Events, 1)))
	}
	if l := es.ListSettled; l != nil {
		fmt.Fprintf(w, "| %d events | settled (%.0fs later) | %.2f | %.2f | %.2f | %d | %s (peak %s) | %.0f |\n",
			es.Events, es.SettleS, l.FirstMs, l.P50Ms, l.P99Ms, l.Items, mib(es.RSSSettled), mib(es.PeakRSS), es.RSSBytesPerEvent)
		fmt.Fprintf(w, "\nGo heap in use: %.0f B/event over the baseline's.\n", es.HeapBytesPerEvent)
	}
	if len(es.Reads) > 0 {
		fmt.Fprintf(w, "\n### eventsd on etcd: read throughput, lists of one pod's events (%d items) among %d, same etcd (%vs measured after %vs warmup)\n\n",
			es.Reads[0].Items, es.Events, rep.Settings["duration_s"], rep.Settings["warmup_s"])
		fmt.Fprintln(w, "| replicas | clients | lists/s | p50 ms | p90 ms | p99 ms | server CPU ms/list (replicas + etcd) | server cores | client CPU ms/list | machine busy cores | errors |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range es.Reads {
			fmt.Fprintf(w, "| %d | %d | %.0f | %.3f | %.3f | %.3f | %s | %s | %.3f | %.2f | %d |\n", r.Replicas, r.Clients, r.ListsPerSec,
				r.P50Ms, r.P90Ms, r.P99Ms, fmtPtr(r.ServerCPUMsPerList, 4), fmtPtr(r.ServerCPUCores, 2), r.ClientCPUMsPerList, r.MachineBusyCores, r.Errors)
		}
		fmt.Fprintln(w, "\nThe clients are split evenly over the replicas; all run on this machine with etcd and the load generator.")
	}
}
