package evctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// printer renders rows.
type printer struct {
	out           io.Writer
	output        string // "", "wide", "json", "yaml"
	allNamespaces bool
	// clusters adds a CLUSTER column, first: the events are read across
	// a fleet's clusters (--all-clusters).
	clusters   bool
	now        func() time.Time
	headerDone bool
}

func (p *printer) age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(p.now().Sub(t))
}

// lastSeen is kubectl events' LAST SEEN cell, with the series state when
// the recorder made it known: "47s (x4 over 7m17s, finished)".
func (p *printer) lastSeen(r *row) string {
	if r.count <= 1 {
		return p.age(r.last)
	}
	s := fmt.Sprintf("%s (x%d over %s", p.age(r.last), r.count, p.age(r.first))
	if r.state != "" {
		s += ", " + r.state
	}
	return s + ")"
}

func source(ev *eventsv1.Event) string {
	c, h := ev.ReportingController, ev.ReportingInstance
	if c == "" {
		c, h = ev.DeprecatedSource.Component, ev.DeprecatedSource.Host
	}
	if h == "" {
		return c
	}
	return c + ", " + h
}

func related(ev *eventsv1.Event) string {
	if r := ev.Related; r != nil {
		return objectRef(r.Kind, r.Name)
	}
	return ""
}

// table prints rows as evctl get does, after a header unless one was
// printed already (watch prints in batches).
func (p *printer) table(rows []*row) error {
	switch p.output {
	case "json", "yaml":
		return p.list(rows)
	}
	w := tabwriter.NewWriter(p.out, 0, 8, 3, ' ', 0)
	wide := p.output == "wide"
	if !p.headerDone {
		p.headerDone = true
		cols := []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}
		if wide {
			cols = []string{"LAST SEEN", "TYPE", "REASON", "ACTION", "OBJECT", "RELATED", "SOURCE", "FIRST SEEN", "COUNT", "NAME", "MESSAGE"}
		}
		if p.allNamespaces {
			cols = append([]string{"NAMESPACE"}, cols...)
		}
		fmt.Fprintln(w, strings.Join(p.clusterCell(cols, "CLUSTER"), "\t"))
	}
	for _, r := range rows {
		ev := r.ev
		cells := []string{p.lastSeen(r), ev.Type, ev.Reason, objectRef(ev.Regarding.Kind, ev.Regarding.Name), trimmed(ev.Note)}
		if wide {
			cells = []string{p.lastSeen(r), ev.Type, ev.Reason, ev.Action, objectRef(ev.Regarding.Kind, ev.Regarding.Name),
				related(ev), source(ev), p.age(r.first), fmt.Sprint(r.count), ev.Name, trimmed(ev.Note)}
		}
		if p.allNamespaces {
			cells = append([]string{ev.Namespace}, cells...)
		}
		fmt.Fprintln(w, strings.Join(p.clusterCell(cells, clusterOf(r)), "\t"))
	}
	return w.Flush()
}

// list prints rows as an events.k8s.io/v1 EventList (JSON or YAML), or
// for a watch one Event per document.
func (p *printer) list(rows []*row) error {
	l := &eventsv1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "events.k8s.io/v1"}, Items: []eventsv1.Event{}}
	for _, r := range rows {
		ev := *r.ev
		ev.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}
		l.Items = append(l.Items, ev)
	}
	b, err := json.MarshalIndent(l, "", "    ")
	if err != nil {
		return err
	}
	if p.output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = p.out.Write(b)
	return err
}

// timeFormat is how the timeline shows instants: absolute, in UTC, so a
// timeline reads the same whenever and wherever it is printed.
const timeFormat = "2006-01-02T15:04:05Z"

// timeline prints rows in event-time order: each event at its first
// occurrence, a series as the range it spans with its count and state.
func (p *printer) timeline(rows []*row) error {
	switch p.output {
	case "json", "yaml":
		return p.list(rows)
	}
	w := tabwriter.NewWriter(p.out, 0, 8, 3, ' ', 0)
	p.header(w, p.clusterColumn("TIME\tUNTIL\tCOUNT\tTYPE\tREASON\tROLE\tOBJECT\tMESSAGE"),
		p.clusterColumn("TIME\tUNTIL\tCOUNT\tTYPE\tREASON\tACTION\tROLE\tOBJECT\tRELATED\tSOURCE\tNAMESPACE\tNAME\tMESSAGE"))
	for _, r := range rows {
		ev := r.ev
		until, count := span(r)
		cells := []string{r.first.UTC().Format(timeFormat), until, count, ev.Type, ev.Reason, r.role,
			objectRef(ev.Regarding.Kind, ev.Regarding.Name), trimmed(ev.Note)}
		if p.output == "wide" {
			cells = []string{r.first.UTC().Format(timeFormat), until, count, ev.Type, ev.Reason, ev.Action, r.role,
				objectRef(ev.Regarding.Kind, ev.Regarding.Name), related(ev), source(ev), ev.Namespace, ev.Name, trimmed(ev.Note)}
		}
		fmt.Fprintln(w, strings.Join(p.clusterCell(cells, clusterOf(r)), "\t"))
	}
	return w.Flush()
}

// clusterCell returns cells with cell first when p shows the CLUSTER
// column.
func (p *printer) clusterCell(cells []string, cell string) []string {
	if !p.clusters {
		return cells
	}
	return append([]string{cell}, cells...)
}

// clusterColumn returns a header's columns (tab-separated) with CLUSTER
// first when p shows it.
func (p *printer) clusterColumn(cols string) string {
	if !p.clusters {
		return cols
	}
	return "CLUSTER\t" + cols
}

// span is a timeline's UNTIL and COUNT cells of r: a series' last time,
// count and state.
func span(r *row) (until, count string) {
	until, count = "", "1"
	if r.count > 1 {
		until = r.last.UTC().Format(timeFormat)
		count = fmt.Sprintf("x%d", r.count)
		if r.state != "" {
			count += " " + r.state
		}
	}
	return until, count
}

// familyCells are the cells of a family timeline's line: the OBJECT
// cell given, then the event's (none for an object without events).
func (p *printer) familyCells(object string, r *row) []string {
	wide := p.output == "wide"
	if r == nil {
		n := 6
		if wide {
			n = 11
		}
		return append([]string{object}, make([]string, n)...)
	}
	ev := r.ev
	until, count := span(r)
	if wide {
		return []string{object, r.first.UTC().Format(timeFormat), until, count, ev.Type, ev.Reason, ev.Action,
			related(ev), source(ev), ev.Namespace, ev.Name, trimmed(ev.Note)}
	}
	return []string{object, r.first.UTC().Format(timeFormat), until, count, ev.Type, ev.Reason, trimmed(ev.Note)}
}

// familyLines prints a family timeline's lines, after the header unless
// it was printed already, without the padding tabwriter leaves at the
// end of a line.
func (p *printer) familyLines(lines [][]string) error {
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0)
	p.header(w, "OBJECT\tTIME\tUNTIL\tCOUNT\tTYPE\tREASON\tMESSAGE",
		"OBJECT\tTIME\tUNTIL\tCOUNT\tTYPE\tREASON\tACTION\tRELATED\tSOURCE\tNAMESPACE\tNAME\tMESSAGE")
	for _, l := range lines {
		fmt.Fprintln(w, strings.Join(l, "\t"))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	_, err := io.WriteString(p.out, out.String())
	return err
}

// family prints a family's timeline: its objects as a tree, each with its
// events in time order; as JSON or YAML, the events, in time order.
func (p *printer) family(t *familyTree) error {
	switch p.output {
	case "json", "yaml":
		return p.list(t.rows())
	}
	cells, rows, _ := t.lines()
	lines := make([][]string, len(cells))
	for i := range cells {
		lines[i] = p.familyCells(cells[i], rows[i])
	}
	return p.familyLines(lines)
}

// familyStream prints the events a family's watch delivers, each with its
// object.
func (p *printer) familyStream(rows []*row) error {
	switch p.output {
	case "json", "yaml":
		return p.stream(rows, true)
	}
	lines := make([][]string, len(rows))
	for i, r := range rows {
		lines[i] = p.familyCells(objectRef(r.ev.Regarding.Kind, r.ev.Regarding.Name), r)
	}
	return p.familyLines(lines)
}

// header writes a timeline's header to w, of cols (wide with -o wide),
// unless it was written already (a watch prints in batches).
func (p *printer) header(w io.Writer, cols, wide string) {
	if p.headerDone {
		return
	}
	p.headerDone = true
	if p.output == "wide" {
		cols = wide
	}
	fmt.Fprintln(w, cols)
}
