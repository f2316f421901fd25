package evctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/eventapi"
)

// topFields are the fields evctl top ranks by, as the user names them,
// and the facet each is.
var topFields = map[string]string{
	"reason":              eventapi.FacetReason,
	"reasons":             eventapi.FacetReason,
	"type":                eventapi.FacetType,
	"types":               eventapi.FacetType,
	"kind":                eventapi.FacetKind,
	"kinds":               eventapi.FacetKind,
	"namespace":           eventapi.FacetNamespace,
	"namespaces":          eventapi.FacetNamespace,
	"ns":                  eventapi.FacetNamespace,
	"controller":          eventapi.FacetReportingController,
	"controllers":         eventapi.FacetReportingController,
	"reportingcontroller": eventapi.FacetReportingController,
	"time":                eventapi.FacetTime,
}

// topBarWidth is the widest bar evctl top time draws.
const topBarWidth = 40

// topFlags are top's own flags.
type topFlags struct {
	since, until, filter, fieldSelector, typ, bucket string
	top                                              int
}

func (e *env) topCommand() *cobra.Command {
	tf := &topFlags{}
	cmd := &cobra.Command{
		Use:   "top [reason|type|kind|namespace|controller|time]",
		Short: "The loudest reasons (or types, kinds, namespaces, controllers) by occurrences, or occurrences over time",
		Long: `top ranks the values of a field by the occurrences the selected events
report (counts and series summed, not events: a BackOff repeated 300 times
in one event counts 300), loudest first, with the share of all
occurrences; "time" gives the occurrences per time bucket instead, as bars.
It reads eventsd's facets (events.kubevents.io/v1), computed on the server
over every selected event, so it needs eventsd.

By default it covers the last hour (--since 1h) of the context's namespace
(-n, or -A for every namespace).`,
		Example: `  evctl top                                      # the loudest reasons of the last hour
  evctl top -A --since 24h --type Warning        # the loudest warnings of the day, everywhere
  evctl top kind --filter 'object.note.contains("OOM")'
  evctl top namespace -A --top 5
  evctl top time --since 6h --bucket 15m         # occurrences over time, as bars`,
		Args: cobra.MaximumNArgs(1),
		RunE: e.runE(func(cmd *cobra.Command, args []string) error {
			return e.top(cmd.Context(), args, tf)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&tf.since, "since", "1h", "Only events last observed after this: a duration back from now (e.g. 30m, 24h) or an RFC3339 time; \"\" for all.")
	fl.StringVar(&tf.until, "until", "", "Only events last observed before this: a duration back from now or an RFC3339 time.")
	fl.StringVar(&tf.filter, "filter", "", "Only events this CEL expression selects (as evctl search).")
	fl.StringVar(&tf.fieldSelector, "field-selector", "", "Only events this field selector selects (events.kubevents.io field names, e.g. reason=BackOff,regarding.kind=Pod).")
	fl.StringVar(&tf.typ, "type", "", "Only events of this type: Normal or Warning.")
	fl.IntVar(&tf.top, "top", 10, "How many values to show; the rest are summed as (other).")
	fl.StringVar(&tf.bucket, "bucket", "", "For time: the buckets' width (e.g. 5m, 1h); by default about 120 buckets over the range.")
	return cmd
}

// top runs evctl top.
func (e *env) top(ctx context.Context, args []string, tf *topFlags) error {
	if err := checkOutput(e.output); err != nil {
		return err
	}
	field := eventapi.FacetReason
	if len(args) == 1 {
		f, ok := topFields[strings.ToLower(args[0])]
		if !ok {
			return fmt.Errorf("evctl top ranks by reason, type, kind, namespace, controller or time, not %q", args[0])
		}
		field = f
	}
	sel := tf.fieldSelector
	switch strings.ToLower(tf.typ) {
	case "":
	case "normal", "warning":
		term := "type=" + strings.ToUpper(tf.typ[:1]) + strings.ToLower(tf.typ[1:])
		sel = strings.TrimPrefix(sel+","+term, ",")
	default:
		return fmt.Errorf("valid --type values are Normal or Warning, not %q", tf.typ)
	}
	if tf.top < 1 {
		return fmt.Errorf("--top must be at least 1")
	}
	c, err := e.conn.client()
	if err != nil {
		return err
	}
	e.timeout = c.timeout
	ns := c.ns
	if e.conn.allNamespaces {
		ns = metav1.NamespaceAll
	}
	list, err := c.facets(ctx, ns, map[string]string{
		"fieldSelector": sel, "filter": tf.filter, "since": tf.since, "until": tf.until,
		"top": strconv.Itoa(tf.top), "bucket": tf.bucket,
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the server has no facets (eventsd's events.kubevents.io/v1): evctl top needs eventsd: %w", err)
	}
	if err != nil {
		return err
	}
	switch e.output {
	case "json":
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(list)
		if err != nil {
			return err
		}
		_, err = e.out.Write(b)
		return err
	}
	if list.Events == 0 {
		e.noEvents(ns)
		return nil
	}
	return printTop(e.out, list, field)
}

// printTop writes field's facets of list as a table: each value's
// occurrences, events and share of all occurrences, or, for time, each
// bucket's with a bar.
func printTop(out io.Writer, list *eventapi.FacetList, field string) error {
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	var rows []eventapi.Facet
	var most int64
	for _, f := range list.Items {
		if f.Field == field {
			rows = append(rows, f)
			most = max(most, f.Occurrences)
		}
	}
	if field == eventapi.FacetTime {
		fmt.Fprintf(tw, "TIME (%s BUCKETS)\tOCCURRENCES\tEVENTS\t\n", duration.ShortHumanDuration(time.Duration(list.BucketSeconds)*time.Second))
		for _, f := range rows {
			bar := ""
			if most > 0 {
				n := int((f.Occurrences*topBarWidth + most - 1) / most)
				bar = strings.Repeat("#", n)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", f.Value, f.Occurrences, f.Events, bar)
		}
		return tw.Flush()
	}
	header := strings.ToUpper(field)
	if field == eventapi.FacetReportingController {
		header = "CONTROLLER"
	}
	fmt.Fprintf(tw, "%s\tOCCURRENCES\tEVENTS\tSHARE\n", header)
	for _, f := range rows {
		v := f.Value
		switch {
		case f.Other:
			v = "(other)"
		case v == "":
			v = "<none>"
		}
		share := "0%"
		if list.Occurrences > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(f.Occurrences)/float64(list.Occurrences))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", v, f.Occurrences, f.Events, share)
	}
	return tw.Flush()
}
