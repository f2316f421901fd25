package index

import (
	"errors"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// BucketWidth is the span of one value of the LastObserved index. A minute
// keeps a series that is updated every few seconds from rewriting its
// entry at each update (it moves at most once a minute), while a range
// read holds at most a minute's worth of events outside the range at
// each end: a few percent of a one-hour range, the narrowest common one
// (since=1h, the default event TTL).
const BucketWidth = time.Minute

// bucketLen is the length of a bucket value: 6 digits of 6 bits.
const bucketLen = 6

// bucketDigits are the digits of a bucket value, in byte order.
const bucketDigits = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

// bucketEpochUnix is the Unix time of bucket 0: the zero time.Time, which
// eventapi.LastObserved gives an event with no time at all.
var bucketEpochUnix = time.Time{}.Unix()

// Bucket returns the LastObserved index value of time t: the number of
// whole BucketWidths since the zero time (year 1), written as 6 digits of
// 6 bits each (bucketDigits, ASCII in their order), so that every value
// has the same width, byte order is time order, no value holds a zero
// byte (index keys escape those) and an index entry spends 6 bytes on
// it. The 36 bits reach past the year 100,000; earlier and later times
// take the first and the last bucket (order is kept, candidates are
// checked exactly).
func Bucket(t time.Time) string {
	sec, w := t.Unix()-bucketEpochUnix, int64(BucketWidth/time.Second)
	b := min(max(sec/w, 0), 1<<(6*bucketLen)-1)
	var out [bucketLen]byte
	for i := bucketLen - 1; i >= 0; i-- {
		out[i] = bucketDigits[b&63]
		b >>= 6
	}
	return string(out[:])
}

// Range is a lookup of an ordered index over a span of its values: the
// keys whose events index ID holds a value from From to To, both
// included; an empty From or To leaves that end open. The values' byte
// order is their order, so a backend reads it as one contiguous range of
// entries (Bounds), which come in value order, not key order: it collects
// their keys and sorts them.
type Range struct {
	ID       ID
	From, To string
}

// Bounds returns the lower (included) and upper (excluded) bounds, in the
// layout of AppendEntryPrefix, of the entries r covers.
func (r Range) Bounds() (lower, upper []byte) {
	lower = append([]byte{byte(r.ID)}, r.From...)
	if r.To == "" {
		return lower, []byte{byte(r.ID) + 1}
	}
	return lower, PrefixEnd(AppendEntryPrefix(nil, r.ID, r.To))
}

// EntryKey returns the entry key after the value of an index entry in the
// layout of AppendEntryPrefix (its ID byte first): the "<ns>/<name>" after
// the value's terminator; ok is false when entry has no terminator.
func EntryKey(entry []byte) (key []byte, ok bool) {
	for i := 1; i+1 < len(entry); i++ {
		if entry[i] == 0 {
			if entry[i+1] == 1 {
				return entry[i+2:], true
			}
			i++ // an escaped zero byte of the value
		}
	}
	return nil, false
}

// NarrowRange is the widest time range that the planner prefers to an
// equality on a coarse field (reason, reporting instance, action,
// reporting component, source, type). With the default one-hour event
// TTL it covers about a twelfth of the stored events, about the share of
// type=Warning, the rarest coarse value commonly asked for; the coarse
// values' shares are not known to the planner, and the common ones
// (type=Normal, source=kubelet, reason=Pulled) cover far more. A wider or
// open range loses to such an equality, and both beat a scan.
const NarrowRange = 5 * time.Minute

// WithClock returns s planning with c: an open-ended time range (since,
// no until) spans from its start to c's now, so that since=5m is narrow.
// Without a clock such a range counts as wide.
func (s Set) WithClock(c clock.PassiveClock) Set {
	s.clock = c
	return s
}

// timeRange returns the LastObserved range lookup of sel's time range, if
// s keeps that index and sel has a range, and whether it is narrow (see
// NarrowRange).
func (s Set) timeRange(sel storage.Selector) (r *Range, narrow bool) {
	if !s.Has(LastObserved) || (sel.Since.IsZero() && sel.Until.IsZero()) {
		return nil, false
	}
	r = &Range{ID: LastObserved}
	if !sel.Since.IsZero() {
		r.From = Bucket(sel.Since)
	}
	if !sel.Until.IsZero() {
		// Until is excluded: its bucket is needed only if the range
		// reaches into it.
		r.To = Bucket(sel.Until.Add(-time.Nanosecond))
	}
	until := sel.Until
	if until.IsZero() && s.clock != nil {
		until = s.clock.Now()
	}
	narrow = !sel.Since.IsZero() && !until.IsZero() && until.Sub(sel.Since) <= NarrowRange
	return r, narrow
}

// emptyRange reports whether sel's time range holds no instant.
func emptyRange(sel storage.Selector) bool {
	return !sel.Since.IsZero() && !sel.Until.IsZero() && !sel.Since.Before(sel.Until)
}

// lastObservedValue is the value of the LastObserved index for ev.
func lastObservedValue(ev *corev1.Event) string { return Bucket(eventapi.LastObserved(ev)) }

// Contains reports whether value v is within r.
func (r Range) Contains(v string) bool {
	return (r.From == "" || v >= r.From) && (r.To == "" || v <= r.To)
}

// MaxRangeLookups bounds the lookups RangeLookups makes of a range: 4,096
// minute buckets are almost three days of events. A backend merging one
// stream per lookup serves a wider range by a scan (Memory and diskindex
// fail with ErrRangeTooWide, and etcdstore reads the range of etcd).
const MaxRangeLookups = 1 << 12

// ErrRangeTooWide is the error of a Keys whose plan's range holds more
// than MaxRangeLookups values: the backend reads its store instead.
var ErrRangeTooWide = errors.New("index: the time range holds more buckets than are merged")

// RangeLookups returns a lookup for each of the values present (those an
// index holds, each once, in any order) that r contains, in value order,
// for a backend whose index is a lookup per value (Memory, diskindex); ok
// is false when there are more than MaxRangeLookups.
func RangeLookups(r Range, present iter.Seq[string]) (lookups []Lookup, ok bool) {
	for v := range present {
		if r.Contains(v) {
			if len(lookups) == MaxRangeLookups {
				return nil, false
			}
			lookups = append(lookups, Lookup{ID: r.ID, Value: v})
		}
	}
	slices.SortFunc(lookups, func(a, b Lookup) int { return strings.Compare(a.Value, b.Value) })
	return lookups, true
}
