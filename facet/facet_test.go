package facet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// randomEvents returns n events of a few reasons, types, kinds and
// namespaces, last observed over span after t0, a third as series.
func randomEvents(r *rand.Rand, n int, span time.Duration) []*corev1.Event {
	evs := make([]*corev1.Event, n)
	for i := range evs {
		at := t0.Add(time.Duration(r.Int64N(int64(span))))
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", r.IntN(4)), Name: fmt.Sprint(i)},
			InvolvedObject: corev1.ObjectReference{Kind: []string{"Pod", "Node", "Deployment"}[r.IntN(3)]},
			Reason:         []string{"BackOff", "Pulled", "OOMKilling", "Scheduled", "FailedScheduling"}[r.IntN(5)],
			Type:           []string{"Normal", "Warning"}[r.IntN(2)],
			Count:          int32(r.IntN(5)),
		}
		if i%3 == 0 {
			ev.Series = &corev1.EventSeries{Count: int32(2 + r.IntN(50)), LastObservedTime: metav1.NewMicroTime(at)}
			ev.ReportingController = "kubelet"
		} else {
			ev.LastTimestamp = metav1.NewTime(at)
			ev.Source.Component = "default-scheduler"
		}
		evs[i] = ev
	}
	return evs
}

// TestCounterMatchesBruteForce: every value's occurrences and events, the
// totals and every bucket are what a plain loop over the events gives,
// for chosen and requested widths, open and closed ranges.
func TestCounterMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	evs := randomEvents(r, 5000, 6*time.Hour)
	for _, c := range []struct {
		name      string
		opts      Options
		wantWidth time.Duration
	}{
		{"open range, chosen width", Options{}, 5 * time.Minute},
		{"closed range, chosen width", Options{Since: t0, Until: t0.Add(6 * time.Hour)}, 5 * time.Minute},
		{"since and now", Options{Since: t0.Add(-6 * time.Hour), Now: t0.Add(6 * time.Hour)}, 10 * time.Minute},
		{"requested width", Options{Bucket: 7 * time.Minute, Top: 2}, 7 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.opts.Validate(); err != nil {
				t.Fatal(err)
			}
			cnt := NewCounter(c.opts)
			for _, ev := range evs {
				if err := cnt.Add(ev); err != nil {
					t.Fatal(err)
				}
			}
			got, summarized, err := cnt.Result()
			if err != nil || len(summarized) != 0 {
				t.Fatal(err, summarized)
			}
			if time.Duration(got.BucketSeconds)*time.Second != c.wantWidth {
				t.Errorf("width %ds, want %s", got.BucketSeconds, c.wantWidth)
			}
			top := c.opts.Top
			if top == 0 {
				top = DefaultTop
			}
			want := map[string][2]int64{}
			var total [2]int64
			for _, ev := range evs {
				occ := int64(eventapi.Occurrences(ev))
				total[0] += occ
				total[1]++
				b := bucketStart(eventapi.LastObserved(ev), time.Duration(got.BucketSeconds)*time.Second)
				for _, k := range []string{
					"reason/" + ev.Reason, "type/" + ev.Type, "kind/" + ev.InvolvedObject.Kind,
					"namespace/" + ev.Namespace, "reportingController/" + ReportingController(ev),
					"time/" + time.Unix(b, 0).UTC().Format(time.RFC3339),
				} {
					w := want[k]
					want[k] = [2]int64{w[0] + occ, w[1] + 1}
				}
			}
			if got.Occurrences != total[0] || got.Events != total[1] {
				t.Errorf("totals %d/%d, want %d/%d", got.Occurrences, got.Events, total[0], total[1])
			}
			perField := map[string]int{}
			var others [2]int64
			for _, f := range got.Items {
				if f.Other {
					others[0] += f.Occurrences
					others[1] += f.Events
					continue
				}
				perField[f.Field]++
				k := f.Field + "/" + f.Value
				if w := want[k]; f.Occurrences != w[0] || f.Events != w[1] {
					t.Errorf("%s: %d/%d, want %d/%d", k, f.Occurrences, f.Events, w[0], w[1])
				}
				delete(want, k)
			}
			for _, f := range eventapi.FacetFields[:5] {
				if perField[f] > top {
					t.Errorf("%s: %d values, top is %d", f, perField[f], top)
				}
			}
			// What the top left out is in the Other facets.
			var left [2]int64
			for k, w := range want {
				if strings.HasPrefix(k, "time/") {
					t.Errorf("bucket %s missing", k)
				}
				left[0] += w[0]
				left[1] += w[1]
			}
			if left != others {
				t.Errorf("other facets %v, want %v", others, left)
			}
		})
	}
}

// TestCounterBuckets: a range's buckets are all given, empty ones too,
// aligned on the width from the epoch; a counter choosing the width
// widens its buckets rather than keep more than MaxBuckets; a requested
// width that would give more is refused.
func TestCounterBuckets(t *testing.T) {
	c := NewCounter(Options{Since: t0.Add(90 * time.Second), Until: t0.Add(10 * time.Minute)})
	ev := &corev1.Event{LastTimestamp: metav1.NewTime(t0.Add(5*time.Minute + 2*time.Second)), Count: 3}
	if err := c.Add(ev); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Result()
	if err != nil {
		t.Fatal(err)
	}
	var buckets []string
	for _, f := range got.Items {
		if f.Field == eventapi.FacetTime {
			buckets = append(buckets, fmt.Sprintf("%s=%d", f.Value[11:19], f.Occurrences))
		}
	}
	// 8.5 minutes at 5s would be 102 buckets: the width is 5s.
	if got.BucketSeconds != 5 || len(buckets) != 102 || buckets[0] != "09:01:30=0" || buckets[len(buckets)-1] != "09:09:55=0" {
		t.Fatalf("width %d, %d buckets: %v", got.BucketSeconds, len(buckets), buckets)
	}
	if buckets[42] != "09:05:00=3" {
		t.Fatalf("bucket 42 %s, want 09:05:00=3", buckets[42])
	}

	// An open range over a year at one event a day: the counter widens.
	c = NewCounter(Options{})
	for d := range 365 {
		for s := range 40 {
			if err := c.Add(&corev1.Event{LastTimestamp: metav1.NewTime(t0.Add(time.Duration(d)*24*time.Hour + time.Duration(s)*time.Second))}); err != nil {
				t.Fatal(err)
			}
		}
		if len(c.buckets) > MaxBuckets {
			t.Fatalf("%d buckets kept", len(c.buckets))
		}
	}
	if got, _, err = c.Result(); err != nil || got.BucketSeconds != 7*24*3600 || got.Events != 365*40 {
		t.Fatalf("a year: %v, width %d, %d events", err, got.BucketSeconds, got.Events)
	}

	// A requested width: refused when a closed range gives too many,
	// and when the events do.
	if err := (Options{Bucket: time.Second, Since: t0, Until: t0.Add(24 * time.Hour)}).Validate(); !errors.Is(err, ErrTooManyBuckets) {
		t.Fatalf("1s over a day: %v", err)
	}
	for _, o := range []Options{{Bucket: 1500 * time.Millisecond}, {Bucket: -time.Second}, {Top: MaxTop + 1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	c = NewCounter(Options{Bucket: time.Second})
	for _, at := range []time.Duration{0, 24 * time.Hour} {
		if err := c.Add(&corev1.Event{LastTimestamp: metav1.NewTime(t0.Add(at))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Result(); !errors.Is(err, ErrTooManyBuckets) || !strings.Contains(err.Error(), "give since and until") {
		t.Fatalf("1s over a day of events: %v", err)
	}
}

// TestCounterManyValues: past MaxValues distinct values, a field's
// further values are counted together in its Other facet and reported.
func TestCounterManyValues(t *testing.T) {
	c := NewCounter(Options{Top: 3})
	for i := range MaxValues + 50 {
		if err := c.Add(&corev1.Event{Reason: fmt.Sprintf("r%d", i), LastTimestamp: metav1.NewTime(t0)}); err != nil {
			t.Fatal(err)
		}
	}
	got, summarized, err := c.Result()
	if err != nil || len(summarized) != 1 || summarized[0] != eventapi.FacetReason {
		t.Fatalf("%v %v", err, summarized)
	}
	var reasons, other int64
	for _, f := range got.Items {
		if f.Field == eventapi.FacetReason {
			if f.Other {
				other = f.Events
			} else {
				reasons++
			}
		}
	}
	if reasons != 3 || other != MaxValues+50-3 {
		t.Fatalf("%d reasons, other %d", reasons, other)
	}
	if len(c.values[0]) != MaxValues {
		t.Fatalf("%d values kept", len(c.values[0]))
	}
}
