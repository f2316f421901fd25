package index

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBucketOrderIsTimeOrder(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	times := []time.Time{{}, time.Unix(-61, 0), time.Unix(-60, 0), time.Unix(-1, 999), time.Unix(0, 0), time.Unix(59, 0), time.Unix(60, 0),
		base.Add(-time.Nanosecond), base, base.Add(59 * time.Second), base.Add(time.Minute), base.AddDate(100, 0, 0)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		times = append(times, base.Add(time.Duration(r.Int64N(int64(48*time.Hour)))-24*time.Hour))
	}
	for _, a := range times {
		ba := Bucket(a)
		if len(ba) != bucketLen || bytes.IndexByte([]byte(ba), 0) >= 0 {
			t.Fatalf("Bucket(%v) = %q: not %d bytes without zeros", a, ba, bucketLen)
		}
		for _, b := range times {
			bb := Bucket(b)
			sameMinute := a.Truncate(time.Minute).Equal(b.Truncate(time.Minute))
			if a.Unix() < 0 || b.Unix() < 0 { // Truncate rounds toward zero time, not the epoch
				sameMinute = floorDiv(a.Unix(), 60) == floorDiv(b.Unix(), 60)
			}
			switch {
			case sameMinute && ba != bb:
				t.Errorf("%v and %v are in one minute, buckets %q, %q", a, b, ba, bb)
			case !sameMinute && a.Before(b) && ba >= bb:
				t.Errorf("%v before %v, buckets %q >= %q", a, b, ba, bb)
			}
		}
	}
}

func TestBucketEnds(t *testing.T) {
	if !sort.StringsAreSorted(strings.Split(bucketDigits, "")) || len(bucketDigits) != 64 {
		t.Fatalf("bucketDigits are not 64 digits in byte order")
	}
	first, last := strings.Repeat("-", bucketLen), strings.Repeat("z", bucketLen)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, first},
		{time.Time{}.Add(-time.Hour), first},
		{time.Time{}.Add(59 * time.Second), first},
		{time.Time{}.Add(time.Minute), first[:bucketLen-1] + "0"},
		{time.Date(200000, 1, 1, 0, 0, 0, 0, time.UTC), last},
	} {
		if got := Bucket(c.t); got != c.want {
			t.Errorf("Bucket(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// entry is an index entry in AppendEntryPrefix's layout.
func entry(id ID, value, key string) []byte {
	return append(AppendEntryPrefix(nil, id, value), key...)
}

func TestRangeBounds(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC)
	in := func(r Range, e []byte) bool {
		lo, hi := r.Bounds()
		return bytes.Compare(e, lo) >= 0 && bytes.Compare(e, hi) < 0
	}
	b := func(d time.Duration) string { return Bucket(t0.Add(d)) }
	for _, c := range []struct {
		name string
		r    Range
		e    []byte
		want bool
	}{
		{"inside", Range{LastObserved, b(-time.Hour), b(0)}, entry(LastObserved, b(-time.Minute), "a/b"), true},
		{"first bucket", Range{LastObserved, b(-time.Hour), b(0)}, entry(LastObserved, b(-time.Hour), "a/b"), true},
		{"last bucket", Range{LastObserved, b(-time.Hour), b(0)}, entry(LastObserved, b(0), "zzz/\xff\xff"), true},
		{"before", Range{LastObserved, b(-time.Hour), b(0)}, entry(LastObserved, b(-time.Hour-time.Minute), "z/z"), false},
		{"after", Range{LastObserved, b(-time.Hour), b(0)}, entry(LastObserved, b(time.Minute), ""), false},
		{"open start", Range{LastObserved, "", b(0)}, entry(LastObserved, Bucket(time.Time{}), "a/b"), true},
		{"open end", Range{LastObserved, b(0), ""}, entry(LastObserved, b(1000*time.Hour), "a/b"), true},
		{"open end, other index", Range{LastObserved, b(0), ""}, entry(Type, "Warning", "a/b"), false},
		{"open start, other index", Range{LastObserved, "", b(0)}, entry(Source, "kubelet", "a/b"), false},
	} {
		if got := in(c.r, c.e); got != c.want {
			t.Errorf("%s: in range = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEntryKey(t *testing.T) {
	for _, c := range []struct {
		e    []byte
		want string
		ok   bool
	}{
		{entry(LastObserved, Bucket(time.Unix(0, 0)), "ns/name"), "ns/name", true},
		{entry(Reason, "a\x00b", "ns/x"), "ns/x", true},
		{entry(Reason, "\x00", "ns/\x00\x01"), "ns/\x00\x01", true},
		{[]byte{byte(Reason), 'a', 0}, "", false},
		{[]byte{byte(Reason)}, "", false},
	} {
		got, ok := EntryKey(c.e)
		if string(got) != c.want || ok != c.ok {
			t.Errorf("EntryKey(%q) = %q, %v; want %q, %v", c.e, got, ok, c.want, c.ok)
		}
	}
}

func TestLastObservedValue(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, ev := range []*corev1.Event{
		{LastTimestamp: metav1.NewTime(t1), EventTime: metav1.NewMicroTime(t1.Add(-time.Hour))},
		{Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(t1)}, EventTime: metav1.NewMicroTime(t1.Add(-time.Hour))},
		{EventTime: metav1.NewMicroTime(t1)},
	} {
		if got, want := Value(ev, LastObserved), Bucket(t1); got != want || eventapi.LastObserved(ev) != t1 {
			t.Errorf("Value(%+v) = %q, want %q", ev, got, want)
		}
	}
	if Value(&corev1.Event{}, LastObserved) == "" {
		t.Errorf("an event without times has no bucket: it would be missing from until-only ranges")
	}
}

func TestPlanTimeRange(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	set := Base().WithClock(clk)
	since := func(d time.Duration) storage.Selector { return storage.Selector{Since: now.Add(-d)} }
	rng := func(from, to time.Time) *Range {
		r := &Range{ID: LastObserved}
		if !from.IsZero() {
			r.From = Bucket(from)
		}
		if !to.IsZero() {
			r.To = Bucket(to)
		}
		return r
	}
	with := func(sel storage.Selector, f ...eventapi.Requirement) storage.Selector {
		sel.Fields = f
		return sel
	}
	for _, c := range []struct {
		name string
		set  Set
		sel  storage.Selector
		want Plan
	}{
		{"since", set, since(time.Hour), Plan{Range: rng(now.Add(-time.Hour), time.Time{})}},
		{"until excludes its instant", set, storage.Selector{Until: now}, Plan{Range: rng(time.Time{}, now.Add(-time.Nanosecond))}},
		{"since and until", set, storage.Selector{Namespace: "a", Since: now.Add(-2 * time.Hour), Until: now.Add(-time.Hour + time.Second)},
			Plan{Namespace: "a", Range: rng(now.Add(-2*time.Hour), now.Add(-time.Hour))}},
		{"empty range", set, storage.Selector{Since: now, Until: now}, Plan{None: true}},
		{"inverted range", set, storage.Selector{Since: now, Until: now.Add(-time.Hour)}, Plan{None: true}},
		{"without the index", Base().Without(LastObserved), since(time.Minute), Plan{}},
		{"All has the time index", All(), since(time.Minute), Plan{Range: rng(now.Add(-time.Minute), time.Time{})}},
		{"name wins", set, with(storage.Selector{Namespace: "a", Since: now.Add(-time.Minute)}, eq(eventapi.FieldName, "e")), Plan{Namespace: "a", Name: "e"}},
		{"uid wins over a narrow range", set, with(since(time.Minute), eq(eventapi.FieldInvolvedUID, "u")), Plan{Lookups: []Lookup{{InvolvedUID, "u"}}}},
		{"involves.name wins over a narrow range", set, with(since(time.Minute), eq(eventapi.FieldInvolvesName, "p")),
			Plan{Lookups: []Lookup{{InvolvedName, "p"}, {RelatedName, "p"}}}},
		{"family wins over a narrow range", set, storage.Selector{Since: now.Add(-time.Minute), Objects: objectSet{"p"}},
			Plan{Lookups: []Lookup{{InvolvedName, "p"}, {RelatedName, "p"}}}},
		{"narrow since beats type", set, with(since(NarrowRange), eq(eventapi.FieldType, "Warning")), Plan{Range: rng(now.Add(-NarrowRange), time.Time{})}},
		{"narrow since and until beats reason", set, with(storage.Selector{Since: now.Add(-48 * time.Hour), Until: now.Add(-48*time.Hour + time.Minute)}, eq(eventapi.FieldReason, "BackOff")),
			Plan{Range: rng(now.Add(-48*time.Hour), now.Add(-48*time.Hour+time.Minute-time.Nanosecond))}},
		{"wide since loses to type", set, with(since(NarrowRange+time.Second), eq(eventapi.FieldType, "Warning")), Plan{Lookups: []Lookup{{Type, "Warning"}}}},
		{"wide range loses to source", set, with(storage.Selector{Since: now.Add(-time.Hour), Until: now}, eq(eventapi.FieldSource, "kubelet")),
			Plan{Lookups: []Lookup{{Source, "kubelet"}}}},
		{"until only loses to reason", set, with(storage.Selector{Until: now}, eq(eventapi.FieldReason, "r")), Plan{Lookups: []Lookup{{Reason, "r"}}}},
		{"since without a clock is wide", Base(), with(since(time.Minute), eq(eventapi.FieldType, "Warning")), Plan{Lookups: []Lookup{{Type, "Warning"}}}},
		{"unindexed field keeps the range", set, with(since(48*time.Hour), eq(eventapi.FieldInvolvedKind, "Pod")), Plan{Range: rng(now.Add(-48*time.Hour), time.Time{})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, c.set.Plan(c.sel), cmpopts.EquateComparable(storage.Clusters{})); d != "" {
				t.Errorf("Plan (-want +got):\n%s", d)
			}
		})
	}
}

// objectSet is a family of objects by name.
type objectSet []string

func (o objectSet) Names() []string { return o }

func (o objectSet) Involves(ev *corev1.Event) bool {
	for _, n := range o {
		if ev.InvolvedObject.Name == n || ev.Related != nil && ev.Related.Name == n {
			return true
		}
	}
	return false
}

// TestMemoryRangeTooWide: a range of more buckets than MaxRangeLookups
// fails with ErrRangeTooWide (the backend reads its store instead); one
// of exactly MaxRangeLookups is served.
func TestMemoryRangeTooWide(t *testing.T) {
	m := NewMemory(All())
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxRangeLookups + 1 {
		m.Put(event(fmt.Sprintf("ns/e%05d", i), func(ev *corev1.Event) {
			ev.LastTimestamp = metav1.NewTime(start.Add(time.Duration(i) * time.Minute))
		}), int64(i+1))
	}
	all := Plan{Range: &Range{ID: LastObserved}}
	if _, _, err := m.Keys(all, 0, "", 0); !errors.Is(err, ErrRangeTooWide) {
		t.Fatalf("%d buckets: %v, want ErrRangeTooWide", MaxRangeLookups+1, err)
	}
	most := Plan{Range: &Range{ID: LastObserved, From: Bucket(start.Add(time.Minute))}}
	keys, _, err := m.Keys(most, 0, "", 0)
	if err != nil || len(keys) != MaxRangeLookups || keys[0] != "ns/e00001" {
		t.Fatalf("%d buckets: %d keys from %v, %v", MaxRangeLookups, len(keys), keys[:min(1, len(keys))], err)
	}
}
