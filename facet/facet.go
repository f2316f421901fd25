package facet

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds on what a Counter holds and answers.
const (
	// MaxValues is how many distinct values of one field a Counter tells
	// apart; the occurrences of further values are counted together, as
	// the field's Other facet. Reasons, kinds and namespaces number in
	// the hundreds; a field with more is summarized, not kept whole.
	MaxValues = 10000
	// MaxBuckets is the most time buckets an answer has, and what a
	// Counter keeps while counting before it widens them.
	MaxBuckets = 10000
	// DefaultTop is how many values of each field an answer gives when
	// Options.Top is 0, and MaxTop the most it may ask.
	DefaultTop = 10
	MaxTop     = 1000
	// autoBuckets is about how many buckets a Counter choosing their
	// width gives: a histogram's bars on a screen.
	autoBuckets = 120
)

// widths are the bucket widths a Counter chooses among, and widens
// through: a width is a multiple of every smaller one, so that buckets
// fold into wider ones exactly.
var widths = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 7 * 24 * time.Hour,
}

// ErrTooManyBuckets is returned when a requested bucket width would give
// more than MaxBuckets buckets.
var ErrTooManyBuckets = errors.New("too many time buckets")

// Options configure a Counter.
type Options struct {
	// Since and Until are the time range counted (the selector's); zero
	// when open. An answer's buckets span them.
	Since, Until time.Time
	// Now closes an open Until for the buckets' span.
	Now time.Time
	// Bucket is the time buckets' width; 0 chooses one giving about 120
	// buckets over the span. It must be at least a second.
	Bucket time.Duration
	// Top is how many values of each field an answer gives (DefaultTop
	// when 0, at most MaxTop).
	Top int
}

// Validate checks o's bucket width and top, and that the buckets over a
// closed range are at most MaxBuckets.
func (o Options) Validate() error {
	if o.Top < 0 || o.Top > MaxTop {
		return fmt.Errorf("top: %d: must be between 1 and %d", o.Top, MaxTop)
	}
	if o.Bucket == 0 {
		return nil
	}
	if o.Bucket < time.Second || o.Bucket%time.Second != 0 {
		return fmt.Errorf("bucket: %s: must be a whole number of seconds, at least 1s", o.Bucket)
	}
	if !o.Since.IsZero() {
		until := o.Until
		if until.IsZero() {
			until = o.Now
		}
		if n := until.Sub(o.Since) / o.Bucket; n > MaxBuckets {
			return fmt.Errorf("bucket: %s over %s gives %d buckets, more than %d: %w", o.Bucket, until.Sub(o.Since), n, MaxBuckets, ErrTooManyBuckets)
		}
	}
	return nil
}

// fields are the fields counted by value, in eventapi.FacetFields' order.
var fields = [...]struct {
	name  string
	value func(*corev1.Event) string
}{
	{eventapi.FacetReason, func(ev *corev1.Event) string { return ev.Reason }},
	{eventapi.FacetType, func(ev *corev1.Event) string { return ev.Type }},
	{eventapi.FacetKind, func(ev *corev1.Event) string { return ev.InvolvedObject.Kind }},
	{eventapi.FacetNamespace, func(ev *corev1.Event) string { return ev.Namespace }},
	{eventapi.FacetReportingController, ReportingController},
}

// ReportingController is what an event's reportingController facet
// counts: its reportingController (events.k8s.io/v1), else its source's
// component (core/v1's legacy recorders), as the two groups convert.
func ReportingController(ev *corev1.Event) string {
	if ev.ReportingController != "" {
		return ev.ReportingController
	}
	return ev.Source.Component
}

// count is what the events with one value report.
type count struct{ occurrences, events int64 }

func (c *count) add(occ int64) {
	c.occurrences += occ
	c.events++
}

// Counter counts events into facets. It is not safe for concurrent use.
type Counter struct {
	opts   Options
	values [len(fields)]map[string]*count
	other  [len(fields)]count
	// width is the buckets' width while counting: Options.Bucket, or one
	// of widths, widened when more than MaxBuckets are kept.
	width   time.Duration
	buckets map[int64]*count // by bucket start, in seconds since the epoch
	total   count
}

// NewCounter returns a Counter; opts must be valid (Options.Validate).
func NewCounter(opts Options) *Counter {
	if opts.Top == 0 {
		opts.Top = DefaultTop
	}
	c := &Counter{opts: opts, width: opts.Bucket, buckets: map[int64]*count{}}
	if c.width == 0 {
		c.width = widths[0]
		if span := c.span(); span > 0 {
			c.width = chooseWidth(span, 0)
		}
	}
	for i := range c.values {
		c.values[i] = map[string]*count{}
	}
	return c
}

// span is the closed range's length, or 0 when Since is open.
func (c *Counter) span() time.Duration {
	if c.opts.Since.IsZero() {
		return 0
	}
	until := c.opts.Until
	if until.IsZero() {
		until = c.opts.Now
	}
	return until.Sub(c.opts.Since)
}

// chooseWidth returns the narrowest width, not below min, giving at most
// autoBuckets buckets over span.
func chooseWidth(span, min time.Duration) time.Duration {
	for _, w := range widths {
		if w >= min && span/w <= autoBuckets {
			return w
		}
	}
	return widths[len(widths)-1]
}

// Add counts ev. It fails only when a requested bucket width would need
// more than MaxBuckets buckets (an open range over a long time).
func (c *Counter) Add(ev *corev1.Event) error {
	occ := int64(eventapi.Occurrences(ev))
	c.total.add(occ)
	for i, f := range fields {
		v := f.value(ev)
		n, ok := c.values[i][v]
		if !ok {
			if len(c.values[i]) >= MaxValues {
				c.other[i].add(occ)
				continue
			}
			n = &count{}
			c.values[i][v] = n
		}
		n.add(occ)
	}
	start := bucketStart(eventapi.LastObserved(ev), c.width)
	b, ok := c.buckets[start]
	if !ok {
		if len(c.buckets) >= MaxBuckets {
			if c.opts.Bucket != 0 {
				return fmt.Errorf("bucket: %s gives more than %d buckets over these events: give since and until, or a wider bucket: %w", c.opts.Bucket, MaxBuckets, ErrTooManyBuckets)
			}
			c.widen()
			start = bucketStart(eventapi.LastObserved(ev), c.width)
		}
		if b, ok = c.buckets[start]; !ok {
			b = &count{}
			c.buckets[start] = b
		}
	}
	b.add(occ)
	return nil
}

// bucketStart returns the start of t's bucket of width w, in seconds
// since the epoch: buckets are aligned on multiples of w from the epoch
// (UTC), so that every answer's buckets line up.
func bucketStart(t time.Time, w time.Duration) int64 {
	s, ws := t.Unix(), int64(w/time.Second)
	r := s % ws
	if r < 0 {
		r += ws
	}
	return s - r
}

// widen folds the buckets into the next wider width.
func (c *Counter) widen() {
	i := slices.Index(widths, c.width)
	if i < 0 || i == len(widths)-1 {
		return
	}
	c.refold(widths[i+1])
}

// refold folds the buckets into width w, a multiple of the current one.
func (c *Counter) refold(w time.Duration) {
	if w == c.width {
		return
	}
	folded := make(map[int64]*count, len(c.buckets))
	for s, n := range c.buckets {
		fs := bucketStart(time.Unix(s, 0), w)
		if f, ok := folded[fs]; ok {
			f.occurrences += n.occurrences
			f.events += n.events
			continue
		}
		folded[fs] = &count{n.occurrences, n.events}
	}
	c.width, c.buckets = w, folded
}

// Result returns the facets counted so far, and the fields whose values
// were too many to tell apart (counted together in their Other facet).
// It fails when a requested bucket width gives more than MaxBuckets
// buckets from the first event counted to the last.
func (c *Counter) Result() (*eventapi.FacetList, []string, error) {
	out := &eventapi.FacetList{
		TypeMeta:    metav1.TypeMeta{APIVersion: eventapi.KubeventsGroupVersion.String(), Kind: "FacetList"},
		Occurrences: c.total.occurrences,
		Events:      c.total.events,
		Items:       []eventapi.Facet{},
	}
	var summarized []string
	for i, f := range fields {
		vals := make([]eventapi.Facet, 0, len(c.values[i]))
		for v, n := range c.values[i] {
			vals = append(vals, eventapi.Facet{Field: f.name, Value: v, Occurrences: n.occurrences, Events: n.events})
		}
		slices.SortFunc(vals, func(a, b eventapi.Facet) int {
			return cmp.Or(cmp.Compare(b.Occurrences, a.Occurrences), cmp.Compare(b.Events, a.Events), cmp.Compare(a.Value, b.Value))
		})
		rest := c.other[i]
		if c.other[i].events > 0 {
			summarized = append(summarized, f.name)
		}
		if len(vals) > c.opts.Top {
			for _, v := range vals[c.opts.Top:] {
				rest.occurrences += v.Occurrences
				rest.events += v.Events
			}
			vals = vals[:c.opts.Top]
		}
		out.Items = append(out.Items, vals...)
		if rest.events > 0 {
			out.Items = append(out.Items, eventapi.Facet{Field: f.name, Other: true, Occurrences: rest.occurrences, Events: rest.events})
		}
	}
	times, err := c.timeFacets(out)
	if err != nil {
		return nil, nil, err
	}
	out.Items = append(out.Items, times...)
	return out, summarized, nil
}

// timeFacets returns the time buckets, every one over the span (the
// request's range, else the events' first to last), empty ones included,
// and sets out's range and width.
func (c *Counter) timeFacets(out *eventapi.FacetList) ([]eventapi.Facet, error) {
	haveData := len(c.buckets) > 0
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for s := range c.buckets {
		first, last = min(first, s), max(last, s)
	}
	var lo, hi time.Time // the span: [lo, hi)
	switch {
	case !c.opts.Since.IsZero():
		lo, hi = c.opts.Since, c.opts.Until
		if hi.IsZero() {
			// Open: up to now, or to the last event's bucket when an
			// event is observed later (a clock ahead of ours).
			hi = c.opts.Now
			if end := time.Unix(last, 0).Add(c.width); haveData && end.After(hi) {
				hi = end
			}
		}
	case haveData:
		lo, hi = time.Unix(first, 0), time.Unix(last, 0).Add(c.width)
		if !c.opts.Until.IsZero() && c.opts.Until.Before(hi) {
			hi = c.opts.Until
		}
	default:
		return nil, nil
	}
	if c.opts.Bucket == 0 {
		c.refold(chooseWidth(hi.Sub(lo), c.width))
	}
	if n := hi.Sub(lo) / c.width; n > MaxBuckets {
		return nil, fmt.Errorf("bucket: %s from the first event (%s) to the last (%s) gives %d buckets, more than %d: give since and until, or a wider bucket: %w",
			c.width, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339), n, MaxBuckets, ErrTooManyBuckets)
	}
	out.BucketSeconds = int64(c.width / time.Second)
	since, until := metav1.NewTime(lo.UTC()), metav1.NewTime(hi.UTC())
	out.Since, out.Until = &since, &until
	var facets []eventapi.Facet
	for s := bucketStart(lo, c.width); time.Unix(s, 0).Before(hi); s += int64(c.width / time.Second) {
		n := c.buckets[s]
		f := eventapi.Facet{Field: eventapi.FacetTime, Value: time.Unix(s, 0).UTC().Format(time.RFC3339)}
		if n != nil {
			f.Occurrences, f.Events = n.occurrences, n.events
		}
		facets = append(facets, f)
	}
	return facets, nil
}
